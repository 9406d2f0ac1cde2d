"""Judges with no log-probabilities: refused by default with the option named; with labels=sampled&samples=N
each label distribution is estimated from N answers sampled at temperature 1, stored by index."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from trustjudge import Judge, MockBackend, read_items, register_mock
from trustjudge.backends import GenerateRequest, Generation, LabelRequest
from trustjudge.engine._engine import sample_seed
from trustjudge.errors import ConfigError, NoLogprobsError

from .conftest import write_jsonl

ITEMS = [{"id": "q1", "question": "What is 2 + 2?", "responses": [{"id": "a", "text": "4"}, {"id": "b", "text": "5"}]},
         {"id": "q2", "question": "Name a colour.",
          "responses": [{"id": "a", "text": "blue"}, {"id": "b", "text": "7"}]}]


def _answer(prompt: str, seed: int) -> str:
    """A stand-in judge's sampled answer: a label that depends on the prompt and the seed, or no label."""
    if seed % 5 == 4:
        return "I cannot say"
    if prompt.rstrip().endswith("Verdict: ["):
        return "ABC"[(seed + len(prompt)) % 3]
    return str(1 + (seed + len(prompt)) % 3 + len(prompt) % 2)


def _no_logprobs(request: LabelRequest) -> list[float]:
    raise NoLogprobsError("the API sent no logprobs field")


def _generate(request: GenerateRequest) -> Generation:
    assert request.temperature == 1.0 and request.stop == ("]",)
    return Generation(_answer(request.prompt, request.seed), (), "stop", len(request.prompt.split()))


@pytest.fixture
def stand_in() -> Iterator[MockBackend]:
    backend = MockBackend("nolp", script=_no_logprobs, generate_script=_generate)
    register_mock("nolp", backend)
    yield backend
    register_mock("nolp", None)


def test_by_default_a_judge_without_log_probabilities_is_refused_naming_it_and_the_option(
        tmp_path: Path, stand_in: MockBackend) -> None:
    judge = Judge("mock/nolp", store=tmp_path / "s.sqlite")
    with pytest.raises(NoLogprobsError, match=r"mock/nolp returns no log-probabilities.*labels=sampled&samples=N"):
        list(judge.score(ITEMS))


def test_sampled_scores_are_the_scores_of_the_sampled_distribution(tmp_path: Path, stand_in: MockBackend) -> None:
    n = 20
    judge = Judge(f"mock/nolp?labels=sampled&samples={n}", store=tmp_path / "s.sqlite", scale=5)
    records = list(judge.score(ITEMS))
    assert judge.stats.generate_calls == 4 * n and judge.stats.label_calls == 0
    # an exact judge whose probabilities are the shares of the same answers scores the same
    def shares(request: LabelRequest) -> list[float]:
        labels = [lab.removesuffix("]") for lab in request.labels]
        answers = [_answer(request.prompt, sample_seed(request.prompt, k)) for k in range(n)]
        return [answers.count(lab) / n for lab in labels]

    exact = Judge(MockBackend("shares", script=shares), store=tmp_path / "e.sqlite", scale=5, keep_distribution=True)
    reference = list(exact.score(ITEMS))
    for got, want in zip(records, reference):
        assert got.label_method == "sampled" and got.samples == n
        assert got.scores == pytest.approx(want.scores)
        assert got.label_mass == pytest.approx(want.label_mass) and got.label_mass < 1  # some wrote no label
        assert got.score_se is not None and got.score_se > 0
    d = records[0].to_dict()
    assert d["label_method"] == "sampled" and d["samples"] == n and d["score_se"] == records[0].score_se
    # the standard error is that of the mean of the labelled answers
    assert reference[0].distribution is not None
    dist = [reference[0].distribution[str(k)] for k in range(1, 6)]
    m = sum(dist)
    mean = sum(p * v for p, v in zip(dist, range(1, 6))) / m
    var = sum(p * (v - mean) ** 2 for p, v in zip(dist, range(1, 6))) / m
    assert records[0].score_se == pytest.approx(math.sqrt(var / round(m * n)))
    # each sample has its own seed, drawn from the prompt and the index: the k-th samples of two prompts differ
    seeds = {(r.prompt, r.seed) for r in stand_in.history if isinstance(r, GenerateRequest)}
    assert len({seed for _, seed in seeds}) == len(seeds) == 4 * n


def test_a_rerun_asks_nothing_and_more_samples_ask_only_the_missing_ones(tmp_path: Path,
                                                                       stand_in: MockBackend) -> None:
    store = tmp_path / "s.sqlite"
    first = Judge("mock/nolp?labels=sampled&samples=5", store=store)
    list(first.score(ITEMS))
    assert first.stats.generate_calls == 4 * 5
    again = Judge("mock/nolp?labels=sampled&samples=5", store=store)
    list(again.score(ITEMS))
    assert again.stats.model_calls == 0
    more = Judge("mock/nolp?labels=sampled&samples=8", store=store)
    records = list(more.score(ITEMS))
    assert more.stats.generate_calls == 4 * 3 and all(r.samples == 8 for r in records)


def test_compare_in_both_orders_from_sampled_verdicts(tmp_path: Path, stand_in: MockBackend) -> None:
    judge = Judge("mock/nolp?labels=sampled&samples=10", store=tmp_path / "s.sqlite")
    records = list(judge.compare(ITEMS))
    assert len(records) == 2
    for r in records:
        assert r.label_method == "sampled"
        assert all(o["samples"] == 10 and 0 < o["mass"] <= 1 for o in r.orders)
        assert r.probabilities is not None and all(v is not None for v in r.verdicts.values())


def test_the_cli_takes_the_option_on_the_judge_name(tmp_path: Path, stand_in: MockBackend) -> None:
    from click.testing import CliRunner

    from trustjudge.cli import cli

    items = write_jsonl(tmp_path / "items.jsonl", ITEMS)
    result = CliRunner().invoke(cli, ["score", str(items), "--judge", "mock/nolp?labels=sampled&samples=3",
                                      "--store", str(tmp_path / "s.sqlite"), "-q"])
    assert result.exit_code == 0, result.output
    assert '"label_method": "sampled"' in result.output and '"samples": 3' in result.output


@pytest.mark.parametrize("name", ["mock/nolp?samples=5", "mock/nolp?labels=sampled&samples=0",
                                  "mock/nolp?labels=sampled&samples=x", "mock/nolp?labels=sampled&labels=sampled",
                                  "mock/nolp?colour=blue"])
def test_bad_options_are_refused(tmp_path: Path, stand_in: MockBackend, name: str) -> None:
    with pytest.raises(ConfigError, match="mock/nolp"):
        list(Judge(name, store=tmp_path / "s.sqlite").score(ITEMS))


@pytest.mark.model
def test_sampled_labels_on_the_bundled_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SmolLM2 through llama.cpp: the share of sampled answers that write a label, and each label's share, lie
    within sampling error of the exact probabilities; a rerun asks nothing."""
    monkeypatch.setenv("TRUSTJUDGE_THREADS", "1")
    store = tmp_path / "s.sqlite"
    n = 16
    exact = list(Judge("llamacpp/smollm2-135m", store=store, scale=5, keep_distribution=True).score(ITEMS[:1]))
    name = f"llamacpp/smollm2-135m?labels=sampled&samples={n}"
    judge = Judge(name, store=store, scale=5, keep_distribution=True)
    sampled = list(judge.score(ITEMS[:1]))
    assert judge.stats.generate_calls == 2 * n
    for e, s in zip(exact, sampled):
        assert s.label_method == "sampled" and s.samples == n and s.distribution is not None
        assert e.distribution is not None and e.label_mass is not None and s.label_mass is not None
        assert all(abs(p * n - round(p * n)) < 1e-9 for p in s.distribution.values())
        for p_exact, p_sampled in [(e.label_mass, s.label_mass),
                                   *((e.distribution[k], s.distribution[k]) for k in e.distribution)]:
            assert abs(p_sampled - p_exact) <= 4 * math.sqrt(p_exact * (1 - p_exact) / n) + 1 / n
    rerun = Judge(name, store=store, scale=5)
    list(rerun.score(ITEMS[:1]))
    assert rerun.stats.model_calls == 0


def test_the_plan_counts_n_generations_per_judgment(tmp_path: Path, stand_in: MockBackend) -> None:
    store = tmp_path / "s.sqlite"
    judge = Judge("mock/nolp?labels=sampled&samples=6", store=store)
    items = judge.plan(read_items(ITEMS), "score")
    assert (items.model_calls, items.stored) == (4 * 6, 0) and "sampled x6" in items.protocol
    list(Judge("mock/nolp?labels=sampled&samples=4", store=store).score(ITEMS))
    again = judge.plan(read_items(ITEMS), "score")
    assert (again.model_calls, again.stored) == (4 * 2, 4 * 4)
