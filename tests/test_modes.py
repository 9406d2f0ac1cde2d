"""Judging modes: rubric criteria, checklists, labelled scales, grounded judging (issue 13).

Maths and control flow run on a scripted backend with hand-computed values; the last tests run the real
bundled judge end to end.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from trustjudge import Check, Criterion, InputError, Judge, LabelSet, MockBackend, Store, items_from_dicts
from trustjudge.backends import LabelRequest
from trustjudge.errors import ConfigError


def _scripted(table: dict[str, dict[str, float]]) -> MockBackend:
    """A judge whose label probabilities depend on which key of ``table`` the prompt's last block holds."""

    def script(req: LabelRequest) -> list[float]:
        tail = req.prompt[req.prompt.rfind("<criterion>"):] if "<criterion>" in req.prompt else \
            req.prompt[req.prompt.rfind("<check>"):]
        for key, probs in table.items():
            if key in tail:
                return [probs.get(lab.rstrip("]"), 0.0) for lab in req.labels]
        raise AssertionError(f"no script entry for {tail[:80]!r}")

    return MockBackend("modes", script)


ITEM = {"id": "q1", "question": "What is the capital of France?",
        "responses": [{"id": "a", "text": "Paris.", "human_criteria": {"accuracy": 5, "style": 2}}]}
CRITERIA = [Criterion("accuracy", "Is every fact right?", 2.0), Criterion("style", "Is it well written?", 1.0)]


def test_weighted_criteria_aggregate_and_spread_by_hand(tmp_path: Path) -> None:
    # accuracy: P(4) = P(5) = 0.5 -> mean 4.5, variance 0.25; style: P(2) = 1 -> mean 2, variance 0.
    # aggregate (expected) = (2 * 4.5 + 1 * 2) / 3 = 11/3; spread = sqrt(2^2 * 0.25 + 1^2 * 0) / 3 = 1/3.
    backend = _scripted({"accuracy": {"4": 0.45, "5": 0.45}, "style": {"2": 0.8}})
    judge = Judge(backend, store=tmp_path / "s.sqlite")
    [rec] = list(judge.criteria(items_from_dicts([ITEM]), CRITERIA))
    assert rec.unscored is None and rec.scale == [1.0, 5.0]
    acc, style = rec.criteria
    assert acc.scores["expected"] == pytest.approx(4.5) and acc.sd == pytest.approx(0.5)
    assert style.scores["expected"] == pytest.approx(2.0) and style.sd == pytest.approx(0.0)
    assert rec.aggregate["expected"] == pytest.approx(11 / 3)
    assert rec.spread == pytest.approx(1 / 3)
    # discrete: argmax of (4: 0.45, 5: 0.45) is the first maximum, 4 -> (2 * 4 + 2) / 3 = 10/3
    assert rec.aggregate["discrete"] == pytest.approx(10 / 3)
    assert rec.human == pytest.approx((2 * 5 + 2) / 3)
    calls = backend.calls
    assert calls == 2
    # A rerun on the store makes no model call and gives the same record.
    again = Judge(_scripted({}), store=tmp_path / "s.sqlite")
    [rec2] = list(again.criteria(items_from_dicts([ITEM]), CRITERIA))
    assert again.backend.calls == 0  # type: ignore[attr-defined]
    assert rec2.to_dict() == rec.to_dict()


def test_an_unscored_criterion_leaves_the_aggregate_unscored_unless_reweighting(tmp_path: Path) -> None:
    backend = _scripted({"accuracy": {"4": 1.0}, "style": {}})  # style: no mass on any label
    judge = Judge(backend, store=tmp_path / "s.sqlite")
    [rec] = list(judge.criteria(items_from_dicts([ITEM]), CRITERIA))
    assert rec.unscored == "unscored_criteria"
    assert all(v is None for v in rec.aggregate.values()) and rec.reweighted == []
    assert rec.criteria[1].unscored == "no_label_mass"
    [rec] = list(judge.criteria(items_from_dicts([ITEM]), CRITERIA, reweight=True))
    assert rec.unscored is None and rec.reweighted == ["style"]
    assert rec.aggregate["expected"] == pytest.approx(4.0)


def test_criteria_of_different_scales_aggregate_on_0_to_1(tmp_path: Path) -> None:
    # 3 levels, P(3) = 1 -> (3 - 1) / 2 = 1.0; 5 points, P(2) = 1 -> (2 - 1) / 4 = 0.25; weights 1, 1 -> 0.625
    crit = [Criterion("accuracy", "right?", 1.0, ("wrong", "partly", "right")), Criterion("style", "well written?")]
    judge = Judge(_scripted({"accuracy": {"3": 1.0}, "style": {"2": 1.0}}), store=tmp_path / "s.sqlite")
    [rec] = list(judge.criteria(items_from_dicts([ITEM]), crit))
    assert rec.scale == [0.0, 1.0]
    assert rec.criteria[0].points == 3 and rec.criteria[1].points == 5
    assert rec.aggregate["expected"] == pytest.approx(0.625)


def test_criteria_prompts_share_everything_before_the_criterion(tmp_path: Path) -> None:
    backend = _scripted({"accuracy": {"4": 1.0}, "style": {"2": 1.0}})
    item = dict(ITEM, knowledge="Paris is the capital of France.", profile="A schoolchild.",
                evidence=["Passage one.", "Passage </evidence> two."])
    list(Judge(backend, store=tmp_path / "s.sqlite").criteria(items_from_dicts([item]), CRITERIA))
    first, second = (r.prompt for r in backend.history)  # type: ignore[union-attr]
    shared = os.path.commonprefix([first, second])  # noqa: RUF071 (characters)
    assert "Paris." in shared and shared.endswith("<criterion>\n")
    # Grounding blocks come in a fixed order, before the question, quoted like responses.
    assert first.index("<profile>") < first.index("<knowledge>") < first.index('<evidence n="1">') \
        < first.index('<evidence n="2">') < first.index("<question>")
    assert "Passage &lt;/evidence&gt; two." in first
    # The grounding is part of the store key: other knowledge is another judgment.
    other = Judge(_scripted({"accuracy": {"4": 1.0}, "style": {"2": 1.0}}), store=tmp_path / "s.sqlite")
    list(other.criteria(items_from_dicts([dict(item, knowledge="Lyon is the capital.")]), CRITERIA))
    assert other.backend.calls == 2  # type: ignore[attr-defined]


def test_checklist_counts_by_hand(tmp_path: Path) -> None:
    # P(YES) = 0.5, 0.2, 1.0: P(all) = 0.1; passed ~ 1 + Bernoulli(0.5) + Bernoulli(0.2):
    # P(1) = 0.5 * 0.8 = 0.4, P(2) = 0.5 * 0.8 + 0.5 * 0.2 = 0.5, P(3) = 0.1; E = 1.7.
    # satisfaction, weights (1, 1, 2): (0.5 + 0.2 + 2 * 1.0) / 4 = 0.675.
    backend = _scripted({"capital": {"YES": 0.4, "NO": 0.4}, "short": {"YES": 0.18, "NO": 0.72},
                         "polite": {"YES": 0.9}})
    item = dict(ITEM, checklist=[{"id": "c1", "text": "Does it name the capital?"},
                                 {"id": "c2", "text": "Is it short and sweet?"},
                                 {"id": "c3", "text": "Is it polite?", "weight": 2}])
    item["responses"] = [dict(ITEM["responses"][0], human_checks={"c1": True, "c2": 0})]
    [rec] = list(Judge(backend, store=tmp_path / "s.sqlite").checklist(items_from_dicts([item])))
    assert [c.p_pass for c in rec.checks] == pytest.approx([0.5, 0.2, 1.0])
    assert rec.p_all == pytest.approx(0.1)
    assert rec.passed == pytest.approx([0.0, 0.4, 0.5, 0.1])
    assert rec.expected_passed == pytest.approx(1.7)
    assert rec.satisfaction == pytest.approx(0.675)
    assert [c.human for c in rec.checks] == [1.0, 0.0, None]
    assert rec.to_dict()["checks"][0]["probabilities"] == pytest.approx({"YES": 0.5, "NO": 0.5})


def test_labelled_scale_with_values(tmp_path: Path) -> None:
    # FULL = 1, PARTIAL = 0.5, NO = 0 with P = 0.2, 0.6, 0.2 -> value 0.5; the passing label is FULL: 0.2.
    labels = LabelSet.parse("FULL=1,PARTIAL=0.5,NO=0")
    item = dict(ITEM, checklist=["Does it cover the capital?"])
    item["responses"] = [dict(ITEM["responses"][0], human_checks={"1": "partial"})]
    judge = Judge(_scripted({"capital": {"FULL": 0.2, "PARTIAL": 0.6, "NO": 0.2}}), store=tmp_path / "s.sqlite")
    [rec] = list(judge.checklist(items_from_dicts([item]), labels=labels))
    assert rec.labels == ["FULL", "PARTIAL", "NO"]
    assert rec.checks[0].value == pytest.approx(0.5) and rec.checks[0].p_pass == pytest.approx(0.2)
    assert rec.checks[0].human == 0.5
    prompt = judge.backend.history[0].prompt  # type: ignore[attr-defined]
    assert "FULL, PARTIAL, NO" in prompt and prompt.rstrip().endswith("Answer: [")


@pytest.mark.parametrize("text, message", [
    ("YES", "two or more"), ("YES=1,NO", "LABEL=NUMBER"), ("A=1,A=2", "distinct"), ("YES=1,NO=x", "LABEL=NUMBER"),
    ("A]=1,B=0", "brackets"), ("YES=1,NO=nan", "LABEL=NUMBER"),
])
def test_bad_label_sets_are_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        LabelSet.parse(text)


def test_a_human_label_outside_the_label_set_is_an_error(tmp_path: Path) -> None:
    item = dict(ITEM, checklist=["Is it right?"])
    item["responses"] = [dict(ITEM["responses"][0], human_checks={"1": "MAYBE"})]
    with pytest.raises(InputError, match=r"human_checks\.1.*MAYBE"):
        list(Judge(MockBackend(), store=tmp_path / "s.sqlite").checklist(items_from_dicts([item])))


def test_an_item_without_criteria_names_the_item(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="item 'q1' has no criteria"):
        list(Judge(MockBackend(), store=tmp_path / "s.sqlite").criteria(items_from_dicts([ITEM])))


@pytest.mark.parametrize("field, value, where", [
    ("criteria", [{"name": "a"}], "criteria[0].description"),
    ("criteria", [{"name": "a", "description": "d", "weight": -1}], "criteria[0].weight"),
    ("criteria", [{"name": "a", "description": "d"}, {"name": "a", "description": "e"}], "criteria[1].name"),
    ("criteria", [{"name": "a", "description": "d", "weight": 0}], "criteria"),
    ("criteria", [{"name": "a", "description": "d", "levels": ["only one"]}], "criteria[0].levels"),
    ("criteria", "accuracy", "criteria"),
    ("checklist", [{"id": "c1"}], "checklist[0].text"),
    ("checklist", [3], "checklist[0]"),
    ("evidence", [1, None], "evidence[1]"),
    ("evidence", {"a": 1}, "evidence"),
])
def test_bad_mode_fields_name_line_and_field(field: str, value: Any, where: str) -> None:
    with pytest.raises(InputError) as info:
        items_from_dicts([dict(ITEM, **{field: value})], source="items.jsonl")
    assert info.value.field == where and info.value.line == 1 and info.value.file == "items.jsonl"


def test_a_user_template_without_grounding_refuses_grounded_items(tmp_path: Path) -> None:
    tpl = tmp_path / "t.txt"
    tpl.write_text("Rate ${response} for ${question}.\n${task}\n")
    judge = Judge(MockBackend(), store=tmp_path / "s.sqlite", pointwise_template=tpl)
    with pytest.raises(ConfigError, match="grounding_block"):
        list(judge.score(items_from_dicts([dict(ITEM, knowledge="k")])))
    assert len(list(judge.score(items_from_dicts([ITEM])))) == 1


def test_scores_and_the_plan_see_the_same_questions(tmp_path: Path) -> None:
    judge = Judge(MockBackend(), store=tmp_path / "s.sqlite")
    items = items_from_dicts([dict(ITEM, checklist=["a?", "b?"])])
    task = judge.checklist_task()
    plan = judge.plan(items, task)
    assert plan.judgments == 2 and plan.model_calls == 2
    list(judge.run(task, items))
    assert judge.plan(items, task).model_calls == 0


@pytest.mark.model
def test_criteria_and_checklist_end_to_end_on_the_bundled_judge(tmp_path: Path) -> None:
    """The real SmolLM2 judge: every criterion and check scored, probabilities on the labels, and a rerun
    served from the store with zero model calls."""
    items = items_from_dicts([{
        "id": "q1", "question": "What is the boiling point of water at sea level in Celsius?",
        "knowledge": "Water boils at 100 degrees Celsius at sea level.",
        "criteria": [{"name": "accuracy", "description": "Is the stated temperature right?", "weight": 2},
                     {"name": "clarity", "description": "Is the answer easy to read?",
                      "levels": ["unclear", "mostly clear", "clear"]}],
        "checklist": [{"id": "c1", "text": "Does the response state 100 degrees?"}],
        "responses": [{"id": "good", "text": "It boils at 100 degrees Celsius."},
                      {"id": "bad", "text": "It boils at 50 degrees Celsius."}]}])
    store = tmp_path / "s.sqlite"
    judge = Judge("hf/smollm2-135m", store=store)
    crit = list(judge.criteria(items))
    checks = list(judge.checklist(items))
    assert judge.stats.model_calls == 2 * 2 + 2
    for rec in crit:
        assert rec.unscored is None and rec.aggregate["expected"] is not None
        assert 0 <= rec.aggregate["expected"] <= 1 and rec.scale == [0.0, 1.0]
        assert all(c.label_mass and 0 < c.label_mass <= 1 + 1e-6 for c in rec.criteria)
    for ch in checks:
        assert ch.unscored is None and ch.checks[0].probabilities is not None
        assert math.isclose(sum(ch.checks[0].probabilities.values()), 1.0, rel_tol=1e-9)
        assert ch.passed is not None and math.isclose(sum(ch.passed), 1.0, rel_tol=1e-9)
    judge.close()
    again = Judge("hf/smollm2-135m", store=Store(store))
    assert [r.to_dict() for r in again.criteria(items)] == [r.to_dict() for r in crit]
    assert [r.to_dict() for r in again.checklist(items)] == [r.to_dict() for r in checks]
    assert again.stats.model_calls == 0
    again.close()


def test_suite_level_checks_and_response_checks_combine(tmp_path: Path) -> None:
    item = dict(ITEM, checklist=["Item check?"])
    item["responses"] = [dict(ITEM["responses"][0], checklist=[{"id": "r1", "text": "Own check?"}])]
    backend = MockBackend()
    [rec] = list(Judge(backend, store=tmp_path / "s.sqlite").checklist(items_from_dicts([item]),
                                                                       [Check("s", "Suite check?")]))
    assert [c.id for c in rec.checks] == ["1", "r1"]  # the item's and the response's; the suite is a fallback
    [rec] = list(Judge(backend, store=tmp_path / "s.sqlite").checklist(items_from_dicts([ITEM]),
                                                                       [Check("s", "Suite check?")]))
    assert [c.id for c in rec.checks] == ["s"]


# -- the service ---------------------------------------------------------------------------------------


def _mode_items() -> list[dict[str, Any]]:
    return [dict(ITEM, knowledge="Paris is the capital.", checklist=["Does it name Paris?", "Is it one word?"],
                 responses=[{"id": "a", "text": "Paris."}, {"id": "b", "text": "Lyon, I think."}]),
            {"id": "q2", "question": "2 + 2?", "responses": [{"id": "a", "text": "4"}],
             "criteria": [{"name": "accuracy", "description": "Is it right?", "levels": ["no", "yes"]}],
             "checklist": [{"id": "k", "text": "Is it a number?"}]}]


def test_service_criteria_and_checklist_equal_the_library(tmp_path: Path) -> None:
    import httpx

    from trustjudge.serve import create_app

    from .test_server import serving

    suite = [{"name": "accuracy", "description": "Is every fact right?", "weight": 2},
             {"name": "style", "description": "Is it well written?"}]
    app = create_app("mock/hash", store_path=tmp_path / "srv.sqlite")
    with serving(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        got = client.post("/v1/criteria", json={"items": _mode_items(), "criteria": suite, "reweight": True})
        assert got.status_code == 200, got.text
        checks = client.post("/v1/checklist", json={"items": _mode_items(), "labels": "YES=1,NO=0"})
        assert checks.status_code == 200, checks.text
        bad = client.post("/v1/criteria", json={"items": _mode_items(), "criteria": [{"name": "x"}]})
        no_criteria = client.post("/v1/criteria", json={"items": _mode_items()})
        bad_labels = client.post("/v1/checklist", json={"items": _mode_items(), "labels": "YES"})
        pairs = client.post("/v1/criteria/compare", json={"items": _mode_items()[:1], "criteria": suite,
                                                          "graded": True})
    library = Judge("mock/hash", store=tmp_path / "lib.sqlite")
    crit = [Criterion("accuracy", "Is every fact right?", 2.0), Criterion("style", "Is it well written?")]
    want = [r.to_dict() for r in library.criteria(items_from_dicts(_mode_items()), crit, reweight=True)]
    assert got.json()["records"] == want
    assert [r["item_id"] for r in want] == ["q1", "q1", "q2"]
    assert [c["name"] for c in want[2]["criteria"]] == ["accuracy"]  # the item's own criteria win
    want = [r.to_dict() for r in library.checklist(items_from_dicts(_mode_items()))]
    assert checks.json()["records"] == want
    # A bad request criterion names the body field; an item without criteria names the item.
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"] == ["body", "criteria", 0, "description"]
    assert no_criteria.status_code == 422 and no_criteria.json()["detail"][0]["item"] == 0
    assert bad_labels.status_code == 400 and "two or more" in bad_labels.json()["detail"]
    want = [r.to_dict() for r in library.compare_criteria(items_from_dicts(_mode_items()[:1]), crit, graded=True)]
    assert pairs.status_code == 200 and pairs.json()["records"] == want


def test_openapi_records_are_the_library_records() -> None:
    """The service's record schemas come from the library's record classes: no field can drift."""
    import dataclasses

    from trustjudge.modes._records import (
        ChecklistRecord,
        ClaimsRecord,
        CompareRecord,
        CriteriaCompareRecord,
        CriteriaRecord,
        ScoreRecord,
    )
    from trustjudge.serve import openapi_json

    schemas = json.loads(openapi_json())["components"]["schemas"]
    for cls in (ScoreRecord, CompareRecord, CriteriaRecord, ChecklistRecord, CriteriaCompareRecord, ClaimsRecord):
        assert set(schemas[cls.__name__]["properties"]) == {f.name for f in dataclasses.fields(cls)}
    assert "closing" in schemas["CompareRecord"]["properties"]  # dropped by the hand-written schema before


# -- pairwise per criterion ------------------------------------------------------------------------------

PAIR_ITEM = {"id": "p1", "question": "Capital of France?",
             "responses": [{"id": "a", "text": "Paris."}, {"id": "b", "text": "Lyon."}],
             "pairs": [{"first": "a", "second": "b", "human": "first"}]}


def _pair_script(table: dict[tuple[str, str], dict[str, float]]) -> MockBackend:
    """Probabilities by (criterion name, text shown as response A)."""

    def script(req: LabelRequest) -> list[float]:
        shown_a = req.prompt.split("<response_a>\n", 1)[1].split("\n</response_a>", 1)[0]
        name = req.prompt[req.prompt.rfind("<criterion>"):].split("\n")[1].split(":")[0]
        probs = table[(name, shown_a)]
        return [probs.get(lab.rstrip("]"), 0.0) for lab in req.labels]

    return MockBackend("pairs", script)


def test_pairwise_per_criterion_by_hand(tmp_path: Path) -> None:
    # accuracy (weight 2): Paris first: A .8 B .1 C .1; Lyon first: A .1 B .8 C .1
    #   -> first (Paris) (.8 + .8) / 2 = .8, second .1, tie .1; margin .7
    # style (weight 1): Paris first: A .2 B .6 C .2; Lyon first: A .5 B .3 C .2
    #   -> first (.2 + .3) / 2 = .25, second (.6 + .5) / 2 = .55, tie .2; margin -.3
    # aggregate: first (2 * .8 + .25) / 3, second (2 * .1 + .55) / 3 = .25, tie .4 / 3; margin (1.4 - .3) / 3
    backend = _pair_script({("accuracy", "Paris."): {"A": .8, "B": .1, "C": .1},
                            ("accuracy", "Lyon."): {"A": .1, "B": .8, "C": .1},
                            ("style", "Paris."): {"A": .2, "B": .6, "C": .2},
                            ("style", "Lyon."): {"A": .5, "B": .3, "C": .2}})
    judge = Judge(backend, store=tmp_path / "s.sqlite")
    [rec] = list(judge.compare_criteria(items_from_dicts([PAIR_ITEM]), CRITERIA))
    acc, style = rec.criteria
    assert acc.probabilities == pytest.approx({"first": .8, "second": .1, "tie": .1})
    assert acc.margin == pytest.approx(.7) and acc.verdict == "first"
    assert style.probabilities == pytest.approx({"first": .25, "second": .55, "tie": .2})
    assert style.verdict == "second"
    assert rec.aggregate == pytest.approx({"first": 1.85 / 3, "second": .25, "tie": .4 / 3})
    assert rec.margin == pytest.approx(1.1 / 3) and rec.verdict == "first" and rec.human == "first"
    assert backend.calls == 4


def test_graded_pairwise_margin_by_hand(tmp_path: Path) -> None:
    # Paris first: A>>B .6, A>B .4; Lyon first: B>A .5, B>>A .5 (B is Paris there).
    # Mirrored and averaged, first's view: (.55, .45, 0, 0, 0); margin 2 * .55 + .45 = 1.55.
    backend = _pair_script({("accuracy", "Paris."): {"A>>B": .6, "A>B": .4},
                            ("accuracy", "Lyon."): {"B>A": .5, "B>>A": .5}})
    judge = Judge(backend, store=tmp_path / "s.sqlite")
    [rec] = list(judge.compare_criteria(items_from_dicts([PAIR_ITEM]), CRITERIA[:1], graded=True))
    [acc] = rec.criteria
    assert acc.graded == pytest.approx({"first>>second": .55, "first>second": .45, "tie": 0, "second>first": 0,
                                        "second>>first": 0})
    assert acc.margin == pytest.approx(1.55) and acc.probabilities == pytest.approx({"first": 1, "second": 0, "tie": 0})
    prompt = backend.history[0].prompt  # type: ignore[union-attr]
    assert "A>>B (A is much better)" in prompt and prompt.rstrip().endswith("Verdict: [")


# -- audits of the modes -----------------------------------------------------------------------------------


def _check_record(rid: str, checks: list[tuple[float, float | None]]) -> dict[str, Any]:
    return {"item_id": "q", "response_id": rid, "unscored": None,
            "satisfaction": sum(p for p, _ in checks) / len(checks),
            "checks": [{"id": str(i), "p_pass": p, "value": p, "human": h, "unscored": None}
                       for i, (p, h) in enumerate(checks)]}


def test_checklist_audit_by_hand() -> None:
    from trustjudge.modes._audits import checklist_audit

    # p = .9 .2 .6 .4 against humans 1 0 0 1:
    # Brier (.01 + .04 + .36 + .36) / 4 = .1925; accuracy (p > .5: 1 0 1 0) 2/4;
    # AUROC: positives {.9, .4} over negatives {.2, .6}: .9>.2, .9>.6, .4>.2, .4<.6 -> 3/4.
    # ECE, 10 bins, one prediction per bin: (.1 + .2 + .6 + .6) / 4 = .375
    records = [_check_record("a", [(0.9, 1.0), (0.2, 0.0)]), _check_record("b", [(0.6, 0.0), (0.4, 1.0), (0.5, None)])]
    report = checklist_audit(records)
    cal = report["calibration"]
    assert report["checks_with_human_labels"] == 4
    assert cal["brier"] == pytest.approx(0.1925) and cal["accuracy"] == 0.5 and cal["auroc"] == pytest.approx(0.75)
    assert cal["ece"] == pytest.approx(0.375) and cal["base_rate"] == 0.5
    assert len(cal["reliability"]) == 4


def _crit_score(rid: str, scores: dict[str, float], aggregate: float) -> dict[str, Any]:
    return {"item_id": "q", "response_id": rid, "unscored": None, "aggregate": dict.fromkeys(
        ("discrete", "geval", "expected", "trustjudge"), aggregate), "human_score": None,
        "criteria": [{"name": n, "points": 5,
                      "scores": dict.fromkeys(("discrete", "geval", "expected", "trustjudge"), v),
                      "human": v, "unscored": None} for n, v in scores.items()]}


def _crit_pair(first: str, second: str, verdicts: dict[str, str], overall: str) -> dict[str, Any]:
    return {"item_id": "q", "first_id": first, "second_id": second, "unscored": None, "verdict": overall,
            "criteria": [{"name": n, "verdict": v, "unscored": None} for n, v in verdicts.items()]}


def test_criteria_audit_by_hand() -> None:
    from trustjudge.modes._audits import criteria_audit

    # acc: x 3, y 2, z 1; pairwise x>y, y>z, but z>x: CR = 1/3 (x scores above z), NTR_3 = 1/1 (a cycle).
    # x wins (x, y) on both criteria, yet its pointwise aggregate (2.0) is below y's (2.5): lost 1 of 1 sweeps.
    scores = [_crit_score("x", {"acc": 3, "style": 1}, 2.0), _crit_score("y", {"acc": 2, "style": 3}, 2.5),
              _crit_score("z", {"acc": 1, "style": 2}, 1.5)]
    pairs = [_crit_pair("x", "y", {"acc": "first", "style": "first"}, "first"),
             _crit_pair("y", "z", {"acc": "first", "style": "second"}, "first"),
             _crit_pair("x", "z", {"acc": "second", "style": "tie"}, "second")]
    report = criteria_audit(scores, pairs, ks=(3,))
    acc = report["criteria"]["acc"]
    assert acc["conflict_ratio"]["trustjudge"]["conflicts"] == 1 and acc["conflict_ratio"]["trustjudge"]["counted"] == 3
    assert acc["ntr"]["3"]["violating"] == 1 and acc["ntr"]["3"]["valid_subsets"] == 1
    assert acc["ntr"]["3"]["circular"] == 1
    assert acc["human_agreement"]["trustjudge"]["spearman_pooled"] == pytest.approx(1.0)
    wins = report["wins_every_criterion"]
    assert wins["pairs_won_on_every_criterion"] == 1 and wins["lost_pointwise_aggregate"] == 1
    assert wins["lost_pairwise_aggregate"] == 0


def test_grounding_audit_shift_and_wrong_profile(tmp_path: Path) -> None:
    from trustjudge.modes._audits import grounding_audit

    # Score 5 with the knowledge block, 3 without: shift +2 on every response. The profile "expert" gets 5,
    # any other profile 4: with each item's profile swapped, the first item's scores drop (5 -> 4).
    def script(req: LabelRequest) -> list[float]:
        if "<profile>\nA child." in req.prompt:
            want = "4"
        elif "<knowledge>" in req.prompt or "<profile>" in req.prompt:
            want = "5"
        else:
            want = "3"
        return [1.0 if lab == want + "]" else 0.0 for lab in req.labels]

    judge = Judge(MockBackend("g", script), store=tmp_path / "s.sqlite", scale=5)
    items = items_from_dicts([
        {"id": "a", "question": "Q?", "knowledge": "K.", "profile": "An expert.",
         "responses": [{"id": "1", "text": "x", "human_score": 1}, {"id": "2", "text": "y", "human_score": 2}]},
        {"id": "b", "question": "Q?", "knowledge": "K.", "profile": "A child.",
         "responses": [{"id": "1", "text": "z", "human_score": 3}]}])
    report = grounding_audit(judge.run, items, judge.score_task(), method="discrete")
    assert report["compared"] == 3
    # item b with its own profile "A child." scores 4; without grounding 3: shifts 2, 2, 1
    assert report["mean_shift"] == pytest.approx(5 / 3)
    wrong = report["wrong_profile"]
    # a gets "A child." (5 -> 4: drops), b gets "An expert." (4 -> 5: rises): 1 of 3 responses does not drop
    assert wrong["items"] == 2 and wrong["responses"] == 3
    assert wrong["share_not_dropping"] == pytest.approx(1 / 3)


# -- the command line ---------------------------------------------------------------------------------------


def _cli(*args: str | Path) -> Any:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "trustjudge.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_cli_criteria_with_a_suite_resumes_from_the_store_and_audits(tmp_path: Path) -> None:
    items = _jsonl(tmp_path / "items.jsonl", [dict(PAIR_ITEM, knowledge="Paris is the capital.")])
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"criteria": [{"name": "accuracy", "description": "Is it right?", "weight": 2},
                                              {"name": "clarity", "description": "Is it clear?"}]}))
    store, out, audit = tmp_path / "s.sqlite", tmp_path / "out.jsonl", tmp_path / "audit.json"
    first = _cli("criteria", items, "--suite", suite, "-j", "mock/hash", "--store", store, "--out", out,
                 "--audit", audit, "--grounding-audit")
    assert first.returncode == 0, first.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["response_id"] for r in rows] == ["a", "b"]
    assert [c["name"] for c in rows[0]["criteria"]] == ["accuracy", "clarity"]
    report = json.loads(audit.read_text())
    assert set(report["criteria"]) == {"accuracy", "clarity"} and "grounding" in report
    again = _cli("criteria", items, "--suite", suite, "-j", "mock/hash", "--store", store)
    assert again.returncode == 0 and "model calls 0" in again.stderr
    assert [json.loads(line) for line in again.stdout.splitlines()] == rows
    graded = _cli("criteria", items, "--suite", suite, "-j", "mock/hash", "--store", store, "--pairwise", "--graded")
    assert graded.returncode == 0, graded.stderr
    [pair] = [json.loads(line) for line in graded.stdout.splitlines()]
    assert pair["first_id"] == "a" and pair["criteria"][0]["graded"] is not None


def test_cli_checklist_labels_and_template(tmp_path: Path) -> None:
    items = _jsonl(tmp_path / "items.jsonl", [dict(ITEM, checklist=["Does it name Paris?"])])
    tpl = tmp_path / "check.txt"
    tpl.write_text("MY-CHECK-TEMPLATE ${grounding_block}\n${question}\n${response}\n${check}\n${task}\n")
    got = _cli("checklist", items, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "--labels",
               "FULL=1,PARTIAL=0.5,NO=0", "--template", tpl)
    assert got.returncode == 0, got.stderr
    [row] = [json.loads(line) for line in got.stdout.splitlines()]
    assert row["labels"] == ["FULL", "PARTIAL", "NO"] and set(row["checks"][0]["probabilities"]) == set(row["labels"])
    import sqlite3

    prompts = [json.loads(r[0])["prompt"] for r in sqlite3.connect(tmp_path / "s.sqlite").execute(
        "SELECT request FROM outputs")]
    assert prompts and all("MY-CHECK-TEMPLATE" in p for p in prompts)


@pytest.mark.parametrize("suite, message", [
    ('{"criteria": [{"name": "a"}]}', "field 'criteria[0].description': is missing"),
    ('{"criteria": [], "checks": []}', "field 'checks': is not a suite field"),
    ('{"criteria": [{"name": "a", "description": "d"}], "scale": 7}', "field 'scale': must be 5 or 10"),
    ('{\n  "criteria": [\n    {"name": "a",, }\n  ]\n}', ":3: invalid JSON"),
    ("{}", "holds neither criteria nor a checklist"),
])
def test_cli_bad_suite_names_file_and_field(tmp_path: Path, suite: str, message: str) -> None:
    items = _jsonl(tmp_path / "items.jsonl", [ITEM])
    path = tmp_path / "suite.json"
    path.write_text(suite)
    got = _cli("criteria", items, "--suite", path, "-j", "mock/hash", "--store", tmp_path / "s.sqlite")
    assert got.returncode == 2
    assert str(path) in got.stderr and message in got.stderr
    assert not (tmp_path / "s.sqlite").exists() or "model calls" not in got.stderr


def test_cli_item_without_criteria_stops_before_any_call(tmp_path: Path) -> None:
    items = _jsonl(tmp_path / "items.jsonl", [ITEM, dict(ITEM, id="q2", criteria=[{"name": "a", "description": "d"}])])
    got = _cli("criteria", items, "-j", "mock/hash", "--store", tmp_path / "s.sqlite")
    assert got.returncode == 2 and "item 'q1' has no criteria" in got.stderr and got.stdout == ""
    usage = _cli("criteria", items, "--graded", "-j", "mock/hash")
    assert usage.returncode == 2 and "--graded needs --pairwise" in usage.stderr


def test_the_shipped_examples_run(tmp_path: Path) -> None:
    """The README's mode commands on the example files (mock judge here; the README shows the default judge)."""
    root = Path(__file__).resolve().parents[1] / "examples"
    store = tmp_path / "s.sqlite"
    for args in (["criteria", root / "criteria.jsonl", "--suite", root / "suite.json"],
                 ["criteria", root / "criteria.jsonl", "--suite", root / "suite.json", "--pairwise", "--graded"],
                 ["checklist", root / "checklist.jsonl", "--suite", root / "suite.json"],
                 ["claims", root / "claims.jsonl", "--match", "--k", "3"]):
        got = _cli(*args, "-j", "mock/hash", "--store", store, "-q")
        assert got.returncode == 0, (args, got.stderr)
        rows = [json.loads(line) for line in got.stdout.splitlines()]
        assert rows and all("item_id" in r for r in rows)
