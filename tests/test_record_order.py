"""The JSON key order of every record type, pinned on fixed inputs: stored outputs, exported files and
service responses keep their bytes as long as these hold (the serializer writes declaration order)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trustjudge.modes._records import (
    ChecklistRecord,
    CheckResult,
    ClaimResult,
    ClaimsRecord,
    CompareRecord,
    CriteriaCompareRecord,
    CriteriaRecord,
    CriterionResult,
    CriterionVerdict,
    ScoreRecord,
    to_json,
)

SCORES = {"discrete": 4.0, "geval": 3.9, "expected": 3.8, "trustjudge": 3.85}
V = {"single": "first", "two_pass": "tie", "likelihood": "first", "ppl": None}


def _score(**kw: Any) -> ScoreRecord:
    return ScoreRecord("q", "a", "s", "mock", "direct", 5, dict(SCORES), 1.2, 0.9, None, **kw)


def _compare(**kw: Any) -> CompareRecord:
    return CompareRecord("q", "a", "b", "mock", "direct", dict(V), {"first": 0.5, "second": 0.3, "tie": 0.2},
                         [{"shown_first": "a", "unscored": None}], None, "verdict_probability", **kw)


CASES: dict[str, tuple[Any, list[str]]] = {
    "score": (_score(label_method="exact"),
              ["item_id", "response_id", "system", "judge", "protocol", "scale", "scores", "entropy", "label_mass",
               "label_method", "unscored", "human_score"]),
    "score with the optional fields": (
        _score(human_score=4.0, critique="ok", distribution={"1]": 1.0}, closing="needed", label_method="top_k"),
        ["item_id", "response_id", "system", "judge", "protocol", "scale", "scores", "entropy", "label_mass",
         "label_method", "unscored", "human_score", "critique", "distribution", "closing"]),
    "compare": (_compare(label_method="exact"),
                ["item_id", "first_id", "second_id", "judge", "protocol", "verdicts", "probabilities", "orders",
                 "label_method", "unscored", "ppl_source", "human", "annotators", "first_system", "second_system"]),
    "compare with closing": (_compare(closing="needed", human="first", annotators=["x"]),
                             ["item_id", "first_id", "second_id", "judge", "protocol", "verdicts", "probabilities",
                              "orders", "label_method", "unscored", "ppl_source", "human", "annotators", "first_system",
                              "second_system", "closing"]),
    "criteria": (CriteriaRecord("q", "a", None, "mock", "direct",
                                [CriterionResult("acc", 1.0, 5, dict(SCORES), 0.5, 1.0, 0.9, None)],
                                dict(SCORES), 0.2, [1.0, 5.0], None),
                 ["item_id", "response_id", "system", "judge", "protocol", "criteria", "aggregate", "spread", "scale",
                  "unscored", "reweighted", "human", "human_score"]),
    "checklist": (ChecklistRecord("q", "a", None, "mock", "direct", ["YES", "NO"],
                                  [CheckResult("c1", "Is it?", 1.0, {"YES": 0.7, "NO": 0.3}, 0.7, 0.7, 0.9, None)],
                                  0.7, 0.7, [0.3, 0.7], 0.7, None),
                  ["item_id", "response_id", "system", "judge", "protocol", "labels", "checks", "satisfaction",
                   "p_all", "passed", "expected_passed", "unscored", "reweighted"]),
    "criteria-compare": (CriteriaCompareRecord("q", "a", "b", "mock", "direct",
                                               [CriterionVerdict("acc", 1.0, {"first": 1.0, "second": 0.0, "tie": 0.0},
                                                                 "first", 1.0, [{"unscored": None}], None)],
                                               {"first": 1.0, "second": 0.0, "tie": 0.0}, 1.0, "first", None),
                         ["item_id", "first_id", "second_id", "judge", "protocol", "criteria", "aggregate", "margin",
                          "verdict", "unscored", "reweighted", "human", "first_system", "second_system"]),
    "claims": (ClaimsRecord("q", "a", None, "mock", "given", [ClaimResult("c", {"SUPPORTED": 1.0}, 1.0)],
                            1.0, [0.0, 1.0], 1.0, None, None, None, None),
               ["item_id", "response_id", "system", "judge", "source", "claims", "precision", "supported",
                "expected_supported", "f1_at_k", "unknown_mass", "matching", "unscored"]),
    "claims extracted": (ClaimsRecord("q", "a", None, "mock", "extracted", [], None, None, None, None, None, None,
                                      "unparseable_extraction", "no list"),
                         ["item_id", "response_id", "system", "judge", "source", "claims", "precision", "supported",
                          "expected_supported", "f1_at_k", "unknown_mass", "matching", "unscored", "extraction"]),
}

NESTED: dict[str, tuple[Any, list[str]]] = {
    "criterion": (CriterionResult("acc", 1.0, 5, dict(SCORES), 0.5, 1.0, 0.9, None),
                  ["name", "weight", "points", "scores", "sd", "entropy", "label_mass", "unscored", "human"]),
    "criterion with critique": (CriterionResult("acc", 1.0, 5, dict(SCORES), 0.5, 1.0, 0.9, None, 4.0, "why",
                                                {"1]": 1.0}),
                                ["name", "weight", "points", "scores", "sd", "entropy", "label_mass", "unscored",
                                 "human", "critique", "distribution"]),
    "check": (CheckResult("c1", "Is it?", 1.0, None, None, None, None, "empty_response"),
              ["id", "text", "weight", "probabilities", "value", "p_pass", "label_mass", "unscored", "human"]),
    "verdict": (CriterionVerdict("acc", 1.0, None, None, None, [], "empty_response"),
                ["name", "weight", "probabilities", "verdict", "margin", "orders", "unscored"]),
    "graded verdict": (CriterionVerdict("acc", 1.0, None, None, None, [], None, {"tie": 1.0}),
                       ["name", "weight", "probabilities", "verdict", "margin", "orders", "unscored", "graded"]),
    "claim": (ClaimResult("c", None, None),
              ["text", "probabilities", "p_supported", "label_mass", "unscored"]),
    "claim with unknown and human": (ClaimResult("c", None, None, 0.1, 0.9, None, "SUPPORTED"),
                                     ["text", "probabilities", "p_supported", "unknown", "label_mass", "unscored",
                                      "human"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_record_key_order_is_pinned(case: str) -> None:
    record, keys = CASES[case]
    row = record.to_dict()
    assert list(row) == keys
    assert type(record).from_dict(json.loads(json.dumps(row))) == record


@pytest.mark.parametrize("case", sorted(NESTED))
def test_nested_result_key_order_is_pinned(case: str) -> None:
    result, keys = NESTED[case]
    assert list(to_json(result)) == keys


def test_containers_are_copied_not_shared() -> None:
    record = CASES["compare"][0]
    row = record.to_dict()
    row["verdicts"]["single"] = "second"
    row["orders"][0]["unscored"] = "x"
    assert record.verdicts["single"] == "first" and record.orders[0]["unscored"] is None


def test_a_whole_record_serializes_to_fixed_bytes() -> None:
    record = CASES["criteria"][0]
    assert json.dumps(record.to_dict()) == (
        '{"item_id": "q", "response_id": "a", "system": null, "judge": "mock", "protocol": "direct", "criteria": '
        '[{"name": "acc", "weight": 1.0, "points": 5, "scores": {"discrete": 4.0, "geval": 3.9, "expected": 3.8, '
        '"trustjudge": 3.85}, "sd": 0.5, "entropy": 1.0, "label_mass": 0.9, "unscored": null, "human": null}], '
        '"aggregate": {"discrete": 4.0, "geval": 3.9, "expected": 3.8, "trustjudge": 3.85}, "spread": 0.2, '
        '"scale": [1.0, 5.0], "unscored": null, "reweighted": [], "human": null, "human_score": null}')


def test_declaration_order_holds_around_optional_fields_and_unresolved_types() -> None:
    from dataclasses import dataclass, field

    from trustjudge.modes._records import ResponseHeader, optional

    @dataclass
    class Local:  # defined in a function: its annotations do not resolve at module level
        x: float

    @dataclass
    class Plugin(ResponseHeader):
        note: str | None = optional()
        parts: list[Local] = field(default_factory=list)
        value: dict[str, float] | None = None

    rec = Plugin("q", "a", None, "mock", parts=[Local(1.0)], value={"k": 1.0})
    assert rec.to_dict() == {"item_id": "q", "response_id": "a", "system": None, "judge": "mock",
                             "parts": [{"x": 1.0}], "value": {"k": 1.0}}
    rec.note = "n"
    assert list(rec.to_dict()) == ["item_id", "response_id", "system", "judge", "note", "parts", "value"]
    assert rec.to_dict()["value"] is not rec.value


def test_label_method_is_one_name_and_records_and_stored_rows_from_before_the_rename_still_read(tmp_path: Any) -> None:
    """Records said ``method`` for how labels were read, as the score methods do: it is ``label_method`` now
    (issue 39), and what was written before reads back."""
    written = _score(label_method="top_k", api="chat").to_dict()
    assert written["label_method"] == "top_k" and "method" not in written and written["api"] == "chat"
    assert "api" not in _score(label_method="exact").to_dict()  # in-process judges have no API
    old = {**_score().to_dict(), "method": "top_k"}
    del old["label_method"]
    assert ScoreRecord.from_dict(old).label_method == "top_k"
    old_pair = {**_compare().to_dict(), "method": "exact"}
    del old_pair["label_method"]
    assert CompareRecord.from_dict(old_pair).label_method == "exact"

    from trustjudge import Store
    from trustjudge.backends import get_backend
    from trustjudge.engine._engine import Engine, Job

    backend = get_backend("mock/hash")
    with Store(tmp_path / "s.sqlite") as store:
        engine = Engine(backend, store)
        job = Job("P: [", ("1", "2"))
        key = engine.label_key(job)
        request = {"kind": "labels", "backend": backend.fingerprint, "prompt": job.prompt, "labels": ["1]", "2]"]}
        store.put_many([(key, "labels", backend.fingerprint, request,
                         {"logprobs": [-0.5, -1.0], "method": "top_k"}, 3, 0, 0.1)])  # a row stored before
        out = engine.labels([job])[0]
        assert out.method == "top_k" and out.api is None and engine.stats.model_calls == 0
