"""Every mode's record says which API and which label method produced it; a sampled pairwise verdict carries the
Monte-Carlo standard error of its probabilities; ``cot`` with a sampled judge critiques in every sample.

The chat path runs a chat-only stand-in on loopback (``tests/_chat_server.py``), the completions path the toy
completions server of ``tests/test_backend_openai.py`` (an ``httpx`` mock transport). The stand-ins are for
control flow; the standard errors are checked against counts made here from the answers the judge was given.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trustjudge import MODES, Judge, MockBackend, items_from_dicts, register_mock
from trustjudge.backends import GenerateRequest, Generation, LabelRequest
from trustjudge.engine._engine import sample_seed
from trustjudge.errors import NoLogprobsError

from ._chat_server import chat_only_server
from .test_backend_openai import FakeServer, fake_backend
from .test_chat_judges import ITEM

# every response with given claims: the claims mode verifies them (the toy completions server writes no list)
CLAIMED: dict[str, Any] = {**ITEM, "responses": [{**r, "claims": ["Boil it for ten minutes."]}
                                                 for r in ITEM["responses"]]}


def _records(judge: Judge, mode: str, item: dict[str, Any] = CLAIMED) -> list[dict[str, Any]]:
    return [r.to_dict() for r in judge.run(MODES[mode].task_of(judge), items_from_dicts([item]))]


# -- which API and which label method -----------------------------------------------------------------
@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_mode_says_the_completions_api_and_exact_labels(tmp_path: Path, mode: str) -> None:
    with Judge(fake_backend(FakeServer()), store=tmp_path / "s.sqlite") as judge:
        records = _records(judge, mode)
    assert records
    # Before: criteria, criteria-compare, checklist, claims and steps records had neither key.
    assert {(r.get("api"), r.get("label_method")) for r in records} == {("completions", "exact")}, records
    assert all("samples" not in r for r in records)


@pytest.mark.slow
@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_mode_says_the_chat_api_and_top_k_labels_through_a_chat_only_api(tmp_path: Path, mode: str) -> None:
    with chat_only_server() as server, Judge(f"http/fake@{server.url}", store=tmp_path / "s.sqlite") as judge:
        records = _records(judge, mode, ITEM)
    assert records and all(r.get("unscored") is None for r in records)
    assert {(r.get("api"), r.get("label_method")) for r in records} == {("chat", "top_k_first")}, records


@pytest.mark.slow
@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_mode_says_sampled_through_a_chat_api_without_log_probabilities(tmp_path: Path, mode: str) -> None:
    """A chat server that returns no log-probabilities and does not continue an assistant message: each sample
    is a new answer, the label read after the assistant's text ("Score: [") in it."""
    with chat_only_server(logprobs=False) as server, \
            Judge(f"http/fake@{server.url}?labels=sampled&samples=3", store=tmp_path / "s.sqlite") as judge:
        records = _records(judge, mode, ITEM)
    assert records and all(r.get("unscored") is None for r in records), records
    assert {(r.get("api"), r.get("label_method"), r.get("samples")) for r in records} == {("chat", "sampled", 3)}


# -- the Monte-Carlo standard error of a sampled pairwise verdict -----------------------------------------
PAIRS = [{"id": "q1", "question": "What is 2 + 2?", "responses": [{"id": "a", "text": "4"}, {"id": "b", "text": "5"}]},
         {"id": "q2", "question": "Name a colour.",
          "responses": [{"id": "a", "text": "blue"}, {"id": "b", "text": "seven"}]}]


def _verdict(prompt: str, seed: int) -> str:
    """A scripted judge's sampled verdict: A, B, C or no label, depending on the prompt and the seed."""
    return ["A", "B", "C", "A", "no idea"][(seed + 3 * len(prompt)) % 5]


def _generate(request: GenerateRequest) -> Generation:
    return Generation(_verdict(request.prompt, request.seed), (), "stop", 10)


def _no_logprobs(request: LabelRequest) -> list[float]:
    raise NoLogprobsError("no logprobs field")


@pytest.fixture
def scripted() -> Iterator[MockBackend]:
    backend = MockBackend("pairs", script=_no_logprobs, generate_script=_generate)
    register_mock("pairs", backend)
    yield backend
    register_mock("pairs", None)


def _expected_se(first: Counter[str], second: Counter[str], n: int) -> tuple[dict[str, float], dict[str, float]]:
    """By hand, from the two orders' label counts: the combined probabilities and their standard errors. Order 1
    shows the first response as A, order 2 as B; n1, n2 answers wrote a label; P(x) = (c1 + c2) / (n1 + n2) and
    SE(x) = sqrt(c1 (1 - c1 / n1) + c2 (1 - c2 / n2)) / (n1 + n2)."""
    n1, n2 = sum(first[k] for k in "ABC"), sum(second[k] for k in "ABC")
    probs, se = {}, {}
    for x, (l1, l2) in {"first": ("A", "B"), "second": ("B", "A"), "tie": ("C", "C")}.items():
        c1, c2 = first[l1], second[l2]
        probs[x] = (c1 + c2) / (n1 + n2)
        se[x] = math.sqrt(c1 * (1 - c1 / n1) + c2 * (1 - c2 / n2)) / (n1 + n2)
    return probs, se


def test_the_standard_error_of_sampled_verdicts_by_hand(tmp_path: Path, scripted: MockBackend) -> None:
    n = 12
    with Judge(f"mock/pairs?labels=sampled&samples={n}", store=tmp_path / "s.sqlite") as judge:
        records = list(judge.compare(PAIRS))
        task = judge.compare_task()
        for item, rec in zip(items_from_dicts(PAIRS), records):
            q1, q2 = task.pair_questions(item, item.all_pairs()[0], judge.backend.format_prompt)
            counts = [Counter(_verdict(q.prompt, sample_seed(q.prompt, k)) for k in range(n))  # type: ignore[union-attr]
                      for q in (q1, q2)]
            probs, se = _expected_se(counts[0], counts[1], n)
            assert rec.label_method == "sampled" and rec.samples == n
            assert rec.probabilities == pytest.approx(probs)
            assert rec.probabilities_se == pytest.approx(se)
            assert any(v > 0 for v in se.values())
            for order, count in zip(rec.orders, counts):  # each order's shares: binomial over its N answers
                assert order["se"] == pytest.approx({k: math.sqrt(count[k] / n * (1 - count[k] / n) / n)
                                                     for k in "ABC"})
            d = rec.to_dict()
            assert d["probabilities_se"] == rec.probabilities_se and d["samples"] == n
    # an exact judge's record carries no standard error
    exact = list(Judge("mock/hash", store=tmp_path / "e.sqlite").compare(PAIRS))
    assert all(r.probabilities_se is None and "se" not in r.orders[0] for r in exact)
    assert all("probabilities_se" not in r.to_dict() for r in exact)


def _by_order(answers: list[tuple[str, str]], first: str, second: str) -> tuple[Counter[str], Counter[str]]:
    """The stand-in's sampled verdicts counted per presentation order (order 1: ``first``'s text shown first)."""
    counts: tuple[Counter[str], Counter[str]] = (Counter(), Counter())
    for user, text in answers:
        label = text.rsplit("Verdict: [", 1)[1].rstrip("]") if "Verdict: [" in text else "none"
        counts[0 if user.index(first) < user.index(second) else 1][label] += 1
    return counts


@pytest.mark.slow
def test_the_standard_error_of_sampled_verdicts_through_a_server_without_log_probabilities(tmp_path: Path) -> None:
    n = 10
    item = {"id": "tea", "question": "How do I brew green tea?",
            "responses": [{"id": "a", "text": "Use 80 C water."}, {"id": "b", "text": "Boil it hard."}]}
    with chat_only_server(logprobs=False, varies=True) as server, \
            Judge(f"http/fake@{server.url}?labels=sampled&samples={n}", store=tmp_path / "s.sqlite") as judge:
        (rec,) = list(judge.compare(items_from_dicts([item])))
        assert len(server.answers) == 2 * n
        first, second = _by_order(server.answers, "Use 80 C water.", "Boil it hard.")
    probs, se = _expected_se(first, second, n)
    assert (rec.api, rec.label_method, rec.samples) == ("chat", "sampled", n)
    assert rec.probabilities == pytest.approx(probs)
    assert rec.probabilities_se == pytest.approx(se) and any(v > 0 for v in se.values())


# -- cot with a sampled judge -------------------------------------------------------------------------
@pytest.mark.slow
def test_cot_with_a_sampled_judge_critiques_in_every_sample(tmp_path: Path) -> None:
    """Each of the N samples writes its own critique, then "Score: [" and the label; the label is read after the
    marker's last occurrence, the distribution is the N samples' shares, and a rerun makes no call."""
    n = 8
    name, store = "http/fake@{}?labels=sampled&samples=" + str(n), tmp_path / "s.sqlite"
    item = items_from_dicts([{"id": "tea", "question": "How do I brew green tea?",
                              "responses": [{"id": "a", "text": "Use 80 C water."}]}])
    with chat_only_server(logprobs=False, varies=True) as server:
        with Judge(name.format(server.url), store=store, scale=5, protocol="cot", keep_distribution=True) as judge:
            (rec,) = list(judge.score(item))
            assert judge.stats.generate_calls == n and judge.stats.label_calls == 0
        critiques = [text.split("Score: [")[0] for _, text in server.answers if "Score: [" in text]
        assert len(server.answers) == n and len(set(critiques)) > 1  # a critique per sample, not one for all
        sent = [b for p, b in server.calls if p == "/v1/chat/completions" and b.get("temperature")]
        assert len(sent) == n and all(b["messages"][-1]["role"] == "user" for b in sent)
        labels = Counter(text.split("Score: [")[1].rstrip("]") for _, text in server.answers if "Score: [" in text)
        assert rec.label_method == "sampled" and rec.samples == n and rec.protocol == "cot"
        assert rec.distribution is not None
        assert rec.distribution == pytest.approx({k: labels[k] / n for k in ("1", "2", "3", "4", "5")})
        assert rec.label_mass == pytest.approx(sum(labels.values()) / n)
        assert rec.critique is not None and rec.critique.startswith("The response is partly right")
        answered = len(server.answers)
        with Judge(name.format(server.url), store=store, scale=5, protocol="cot", keep_distribution=True) as again:
            (rerun,) = list(again.score(item))
            assert again.stats.model_calls == 0
        assert len(server.answers) == answered and rerun.to_dict() == rec.to_dict()


def _critiqued(request: GenerateRequest) -> Generation:
    """A scripted judge's sampled cot answer: a critique naming its seed, then the marker and a label."""
    label = ["3", "4", "2", "3"][request.seed % 4]
    return Generation(f"Take {request.seed % 5}: fine. Score: [{label}", (), "stop", 10)


def test_cot_with_a_sampled_judge_asks_one_generation_per_sample_with_room_for_the_critique(tmp_path: Path) -> None:
    backend = MockBackend("cot", script=_no_logprobs, generate_script=_critiqued)
    register_mock("cot", backend)
    try:
        judge = Judge("mock/cot?labels=sampled&samples=5", store=tmp_path / "s.sqlite", scale=5, protocol="cot",
                      max_new_tokens=64)
        items = items_from_dicts(PAIRS)
        planned = judge.plan(items, "score")
        assert (planned.model_calls, planned.stored) == (4 * 5, 0) and "sampled x5" in planned.protocol
        records = list(judge.score(items))
        sent = [r for r in backend.history if isinstance(r, GenerateRequest)]
        assert len(sent) == 4 * 5 and all(r.max_new_tokens > 64 and r.temperature == 1.0 for r in sent)
        assert all(r.stop == ("]",) and not r.prompt.endswith("Score: [") for r in sent)
        for rec in records:
            assert rec.label_method == "sampled" and rec.unscored is None
            assert rec.critique is not None and rec.critique.startswith("Take ") and "Score: [" not in rec.critique
        assert judge.plan(items, "score").model_calls == 0
        more = Judge("mock/cot?labels=sampled&samples=7", store=tmp_path / "s.sqlite", scale=5, protocol="cot",
                     max_new_tokens=64)
        assert all(r.samples == 7 for r in more.score(items))
        assert more.stats.generate_calls == 4 * 2  # raising N asks only the samples the store lacks
    finally:
        register_mock("cot", None)


def test_a_sampled_criterion_carries_the_standard_error_of_its_score(tmp_path: Path) -> None:
    def answer(request: GenerateRequest) -> Generation:
        return Generation(["1", "2", "4", "5", "no idea", "4"][(request.seed + len(request.prompt)) % 6], (), "stop", 5)

    backend = MockBackend("crit", script=_no_logprobs, generate_script=answer)
    register_mock("crit", backend)
    n = 12
    item = {"id": "tea", "question": "How do I brew green tea?",
            "criteria": [{"name": "accuracy", "description": "Right?"}, {"name": "clarity", "description": "Clear?"}],
            "responses": [{"id": "a", "text": "Use 80 C water."}, {"id": "b", "text": "Boil it."}]}
    try:
        judge = Judge(f"mock/crit?labels=sampled&samples={n}", store=tmp_path / "s.sqlite", keep_distribution=True)
        records = list(judge.criteria(items_from_dicts([item])))
    finally:
        register_mock("crit", None)
    seen = 0
    for rec in records:
        assert (rec.label_method, rec.samples) == ("sampled", n)
        for res in rec.criteria:
            assert res.distribution is not None and res.label_mass is not None
            p = [res.distribution[str(v)] for v in range(1, 6)]
            m = sum(p)
            mean = sum(q * v for q, v in zip(p, range(1, 6))) / m
            var = sum(q * (v - mean) ** 2 for q, v in zip(p, range(1, 6))) / m
            assert res.score_se == pytest.approx(math.sqrt(var / round(m * n)))
            seen += res.score_se > 0
    assert seen > 0
    exact = list(Judge("mock/hash", store=tmp_path / "e.sqlite").criteria(items_from_dicts([item])))
    assert all(res.score_se is None for rec in exact for res in rec.criteria)
    assert all("score_se" not in res for rec in exact for res in rec.to_dict()["criteria"])


@pytest.mark.parametrize(("mode", "parts", "p", "se"), [("checklist", "checks", "p_pass", "p_pass_se"),
                                                        ("steps", "steps", "p_correct", "p_correct_se"),
                                                        ("claims", "claims", "p_supported", "p_supported_se")])
def test_a_sampled_check_step_or_claim_carries_the_standard_error_of_its_probability(
        tmp_path: Path, mode: str, parts: str, p: str, se: str) -> None:
    def answer(request: GenerateRequest) -> Generation:
        labels = ["YES", "NO", "SUPPORTED", "UNSUPPORTED", "PARTIAL", "YES", "SUPPORTED", "no idea"]
        return Generation(labels[(request.seed + len(request.prompt)) % len(labels)], (), "stop", 5)

    backend = MockBackend("parts", script=_no_logprobs, generate_script=answer)
    register_mock("parts", backend)
    n = 16
    try:
        with Judge(f"mock/parts?labels=sampled&samples={n}", store=tmp_path / "s.sqlite") as judge:
            records = [r.to_dict() for r in judge.run(judge.task(mode), items_from_dicts([CLAIMED]))]
    finally:
        register_mock("parts", None)
    results = [res for rec in records for res in rec[parts]]
    assert results and all(rec["label_method"] == "sampled" and rec["samples"] == n for rec in records)
    seen = 0
    for res in results:
        if res["unscored"] is not None:
            continue
        labelled = round(res["label_mass"] * n)
        assert res[se] == pytest.approx(math.sqrt(res[p] * (1 - res[p]) / labelled))
        seen += res[se] > 0
    assert seen > 0
    with Judge("mock/hash", store=tmp_path / "e.sqlite") as exact:
        plain = [r.to_dict() for r in exact.run(exact.task(mode), items_from_dicts([CLAIMED]))]
    assert all(se not in res for rec in plain for res in rec[parts])


def test_the_standard_error_of_sampled_criterion_verdicts_by_hand(tmp_path: Path, scripted: MockBackend) -> None:
    n = 10
    criteria = [{"name": "accuracy", "description": "Right?"}, {"name": "clarity", "description": "Clear?"}]
    items = items_from_dicts([{**item, "criteria": criteria} for item in PAIRS])
    with Judge(f"mock/pairs?labels=sampled&samples={n}", store=tmp_path / "s.sqlite") as judge:
        task = judge.task("criteria-compare")
        records = list(judge.run(task, items))
        for item, rec in zip(items, records):
            questions = task.questions(item, judge.backend.format_prompt)
            assert len(questions) == 2 * len(criteria)
            for k, verdict in enumerate(rec.criteria):  # type: ignore[attr-defined]
                q1, q2 = questions[k], questions[len(criteria) + k]
                counts = [Counter(_verdict(q.prompt, sample_seed(q.prompt, j)) for j in range(n))  # type: ignore[union-attr]
                          for q in (q1, q2)]
                probs, se = _expected_se(counts[0], counts[1], n)
                assert verdict.probabilities == pytest.approx(probs)
                assert verdict.probabilities_se == pytest.approx(se)
    assert all(r.label_method == "sampled" for r in records)
    exact = list(Judge("mock/hash", store=tmp_path / "e.sqlite").compare_criteria(items))
    assert all(v.probabilities_se is None for r in exact for v in r.criteria)


@pytest.mark.slow
def test_cot_on_a_chat_api_without_log_probabilities_is_refused_naming_the_option(tmp_path: Path) -> None:
    from trustjudge.errors import BackendUnavailable

    with chat_only_server(logprobs=False) as server, \
            Judge(f"http/fake@{server.url}", store=tmp_path / "s.sqlite", scale=5, protocol="cot") as judge, \
            pytest.raises(BackendUnavailable, match=r"http/fake returned no log-probabilities.*labels=sampled"):
        list(judge.score(items_from_dicts([ITEM])))
