"""The in-process llama.cpp backend on the bundled SmolLM2 GGUF: trie exactness, agreement, determinism."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trustjudge import Judge, items_from_dicts
from trustjudge.backends import GenerateRequest, LabelRequest, get_backend
from trustjudge.errors import PrerequisiteError
from trustjudge.modes._prompts import SCORE_MARKER, SYSTEM, VERDICT_MARKER

from ._llama_server import require_llama_cpp, time_bound  # noqa: F401 - autouse fixture


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` raise ImportError
    with pytest.raises(PrerequisiteError, match=r"trustjudge\[llamacpp\]"):
        get_backend("llamacpp/smollm2-135m")


def bundled_backend(name: str, n_ctx: int) -> Any:
    """A bundled judge on the in-process llama.cpp backend (skipped without llama-cpp-python)."""
    require_llama_cpp()
    from trustjudge.backends._llamacpp import LlamaCppBackend
    from trustjudge.backends._models import BUNDLED, ModelSpec

    fmt, locate = BUNDLED[name]
    return LlamaCppBackend(ModelSpec(name, locate(), fmt), n_ctx=n_ctx)


@pytest.fixture(scope="module")
def smol() -> Iterator[Any]:
    backend = bundled_backend("smollm2-135m", 2048)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def full_logits() -> Iterator[Any]:
    """A second llama.cpp context that keeps every position's logits, for brute force."""
    require_llama_cpp()

    from trustjudge.backends._models import smollm2_gguf

    llm = reference_llama(smollm2_gguf())
    yield llm
    llm.close()


def reference_llama(path: Path) -> Any:
    """A plain llama-cpp-python context with the backend's numerics settings and every position's logits.

    The settings that fix llama.cpp's numerics are the backend's: a float32 KV cache, flash attention,
    32-token micro-batches (CPU flash attention switches to a tiled kernel at 64 query tokens, which moved a
    logit by 0.7 on SmolLM2) and the same thread count.
    """
    import llama_cpp

    threads = max(1, (os.cpu_count() or 2) // 2)
    return llama_cpp.Llama(str(path), n_ctx=1024, logits_all=True, verbose=False, type_k=llama_cpp.GGML_TYPE_F32,
                           type_v=llama_cpp.GGML_TYPE_F32, flash_attn=True, n_ubatch=32, n_threads=threads,
                           n_threads_batch=threads)


def brute_force(llm: Any, smol: Any, prompt: str, labels: tuple[str, ...]) -> list[float]:
    """Each label scored by its own evaluation of prompt + label from an empty cache (no trie, no reuse)."""
    from trustjudge.backends._llamacpp import log_softmax

    ids = smol._encode(prompt)
    out = []
    for label in labels:
        lt = list(smol._encode_label(label))
        llm.reset()
        llm.eval(ids + lt)
        scores = np.asarray(llm.scores[: len(ids) + len(lt)])
        out.append(sum(float(log_softmax(scores[len(ids) - 1 + j])[t]) for j, t in enumerate(lt)))
    return out


def _prompt(backend: Any, marker: str, text: str = "It is four.") -> str:
    user = f"Rate the answer.\nQuestion: What is 2 + 2?\nAnswer: {text}"
    return str(backend.format_prompt(SYSTEM, user, marker))


# max |p_trie - p_brute| over a scale's labels. Measured 0.0 (bit-identical) on the 5-, 10- and 100-point
# scales, one prompt or several in one decode, with the KV cache reused or not: the backend keeps the KV
# cache in float32, uses flash attention with 32-token micro-batches, and keeps the cached prompt in KV cells
# in position order. Each of these matters: with llama.cpp's defaults (float16 KV) the trie differed by
# up to 0.0055; without flash attention a trie node's logits moved by up to 0.5 with the number of other
# branches in the batch; with 64+ query tokens per micro-batch, CPU flash attention switches kernels
# (0.7 in a logit); and a prompt decoded into freed cells out of position order moved labels by 0.008.
# The tolerance is kept at 1e-6 (not 0) only so that a libm or BLAS change at the last bit does not fail it.
TRIE_TOLERANCE = 1e-6


@pytest.mark.model
@pytest.mark.parametrize("points", [5, 10])  # 100 points: also 0.0, but brute force takes 2 min
def test_trie_equals_brute_force(smol: Any, full_logits: Any, points: int) -> None:
    labels = tuple(f"{i}]" for i in range(1, points + 1))
    worst = 0.0
    for text in ("4", "It is four.", "5"):
        prompt = _prompt(smol, SCORE_MARKER, text)
        smol.reset_cache()
        got = smol.label_logprobs([LabelRequest(prompt, labels)])[0].logprobs
        want = brute_force(full_logits, smol, prompt, labels)
        worst = max(worst, *(abs(math.exp(a) - math.exp(b)) for a, b in zip(got, want)))
        assert 0 < sum(math.exp(x) for x in got) <= 1.0 + 1e-6
    assert worst < TRIE_TOLERANCE, worst


@pytest.mark.model
def test_labels_split_into_tokens_and_verdicts_score(smol: Any) -> None:
    assert len(smol._encode_label("57]")) == 3  # digits are single tokens on SmolLM2
    lps = smol.label_logprobs([LabelRequest(_prompt(smol, VERDICT_MARKER), ("A]", "B]", "C]"))])[0].logprobs
    assert all(math.isfinite(x) for x in lps)


@pytest.mark.model
def test_deterministic_across_runs_and_fresh_contexts(smol: Any) -> None:
    from trustjudge.backends._llamacpp import LlamaCppBackend

    labels = tuple(f"{i}]" for i in range(1, 11))
    reqs = [LabelRequest(_prompt(smol, SCORE_MARKER, t), labels) for t in ("4", "It is four.", "5", "Four.")]
    smol.reset_cache()
    first = [r.logprobs for r in smol.label_logprobs(reqs)]
    smol.reset_cache()
    second = [r.logprobs for r in smol.label_logprobs(reqs)]
    assert first == second
    other = LlamaCppBackend(smol.spec, n_ctx=2048)
    try:
        assert [r.logprobs for r in other.label_logprobs(reqs)] == first
    finally:
        other.close()
    # The thread count is not in the store key, so it must not change a bit: ggml gives each thread whole
    # rows of a product, and the sums within a row run in the same order whatever the count.
    counts = {n for n in (1, 2, 3) if n != smol.threads}
    for n in counts:
        threaded = LlamaCppBackend(smol.spec, n_ctx=2048, n_threads=n)
        try:
            assert threaded.threads == n and [r.logprobs for r in threaded.label_logprobs(reqs)] == first, n
        finally:
            threaded.close()


def test_thread_count_default_and_override(monkeypatch: pytest.MonkeyPatch) -> None:
    from trustjudge.backends._llamacpp import env_threads, physical_cores
    from trustjudge.errors import ConfigError

    assert 1 <= physical_cores() <= (os.cpu_count() or 1)
    monkeypatch.delenv("TRUSTJUDGE_THREADS", raising=False)
    assert env_threads() is None
    monkeypatch.setenv("TRUSTJUDGE_THREADS", " 3 ")
    assert env_threads() == 3
    for bad in ("0", "-1", "two", "1.5"):
        monkeypatch.setenv("TRUSTJUDGE_THREADS", bad)
        with pytest.raises(ConfigError, match="TRUSTJUDGE_THREADS must be a positive integer"):
            env_threads()


@pytest.mark.model
def test_generation_is_deterministic_and_stops(smol: Any) -> None:
    prompt = _prompt(smol, "", "It is four.")
    req = GenerateRequest(prompt, ("Score:",), 40)
    a = smol.generate([req])[0]
    smol.reset_cache()
    b = smol.generate([req])[0]
    assert a == b.__class__(b.text, b.token_logprobs, b.finish_reason, b.prompt_tokens, a.latency_s,
                            b.completion_tokens)
    assert a.finish_reason in ("stop", "length", "eos") and "Score:" not in a.text
    assert len(a.token_logprobs) >= 1 and all(x <= 0 for x in a.token_logprobs)
    sampled = smol.generate([GenerateRequest(prompt, ("Score:",), 20, temperature=0.8, seed=3)] * 2)
    assert sampled[0].text == sampled[1].text


# Three questions with references and answers from right to absurd. The judge's expected scores spread
# mostly between questions (SD 0.7 over the 24); within one question they differ by little more than the
# numerical noise between the two backends, so an item set of near-equal answers ranks worse (an earlier
# set of 23 answers to four questions without references, all scored 4.0-4.8: Spearman 0.86).
ITEMS = [
    ("What is 2 + 2?", "4", ["4", "5", "It is four.", "22", "Four, because two plus two is four.", "I don't know.",
                             "The answer is 4.", "Bananas are yellow."]),
    ("What is the capital of France?", "Paris", ["Paris.", "London.", "The capital of France is Paris.", "France.",
                                                 "Berlin is the capital.", "paris", "It is Paris, on the Seine.",
                                                 "asdf qwerty"]),
    ("How many legs does a spider have?", "Eight", ["Eight.", "Six.", "8", "Spiders have eight legs.", "Ten legs.",
                                                    "Many.", "Spiders are insects with six legs.",
                                                    "Eight legs: four pairs."]),
]


@pytest.mark.model
def test_scores_agree_with_the_transformers_backend(smol: Any, smollm: Any, tmp_path: Path) -> None:
    from scipy.stats import spearmanr

    items = items_from_dicts([
        {"id": f"q{i}", "question": q, "reference": ref,
         "responses": [{"id": f"r{j}", "text": t} for j, t in enumerate(rs)]}
        for i, (q, ref, rs) in enumerate(ITEMS)
    ])
    scores = {}
    for name, backend in (("llamacpp", smol), ("hf", smollm)):
        judge = Judge(backend, store=tmp_path / f"{name}.sqlite", scale=10)
        scores[name] = [r.scores["expected"] for r in judge.score(items)]
    assert len(scores["hf"]) >= 20
    rho = spearmanr(scores["llamacpp"], scores["hf"]).statistic
    gap = max(abs(a - b) for a, b in zip(scores["llamacpp"], scores["hf"]))
    # The same weights (transformers de-quantizes the Q4_1 GGUF to fp32) computed two ways: llama.cpp
    # quantizes activations to 8 bits for its Q4_1 dot products, torch keeps them in fp32.
    # Measured: Spearman 0.963, largest gap 0.155 points on the 10-point scale.
    assert rho >= 0.95, (rho, scores)
    assert gap < 0.3, (gap, scores)


@pytest.mark.model
def test_prompts_batched_into_one_decode_equal_each_alone(smol: Any) -> None:
    """A group of prompts sharing a prefix (one decode, one trie per prompt) == each prompt on its own."""
    labels = tuple(f"{i}]" for i in range(1, 11))
    reqs = [LabelRequest(_prompt(smol, SCORE_MARKER, t), labels) for t in ("4", "It is four.", "5", "Four.")]
    smol.reset_cache()
    together = [r.logprobs for r in smol.label_logprobs(reqs)]
    alone = []
    for req in reqs:
        smol.reset_cache()
        alone.append(smol.label_logprobs([req])[0].logprobs)
    worst = max(abs(math.exp(a) - math.exp(b)) for x, y in zip(together, alone) for a, b in zip(x, y))
    assert worst < TRIE_TOLERANCE, worst


@pytest.mark.model
def test_prompts_sharing_a_first_response_run_each_token_once(smol: Any) -> None:
    """Pairwise-shaped prompts: beyond the group's common prefix, a first response two prompts share is
    evaluated once (the prompts' own tokens form a trie too), and every score equals the prompt alone."""
    answers = {"a": "It is four.", "b": "Four, since two and two make four.", "c": "5"}

    def pair(x: str, y: str) -> str:
        user = (f"Which answer is better?\nQuestion: What is 2 + 2?\nAnswer A: {answers[x]}\n"
                f"Answer B: {answers[y]}")
        return str(smol.format_prompt(SYSTEM, user, VERDICT_MARKER))

    labels = ("A]", "B]", "C]")
    reqs = [LabelRequest(pair(x, y), labels) for x, y in (("a", "b"), ("a", "c"), ("b", "a"), ("b", "c"))]
    smol.reset_cache()
    before = smol.computed_tokens
    together = [r.logprobs for r in smol.label_logprobs(reqs)]
    ran = smol.computed_tokens - before
    ids = [smol._encode(r.prompt) for r in reqs]
    distinct = len({tuple(x[:p]) for x in ids for p in range(1, len(x) + 1)})
    trie = len(smol._label_tree(labels).nodes) * len(reqs)
    assert ran == distinct + trie, (ran, distinct, trie)  # before the prompt trie: "a" and "b" ran twice
    alone = []
    for req in reqs:
        smol.reset_cache()
        alone.append(smol.label_logprobs([req])[0].logprobs)
    worst = max(abs(math.exp(a) - math.exp(b)) for x, y in zip(together, alone) for a, b in zip(x, y))
    assert worst < TRIE_TOLERANCE, worst


# On Qwen2.5-Coder-1.5B Q4_K_M, llama.cpp's CPU kernels are not invariant to how the same tokens are cut
# into micro-batches: brute force itself (prompt + "3]" on a 48-token prompt) moved p by up to 0.0102 when
# the one evaluation was split at other token positions (0.0014 at the prompt/label boundary, 0.0066
# five tokens earlier; with weight repacking off: 0.0063), so no scoring order can equal "the" brute force
# bit for bit. The batched trie differed from the unsplit brute force by 0.0022 on 5 points. The tolerance
# is twice the largest split-to-split spread seen; the bit-exact check of the trie's masks and sequences
# is the SmolLM2 test above (1e-6), whose kernels are split-invariant.
QWEN_TOLERANCE = 0.02


@pytest.fixture(scope="module")
def qwen() -> Iterator[Any]:
    backend = bundled_backend("qwen2.5-coder-1.5b", 1024)
    yield backend
    backend.close()


@pytest.mark.model
@pytest.mark.parametrize("points", [5, 10])  # 100 points: the brute force takes minutes on the 1.5B model
def test_default_judge_trie_equals_brute_force(qwen: Any, points: int) -> None:
    """The default judge (Qwen2.5-Coder-1.5B): the batched trie against each label's own evaluation."""
    from trustjudge.backends._models import qwen_coder_gguf

    labels = tuple(f"{i}]" for i in range(1, points + 1))
    assert len(qwen._encode_label("10]")) == 3  # digits are single tokens on Qwen2.5
    prompt = _prompt(qwen, SCORE_MARKER, "It is four.")
    qwen.reset_cache()
    got = qwen.label_logprobs([LabelRequest(prompt, labels)])[0].logprobs
    llm = reference_llama(qwen_coder_gguf())
    try:
        want = brute_force(llm, qwen, prompt, labels)
    finally:
        llm.close()
    worst = max(abs(math.exp(a) - math.exp(b)) for a, b in zip(got, want))
    assert worst < QWEN_TOLERANCE, worst
    mass = sum(math.exp(x) for x in got)
    assert 0 < mass <= 1.0 + 1e-6
