"""Engine control flow with the scripted fake backend: store reuse, resume, retries, unscored reasons."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trustjudge import Judge, MockBackend, items_from_dicts
from trustjudge.backends import LabelRequest, LabelResult
from trustjudge.errors import BackendError, ConfigError, TransientBackendError

from .conftest import small_items


def judge(tmp_path: Path, backend: MockBackend, **kw: object) -> Judge:
    return Judge(backend, store=tmp_path / "store.sqlite", **kw)  # type: ignore[arg-type]


def test_second_run_makes_zero_calls(tmp_path: Path) -> None:
    items = items_from_dicts(small_items())
    backend = MockBackend()
    first = [r.to_dict() for r in judge(tmp_path, backend).score(items)]
    assert backend.calls == 5
    backend2 = MockBackend()
    j2 = judge(tmp_path, backend2)
    second = [r.to_dict() for r in j2.score(items)]
    assert backend2.calls == 0 and j2.stats.from_store == 5
    assert first == second


def test_changing_the_aggregation_margin_recomputes_from_the_store(tmp_path: Path) -> None:
    items = items_from_dicts(small_items())
    backend = MockBackend()
    list(judge(tmp_path, backend).compare(items))
    calls = backend.calls
    assert calls == 2 * (3 + 1)
    wide = list(judge(tmp_path, backend, delta=1.0).compare(items))
    assert backend.calls == calls
    assert all(r.verdicts["likelihood"] == "tie" for r in wide)


def test_scale_change_is_a_new_judgment(tmp_path: Path) -> None:
    items = items_from_dicts(small_items())
    backend = MockBackend()
    list(judge(tmp_path, backend, scale=100).score(items))
    list(judge(tmp_path, backend, scale=5).score(items))
    assert backend.calls == 10
    records = list(judge(tmp_path, backend, scale=5).score(items))
    assert backend.calls == 10
    assert all(1 <= r.scores["discrete"] <= 5 for r in records)  # type: ignore[operator]


class Killed(BaseException):
    """The process dying mid-run (a backend's own errors are unscored judgments, not a crash)."""


class Crashing(MockBackend):
    def __init__(self, after: int) -> None:
        super().__init__()
        self.after = after

    def label_logprobs(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        if self.calls + len(requests) > self.after:
            raise Killed("killed")
        return super().label_logprobs(requests)


def test_a_crashed_run_resumes_without_repeating_work(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "question": f"Question {i}?",
             "responses": [{"id": "a", "text": f"answer {i}"}, {"id": "b", "text": f"other {i}"}]} for i in range(10)]
    items = items_from_dicts(rows)
    crashing = Crashing(after=8)
    with pytest.raises(Killed):
        list(judge(tmp_path, crashing, batch_size=4).score(items))
    assert crashing.calls == 8
    resumed = MockBackend()
    records = list(judge(tmp_path, resumed, batch_size=4).score(items))
    assert resumed.calls == 20 - 8
    reference = list(judge(tmp_path / "fresh", MockBackend()).score(items))
    assert [r.to_dict() for r in records] == [r.to_dict() for r in reference]


class Flaky(MockBackend):
    def __init__(self, failures: int, transient: bool = True) -> None:
        super().__init__()
        self.failures = failures
        self.transient = transient
        self.attempts = 0

    def label_logprobs(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        self.attempts += 1
        if self.failures > 0:
            self.failures -= 1
            if self.transient:
                raise TransientBackendError("429 rate limited", retry_after=0.0)
            raise BackendError("400 bad request")
        return super().label_logprobs(requests)


def test_transient_errors_are_retried(tmp_path: Path) -> None:
    items = items_from_dicts(small_items()[:1])
    flaky = Flaky(failures=2)
    records = list(judge(tmp_path, flaky, batch_size=8).score(items))
    assert flaky.attempts == 3
    assert all(r.unscored is None for r in records)


def test_permanent_errors_are_unscored_not_stored(tmp_path: Path) -> None:
    items = items_from_dicts(small_items()[:1])
    broken = Flaky(failures=100, transient=False)
    records = list(judge(tmp_path, broken).score(items))
    assert [r.unscored for r in records] == ["backend_error"] * 3
    assert all(r.scores["expected"] is None for r in records)
    healthy = MockBackend()
    again = list(judge(tmp_path, healthy).score(items))
    assert healthy.calls == 3 and all(r.unscored is None for r in again)


def test_unscored_reasons_are_recorded(tmp_path: Path) -> None:
    rows = [{"id": "q", "question": "Q?", "responses": [
        {"id": "empty", "text": "   "}, {"id": "long", "text": "word " * 500}, {"id": "ok", "text": "fine"}]}]
    items = items_from_dicts(rows)
    backend = MockBackend(context_length=300, script=lambda req: [1e-6] * len(req.labels))
    j = judge(tmp_path, backend, scale=5)
    records = {r.response_id: r for r in j.score(items)}
    assert records["empty"].unscored == "empty_response"
    assert records["long"].unscored == "context_overflow"
    assert records["ok"].unscored == "no_label_mass"
    assert records["ok"].label_mass == pytest.approx(5e-6)
    assert records["ok"].scores["geval"] is None
    assert backend.calls == 1
    assert j.stats.unscored == {"empty_response": 1, "context_overflow": 1, "no_label_mass": 1}


def test_compare_order_swap_gives_the_mirrored_result(tmp_path: Path) -> None:
    rows = small_items()
    forward = items_from_dicts(rows)
    for row in rows:
        ids = [r["id"] for r in row["responses"]]
        row["pairs"] = [{"first": ids[j], "second": ids[i]} for i in range(len(ids)) for j in range(i + 1, len(ids))]
    backward = items_from_dicts(rows)
    backend = MockBackend()
    a = list(judge(tmp_path, backend).compare(forward))
    b = list(judge(tmp_path, backend).compare(backward))
    assert backend.calls == 8  # the reversed pairs reuse the same two prompts per pair
    mirror = {"first": "second", "second": "first", "tie": "tie"}
    for x, y in zip(a, b):
        assert (x.first_id, x.second_id) == (y.second_id, y.first_id)
        assert y.verdicts["likelihood"] == mirror[x.verdicts["likelihood"]]  # type: ignore[index]
        assert y.verdicts["two_pass"] == mirror[x.verdicts["two_pass"]]  # type: ignore[index]
        assert x.probabilities and y.probabilities
        assert y.probabilities["first"] == pytest.approx(x.probabilities["second"])
        assert y.probabilities["tie"] == pytest.approx(x.probabilities["tie"])


def test_cot_protocol_generates_then_scores(tmp_path: Path) -> None:
    items = items_from_dicts(small_items()[:1])
    backend = MockBackend()
    j = judge(tmp_path, backend, protocol="cot", scale=10)
    records = list(j.score(items))
    assert j.stats.generate_calls == 3 and j.stats.label_calls == 3
    label_prompts = [h.prompt for h in backend.history if isinstance(h, LabelRequest)]
    assert all(p.endswith("The response is adequate. Score: [") for p in label_prompts)
    assert all(r.critique == "The response is adequate. " for r in records)
    pairs = list(judge(tmp_path, backend, protocol="cot").compare(items))
    assert all(p.ppl_source == "critique_perplexity" for p in pairs)


def test_plan_counts_stored_and_missing(tmp_path: Path) -> None:
    items = items_from_dicts(small_items())
    backend = MockBackend()
    j = judge(tmp_path, backend)
    plan = j.plan(items, "score")
    assert (plan.judgments, plan.stored, plan.model_calls) == (5, 0, 5)
    list(j.score(items[:1]))
    plan = j.plan(items, "score")
    assert (plan.stored, plan.model_calls) == (3, 2)
    assert plan.prompt_tokens_to_run < plan.prompt_tokens
    assert backend.calls == 3


# -- the fast paths of re-aggregation equal the plain definitions ------------------------------------


@given(prompt=st.text(), labels=st.lists(st.text(max_size=5), min_size=1, max_size=6).map(tuple))
def test_fast_store_key_equals_the_canonical_key(prompt: str, labels: tuple[str, ...]) -> None:
    from trustjudge.engine._engine import Engine
    from trustjudge.engine._store import Store, content_key

    engine = Engine(MockBackend(), Store(":memory:"))
    assert engine._label_key(prompt, labels) == content_key(engine._label_request(LabelRequest(prompt, labels)))


@given(question=st.text(), response=st.text(), context=st.none() | st.text(min_size=1),
       reference=st.none() | st.text(min_size=1))
def test_compiled_templates_render_like_string_template(question: str, response: str, context: str | None,
                                                        reference: str | None) -> None:
    from trustjudge.modes._prompts import Prompts, _blocks, quote, scale

    prompts = Prompts.load()
    sc = scale(10)
    want = prompts.pointwise.substitute(question=quote(question), response=quote(response), scale_min=1,
                                        scale_max=10, task=prompts.score_task(sc, "direct"),
                                        **_blocks(context, reference))
    assert prompts.render_pointwise(question, response, context, reference, sc, "direct") == want
    want = prompts.pairwise.substitute(question=quote(question), response_a=quote(response), response_b="b",
                                       scale_min=1, scale_max=1, task=prompts.verdict_task("cot"),
                                       **_blocks(context, reference))
    assert prompts.render_pairwise(question, response, "b", context, reference, "cot") == want


def test_compiled_user_template_keeps_dollar_escapes(tmp_path: Path) -> None:
    from trustjudge.modes._prompts import Prompts, scale

    tpl = tmp_path / "t.txt"
    tpl.write_text("Costs $$5. Q: ${question} R: $response $task")
    prompts = Prompts.load(pointwise=tpl)
    assert prompts.render_pointwise("q", "r", None, None, scale(5), "direct") == prompts.pointwise.substitute(
        question="q", response="r", task=prompts.score_task(scale(5), "direct"), scale_min=1, scale_max=5,
        context="", reference="", context_block="", reference_block="")


def test_record_to_dict_equals_dataclasses_asdict(tmp_path: Path) -> None:
    from dataclasses import asdict, fields

    def omitted(rec: object) -> set[str]:  # the optional fields, left out when None
        return {f.name for f in fields(rec) if f.metadata.get("omit_none")}  # type: ignore[arg-type]

    judge = Judge(MockBackend(), store=tmp_path / "s.sqlite", scale=5)
    items = items_from_dicts(small_items())
    for rec in judge.compare(items):
        assert omitted(rec) >= {"closing"}
        assert rec.to_dict() == {k: v for k, v in asdict(rec).items() if k not in omitted(rec) or v is not None}
        assert rec.to_dict()["orders"] is not rec.orders  # a copy: editing it leaves the record alone
    for srec in judge.score(items):
        assert omitted(srec) >= {"critique", "distribution", "closing"}
        want = {k: v for k, v in asdict(srec).items() if k not in omitted(srec) or v is not None}
        assert srec.to_dict() == want


@pytest.mark.parametrize(("points", "closed"), [(100, [str(v) for v in range(1, 11)]), (10, ["1"]), (5, [])])
def test_closing_needed_reads_the_bracket_only_after_labels_that_begin_another(
        tmp_path: Path, points: int, closed: list[str]) -> None:
    items = items_from_dicts(small_items())
    every, needed = MockBackend(), MockBackend()
    list(judge(tmp_path, every, scale=points).score(items))
    list(Judge(needed, store=tmp_path / "needed.sqlite", scale=points, closing="needed").score(items))
    labels = {req.labels for req in needed.history if isinstance(req, LabelRequest)}
    assert len(labels) == 1
    (read,) = labels
    assert [lab[:-1] for lab in read if lab.endswith("]")] == closed
    assert [lab.rstrip("]") for lab in read] == [str(v) for v in range(1, points + 1)]
    assert {req.labels for req in every.history if isinstance(req, LabelRequest)} == {
        tuple(f"{v}]" for v in range(1, points + 1))}
    # Records say how their labels were read when it is not the exact default.
    needed_judge = Judge(MockBackend(), store=tmp_path / "needed.sqlite", scale=points, closing="needed")
    assert all(r.to_dict()["closing"] == "needed" for r in needed_judge.score(items))
    assert all(r.to_dict()["closing"] == "needed" for r in needed_judge.compare(items))
    assert all("closing" not in r.to_dict() for r in judge(tmp_path, MockBackend(), scale=points).score(items))
    # The two modes are different judgments: neither reuses the other's stored outputs.
    again = MockBackend()
    list(Judge(again, store=tmp_path / "store.sqlite", scale=points, closing="needed").score(items))
    assert again.calls == needed.calls > 0


def test_closing_must_be_known(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="closing"):
        Judge(MockBackend(), store=tmp_path / "s.sqlite", closing="some")  # type: ignore[arg-type]


def test_batches_are_cut_between_questions(tmp_path: Path) -> None:
    # 3 questions x 5 responses with batch_size 8: each batch holds whole questions where it can, so a
    # backend that batches prompts sharing a prefix sees the responses of one question together.
    rows = [{"id": f"q{q}", "question": f"Question number {q}?",
             "responses": [{"id": f"r{r}", "text": f"answer {r}"} for r in range(5)]} for q in range(3)]
    backend = MockBackend()
    sizes: list[int] = []
    original = backend.label_logprobs

    def record(requests: Sequence[LabelRequest]) -> list[LabelResult]:
        sizes.append(len(requests))
        return original(requests)

    backend.label_logprobs = record  # type: ignore[method-assign]
    list(judge(tmp_path, backend, batch_size=8).score(items_from_dicts(rows)))
    assert sizes == [5, 5, 5]
