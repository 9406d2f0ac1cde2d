"""The embedded transformers backend on the real bundled judge: exactness and determinism."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from trustjudge.backends import LabelRequest
from trustjudge.backends._transformers import _EMPTY, TransformersBackend, build_trie
from trustjudge.modes._prompts import SCORE_MARKER, SYSTEM, VERDICT_MARKER

pytestmark = pytest.mark.model


def brute_force(backend: TransformersBackend, prompt: str, labels: tuple[str, ...]) -> list[float]:
    """Each label scored by its own full forward pass of prompt + label (no cache, no trie)."""
    ids = backend._encode(prompt)
    out = []
    with torch.inference_mode():
        for label in labels:
            lt = list(backend._encode_label(label))
            logits = backend.model(torch.tensor([ids + lt])).logits[0].float()
            lp = torch.log_softmax(logits, dim=-1)
            out.append(sum(float(lp[len(ids) - 1 + j, t]) for j, t in enumerate(lt)))
    return out


def _prompt(backend: TransformersBackend, marker: str, text: str = "It is four.") -> str:
    user = f"Rate the answer.\nQuestion: What is 2 + 2?\nAnswer: {text}"
    return backend.format_prompt(SYSTEM, user, marker)


def test_labels_split_into_digit_tokens(smollm: Any) -> None:
    # The reason for the trie: "57" is two tokens on SmolLM2, so single-token readers drop it.
    assert len(smollm._encode_label("57]")) == 3
    joint = smollm._encode(_prompt(smollm, SCORE_MARKER) + "57]")
    assert joint[-3:] == list(smollm._encode_label("57]"))


@pytest.mark.parametrize("points", [5, 10, 100])
def test_trie_equals_brute_force(smollm: Any, points: int) -> None:
    labels = tuple(f"{i}]" for i in range(1, points + 1))
    prompt = _prompt(smollm, SCORE_MARKER)
    smollm.reset_cache()
    got = smollm.label_logprobs([LabelRequest(prompt, labels)])[0].logprobs
    want = brute_force(smollm, prompt, labels)
    worst = max(abs(math.exp(a) - math.exp(b)) for a, b in zip(got, want))
    assert worst < 1e-4, worst
    assert 0 < sum(math.exp(x) for x in got) <= 1.0 + 1e-6


def test_needed_closing_reads_ten_nodes_and_equals_brute_force(smollm: Any) -> None:
    # closing="needed" on 100 points: the bracket only after 1..10 (they begin other labels).
    labels = tuple(f"{i}]" if i <= 10 else str(i) for i in range(1, 101))
    assert len(smollm._trie(labels).node_tokens) == 10
    assert len(smollm._trie(tuple(f"{i}]" for i in range(1, 101))).node_tokens) == 100
    prompt = _prompt(smollm, SCORE_MARKER)
    got = smollm.label_logprobs([LabelRequest(prompt, labels)])[0].logprobs
    want = brute_force(smollm, prompt, labels)
    assert max(abs(math.exp(a) - math.exp(b)) for a, b in zip(got, want)) < 1e-4


def test_verdict_labels_equal_brute_force(smollm: Any) -> None:
    labels = ("A]", "B]", "C]")
    prompt = _prompt(smollm, VERDICT_MARKER)
    got = smollm.label_logprobs([LabelRequest(prompt, labels)])[0].logprobs
    want = brute_force(smollm, prompt, labels)
    assert max(abs(math.exp(a) - math.exp(b)) for a, b in zip(got, want)) < 1e-4


def test_kv_reuse_and_batching_do_not_change_probabilities(smollm: Any) -> None:
    labels = tuple(f"{i}]" for i in range(1, 101))
    prompts = [_prompt(smollm, SCORE_MARKER, t) for t in ("4", "It is four.", "5", "Four, since 2 + 2 = 4.")]
    fresh = []
    for p in prompts:  # no reuse: the cache is dropped before every prompt
        smollm.reset_cache()
        fresh.append(smollm.label_logprobs([LabelRequest(p, labels)])[0].logprobs)
    smollm.reset_cache()
    # The four share everything up to the answer: one batched pass (left-padded rows) scores them.
    encoded = [smollm._encode(p) for p in prompts]
    trie = smollm._trie(labels)
    assert [members for members, _ in smollm._groups(encoded, [trie] * 4)] == [[0, 1, 2, 3]]
    assert len({len(e) for e in encoded}) > 1  # rows of different lengths: padding is exercised
    batched = [r.logprobs for r in smollm.label_logprobs([LabelRequest(p, labels) for p in prompts])]
    smollm.reset_cache()
    pairs = [r.logprobs for i in range(0, 4, 2)
             for r in smollm.label_logprobs([LabelRequest(p, labels) for p in prompts[i:i + 2]])]
    for a, b, c in zip(fresh, batched, pairs):
        assert max(abs(math.exp(x) - math.exp(y)) for x, y in zip(a, b)) < 1e-5
        assert max(abs(math.exp(x) - math.exp(y)) for x, y in zip(a, c)) < 1e-5


def test_generation_is_deterministic_and_stops(smollm: Any) -> None:
    from trustjudge.backends import GenerateRequest

    prompt = _prompt(smollm, "")
    reqs = [GenerateRequest(prompt, ("Score:",), 24, 0.0, 0), GenerateRequest(prompt, ("Score:",), 24, 0.8, 7)]
    first = smollm.generate(reqs)
    smollm.reset_cache()
    again = smollm.generate(reqs)
    assert [g.text for g in first] == [g.text for g in again]
    for g in first:
        assert g.finish_reason in ("stop", "length", "eos")
        assert "Score:" not in g.text
        assert all(lp <= 0 for lp in g.token_logprobs)


def _alone(backend: TransformersBackend, reqs: list[Any]) -> list[Any]:
    out = []
    for req in reqs:  # each prompt on its own, from an empty cache
        backend.reset_cache()
        out.extend(backend.generate([req]))
    return out


def _same(a: Any, b: Any) -> None:
    assert (a.text, a.finish_reason, len(a.token_logprobs)) == (b.text, b.finish_reason, len(b.token_logprobs))
    assert max(abs(x - y) for x, y in zip(a.token_logprobs, b.token_logprobs)) < 1e-3


def test_batched_generation_equals_one_prompt_at_a_time(smollm: Any) -> None:
    from trustjudge.backends import GenerateRequest

    prompts = [_prompt(smollm, "", t) for t in ("4", "It is four.", "Four, since 2 + 2 = 4.", "5")]
    reqs = [GenerateRequest(prompts[0], ("Score:",), 20, 0.0, 0), GenerateRequest(prompts[1], (".",), 12, 0.0, 0),
            GenerateRequest(prompts[2], ("Score:",), 6, 0.9, 11), GenerateRequest(prompts[3], ("Score:",), 16, 0.7, 3)]
    encoded = [smollm._encode(p) for p in prompts]
    assert len(smollm._groups(encoded, [_EMPTY] * 4)) == 1  # one batched decode
    smollm.reset_cache()
    batched = smollm.generate(reqs)
    for a, b in zip(batched, _alone(smollm, reqs)):
        _same(a, b)
    assert {g.finish_reason for g in batched} <= {"stop", "length", "eos"}
    assert batched[2].finish_reason == "length" and len(batched[2].token_logprobs) == 6


def test_build_trie_shares_prefixes() -> None:
    trie = build_trie([(5, 9), (5, 7, 9), (6, 9)])
    # nodes: (5,) and (5,7); (6,) is needed for 6 -> 9; no node for full labels
    assert trie.node_tokens == (5, 7, 6)
    assert trie.node_depth == (1, 2, 1)
    assert trie.label_nodes == ((-1, 0), (-1, 0, 1), (-1, 2))
    assert trie.node_ancestors[1] == (0, 1)


def test_gemma_sliding_window_prompt_equals_brute_force() -> None:
    from trustjudge.backends._models import gemma_parts

    if any(part.path is None for part in gemma_parts()):
        pytest.skip("the gemma extra is not installed")
    from trustjudge.backends import get_backend

    gemma = get_backend("hf/gemma3-270m")
    assert isinstance(gemma, TransformersBackend)
    # Longer than Gemma 3's 512-token sliding window: the tree mask must apply the window too.
    user = "Rate the answer. " * 130 + "\nQuestion: What is 2 + 2?\nAnswer: 4"
    prompt = gemma.format_prompt(SYSTEM, user, SCORE_MARKER)
    assert gemma.count_tokens(prompt) > 520
    labels = tuple(f"{i}]" for i in range(1, 11))
    got = gemma.label_logprobs([LabelRequest(prompt, labels)])[0].logprobs
    want = brute_force(gemma, prompt, labels)
    assert max(abs(math.exp(a) - math.exp(b)) for a, b in zip(got, want)) < 1e-4
    # Two such prompts in one batched pass (different lengths): the window applies to padded rows too.
    other = gemma.format_prompt(SYSTEM, user.replace("Answer: 4", "Answer: four, as two plus two is four"),
                                SCORE_MARKER)
    gemma.reset_cache()
    both = gemma.label_logprobs([LabelRequest(prompt, labels), LabelRequest(other, labels)])
    for res, p in zip(both, (prompt, other)):
        want = brute_force(gemma, p, labels)
        assert max(abs(math.exp(a) - math.exp(b)) for a, b in zip(res.logprobs, want)) < 1e-4
    # Batched decoding past the window equals decoding each prompt alone.
    from trustjudge.backends import GenerateRequest

    reqs = [GenerateRequest(p, ("Score:",), 6, 0.0, 0) for p in (prompt, other)]
    gemma.reset_cache()
    for a, b in zip(gemma.generate(reqs), _alone(gemma, reqs)):
        _same(a, b)


def test_cot_judge_batched_equals_one_at_a_time(smollm: Any, tmp_path: Any) -> None:
    # The reference protocol end to end on the real judge: critiques decoded as batched rows give the
    # records that one-prompt batches give, and a rerun reads everything from the store.
    from trustjudge import Judge, items_from_dicts

    from .conftest import small_items

    items = items_from_dicts(small_items())
    runs = []
    for batch_size in (8, 1):
        smollm.reset_cache()
        judge = Judge(smollm, store=tmp_path / f"b{batch_size}.sqlite", protocol="cot", max_new_tokens=96,
                      temperature=0.7, seed=5, batch_size=batch_size)
        runs.append([r.to_dict() for r in judge.score(items)])
        assert judge.stats.generate_calls == len(runs[-1])
    assert {r["unscored"] for r in runs[0]} == {None, "truncated"}  # some critiques end, some run out
    for a, b in zip(*runs):
        assert (a.get("critique"), a["unscored"]) == (b.get("critique"), b["unscored"])
        for m, v in a["scores"].items():
            assert (v is None) == (b["scores"][m] is None)
            if v is not None:
                assert abs(v - b["scores"][m]) < 1e-3
    again = Judge(smollm, store=tmp_path / "b8.sqlite", protocol="cot", max_new_tokens=96, temperature=0.7, seed=5)
    assert [r.to_dict() for r in again.score(items)] == runs[0] and again.stats.model_calls == 0
