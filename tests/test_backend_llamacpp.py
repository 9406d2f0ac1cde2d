"""The in-process llama.cpp backend on the bundled SmolLM2 GGUF: trie exactness, agreement, determinism."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trustjudge import Judge, items_from_dicts
from trustjudge._prompts import SCORE_MARKER, SYSTEM, VERDICT_MARKER
from trustjudge.backends import GenerateRequest, LabelRequest, get_backend
from trustjudge.errors import PrerequisiteError

from ._llama_server import require_llama_cpp, time_bound  # noqa: F401 - autouse fixture


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` raise ImportError
    with pytest.raises(PrerequisiteError, match=r"trustjudge\[llamacpp\]"):
        get_backend("llamacpp/smollm2-135m")


@pytest.fixture(scope="module")
def smol() -> Iterator[Any]:
    require_llama_cpp()
    from trustjudge.backends._llamacpp import LlamaCppBackend
    from trustjudge.backends._models import ModelSpec, smollm2_gguf

    backend = LlamaCppBackend(ModelSpec("smollm2-135m", smollm2_gguf(), "chat"), n_ctx=2048)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def full_logits() -> Iterator[Any]:
    """A second llama.cpp context that keeps every position's logits, for brute force."""
    require_llama_cpp()
    import llama_cpp

    from trustjudge.backends._models import smollm2_gguf

    # A float32 KV cache and one thread, like the backend (see LlamaCppBackend's kv_f32 and n_threads).
    llm = llama_cpp.Llama(str(smollm2_gguf()), n_ctx=1024, logits_all=True, verbose=False,
                          type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32,
                          n_threads=1, n_threads_batch=1)
    yield llm
    llm.close()


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
# scales: the backend keeps the KV cache in float32 and never decodes a lone token while scoring, and
# with both, llama.cpp's logits do not depend on how the tokens were batched. With llama.cpp's defaults
# (float16 KV, one-token decodes for trie branches) the same comparison differed by up to 0.0055, and a
# lone-token decode alone moved one label by 0.018: that is the "batching moves probabilities" effect.
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
        worst = max(worst, max(abs(math.exp(a) - math.exp(b)) for a, b in zip(got, want)))
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


@pytest.mark.model
def test_generation_is_deterministic_and_stops(smol: Any) -> None:
    prompt = _prompt(smol, "", "It is four.")
    req = GenerateRequest(prompt, ("Score:",), 40)
    a = smol.generate([req])[0]
    smol.reset_cache()
    b = smol.generate([req])[0]
    assert a == b.__class__(b.text, b.token_logprobs, b.finish_reason, b.prompt_tokens, a.latency_s, b.completion_tokens)
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
