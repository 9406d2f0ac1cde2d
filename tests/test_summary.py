"""Per-system summaries for every mode (trustjudge.audit._summary): hand-computed means, intervals, unscored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trustjudge import Judge, items_from_dicts
from trustjudge.audit._summary import record_mode, summarize
from trustjudge.cli import cli


def _score(item: str, rid: str, expected: float | None, system: str | None = None) -> dict[str, Any]:
    return {"item_id": item, "response_id": rid, "system": system, "judge": "j", "protocol": "direct", "scale": 10,
            "scores": {"expected": expected, "discrete": None}, "entropy": None, "label_mass": None,
            "label_method": None, "unscored": None if expected is not None else "no_label_mass"}


def test_score_means_by_system_with_unscored_counted_and_the_newest_record_winning() -> None:
    records = [_score("q1", "a", 2.0), _score("q1", "b", 9.0),   # replaced below
               _score("q1", "b", 6.0), _score("q2", "a", 4.0), _score("q2", "b", 8.0),
               _score("q3", "a", 9.0), _score("q3", "b", None)]
    s = summarize(records, bootstrap=200)
    assert s.mode == "score" and s.metric == "expected"
    a, b = s.system("a"), s.system("b")
    assert a.value == pytest.approx(5.0) and a.n == 3 and a.unscored == 0  # (2 + 4 + 9) / 3
    assert b.value == pytest.approx(7.0) and b.n == 2 and b.unscored == 1  # (6 + 8) / 2, q3 unscored
    assert [x.system for x in s.systems] == ["b", "a"]  # best first
    for x in (a, b):
        low, high = x.ci
        assert low <= x.value <= high and low < high
    assert b.ci[0] >= 6.0 and b.ci[1] <= 8.0


def test_the_system_field_groups_responses_and_other_modes_are_skipped() -> None:
    records = [_score("q1", "r1", 3.0, "gpt"), _score("q2", "r7", 5.0, "gpt"), _score("q1", "r2", 1.0, "llama"),
               {"item_id": "q1", "first_id": "r1", "second_id": "r2", "verdicts": {}}]
    s = summarize(records, mode="score", bootstrap=0)
    assert [(x.system, x.value) for x in s.systems] == [("gpt", 4.0), ("llama", 1.0)]
    assert s.skipped["other_mode"] == 1
    assert all(x.ci[0] != x.ci[0] for x in s.systems)  # no bootstrap: nan interval


def test_checklist_criteria_and_claims_headlines() -> None:
    base = {"judge": "j", "protocol": "direct", "system": None, "unscored": None}
    check = [dict(base, item_id=i, response_id="a", checks=[], satisfaction=v) for i, v in (("1", 0.5), ("2", 1.0))]
    s = summarize(check, bootstrap=50)
    assert s.mode == "checklist" and s.system("a").value == pytest.approx(0.75)
    crit = [dict(base, item_id="1", response_id="a", criteria=[], aggregate={"expected": 3.5}),
            dict(base, item_id="2", response_id="a", criteria=[], aggregate={"expected": None}, unscored="x")]
    s = summarize(crit, bootstrap=50)
    assert s.mode == "criteria" and s.system("a").value == 3.5 and s.system("a").unscored == 1
    claims = [dict(base, item_id="1", response_id="a", claims=[], precision=0.8,
                   matching={"expected_recall": 0.5, "hungarian": {"expected_f1": 0.6}}),
              dict(base, item_id="2", response_id="a", claims=[], precision=0.4,
                   matching={"expected_recall": 0.1, "hungarian": {"expected_f1": 0.2}})]
    assert summarize(claims, bootstrap=0).metric == "f1"
    assert summarize(claims, bootstrap=0).system("a").value == pytest.approx(0.4)
    assert summarize(claims, metric="precision", bootstrap=0).system("a").value == pytest.approx(0.6)
    assert summarize(claims, metric="recall", bootstrap=0).system("a").value == pytest.approx(0.3)
    with pytest.raises(ValueError, match="claims summaries give"):
        summarize(claims, metric="satisfaction")


def _pair(item: str, p: tuple[float, float, float] | None, verdict: str | None = None) -> dict[str, Any]:
    return {"item_id": item, "first_id": "x", "second_id": "y", "judge": "j", "protocol": "direct",
            "verdicts": {"likelihood": verdict}, "orders": [], "unscored": None if p else "no_label_mass",
            "probabilities": None if p is None else dict(zip(("first", "second", "tie"), p)),
            "first_system": "sx", "second_system": "sy"}


def test_compare_win_rates_by_hand_with_bradley_terry_beside() -> None:
    # win(sx) = p_first + p_tie / 2: 0.7 + 0.05, 0.2 + 0.3, 0.9 + 0 -> mean (0.75 + 0.5 + 0.9) / 3
    records = [_pair("q1", (0.7, 0.2, 0.1), "first"), _pair("q2", (0.2, 0.2, 0.6), "tie"),
               _pair("q3", (0.9, 0.1, 0.0), "first"), _pair("q4", None)]
    s = summarize(records, bootstrap=100)
    sx, sy = s.system("sx"), s.system("sy")
    assert sx.value == pytest.approx((0.75 + 0.5 + 0.9) / 3) and sy.value == pytest.approx(1 - sx.value)
    assert sx.unscored == sy.unscored == 1 and sx.n == 3
    assert sx.bt is not None and sy.bt is not None and sx.bt > 0 > sy.bt and sx.bt == pytest.approx(-sy.bt)
    assert sx.bt_ci is not None and sx.bt_ci[0] <= sx.bt <= sx.bt_ci[1]
    hard = summarize(records, metric="verdict", bootstrap=0)
    assert hard.system("sx").value == pytest.approx((1 + 0.5 + 1) / 3)


def test_records_of_a_real_run_are_recognised_for_every_mode(tmp_path: Path) -> None:
    item = {"id": "q", "question": "Capital of France?", "reference": "Paris",
            "responses": [{"id": "a", "text": "Paris."}, {"id": "b", "text": "Lyon."}],
            "checklist": [{"id": "c", "text": "Is it Paris?"}], "criteria": [{"name": "acc", "description": "Right?"}],
            "gold_claims": ["The capital is Paris."], "evidence": ["Paris is the capital of France."]}
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    items = items_from_dicts([item])
    runs = {"score": judge.score(items), "compare": judge.compare(items),
            "criteria": judge.run(judge.task("criteria"), items),
            "checklist": judge.run(judge.task("checklist"), items),
            "criteria-compare": judge.run(judge.task("criteria-compare"), items),
            "claims": judge.run(judge.task("claims", match=True), items)}
    for mode, records in runs.items():
        rows = [r.to_dict() for r in records]
        assert {record_mode(r) for r in rows} == {mode}
        s = summarize(rows, bootstrap=10)
        assert s.mode == mode and {x.system for x in s.systems} == {"a", "b"}
    judge.close()


def test_the_summary_command_reads_records(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [_score("q1", "a", 2.0), _score("q2", "a", 4.0),
                                                             _score("q1", "b", None)]))
    out = tmp_path / "s.json"
    result = CliRunner().invoke(cli, ["summary", str(path), "--json", str(out), "--bootstrap", "100"])
    assert result.exit_code == 0, result.output
    assert "3.000" in result.output and "score" in result.output
    data = json.loads(out.read_text())
    assert data["systems"][0] == {"system": "a", "value": 3.0, "ci": data["systems"][0]["ci"], "n": 2, "items": 2,
                                  "unscored": 0}
    assert data["systems"][1]["unscored"] == 1 and data["systems"][1]["value"] is None
    bad = CliRunner().invoke(cli, ["summary", str(path), "--metric", "nope"])
    assert bad.exit_code == 2 and "score summaries give" in bad.output


def test_rank_by_any_mode_gives_the_per_system_means_of_its_records(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    rows = [{"id": f"q{i}", "question": f"Question {i}?", "checklist": [{"id": "c", "text": "Is it right?"}],
             "responses": [{"id": f"a{i}", "text": f"Answer {i}.", "system": "alpha"},
                           {"id": f"b{i}", "text": f"Other {i}.", "system": "beta"}]} for i in range(3)]
    items.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for mode, field in (("checklist", "satisfaction"), ("score", "scores")):
        out, js = tmp_path / f"{mode}.jsonl", tmp_path / f"{mode}.json"
        result = CliRunner().invoke(cli, ["rank", str(items), "-j", "mock/hash", "--store", str(tmp_path / "s.sqlite"),
                                          "--mode", mode, "--out", str(out), "--json", str(js), "--bootstrap", "50",
                                          "-q"])
        assert result.exit_code == 0, result.output
        records = [json.loads(line) for line in out.read_text().splitlines()]
        data = {s["system"]: s for s in json.loads(js.read_text())["systems"]}
        for system in ("alpha", "beta"):
            values = [r[field] if mode == "checklist" else r[field]["expected"] for r in records
                      if r["system"] == system]
            assert data[system]["value"] == pytest.approx(sum(values) / 3) and data[system]["n"] == 3
            low, high = data[system]["ci"]
            assert low <= data[system]["value"] <= high
    bad = CliRunner().invoke(cli, ["rank", str(items), "-j", "mock/hash", "--metric", "expected"])
    assert bad.exit_code == 2 and "need --mode" in bad.output


def test_summary_on_the_judging_commands_with_and_without_calibration(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    rows = [{"id": f"q{i}", "question": f"Question {i}?", "checklist": [{"id": "c", "text": "Is it right?"}],
             "criteria": [{"name": "acc", "description": "Right?"}],
             "responses": [{"id": "a", "text": f"Answer {i}."}, {"id": "b", "text": f"Other {i}."}]}
            for i in range(3)]
    items.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = str(tmp_path / "s.sqlite")
    for command, value in (("score", lambda r: r["scores"]["expected"]), ("checklist", lambda r: r["satisfaction"]),
                           ("criteria", lambda r: r["aggregate"]["expected"]), ("compare", None)):
        out, summary = tmp_path / f"{command}.jsonl", tmp_path / f"{command}.summary.json"
        result = CliRunner().invoke(cli, [command, str(items), "-j", "mock/hash", "--store", store, "--out", str(out),
                                          "--summary", str(summary)])
        assert result.exit_code == 0, result.output
        data = json.loads(summary.read_text())
        records = [json.loads(line) for line in out.read_text().splitlines()]
        systems = {s["system"]: s for s in data["systems"]}
        assert set(systems) == {"a", "b"}, command
        if value is not None:
            mean = sum(value(r) for r in records if r["response_id"] == "a") / 3
            assert systems["a"]["value"] == pytest.approx(mean)
        else:
            assert systems["a"]["value"] + systems["b"]["value"] == pytest.approx(1.0) and "bt" in systems["a"]


def test_every_built_in_mode_declares_its_summary_through_the_mode_contract() -> None:
    from trustjudge.modes import get_mode

    for name in ("score", "criteria", "checklist", "claims", "compare", "criteria-compare"):
        spec = get_mode(name).summary_metrics
        assert spec is not None, name
        assert bool(spec.pairs) == (name in ("compare", "criteria-compare")), name
    assert get_mode("steps").summary_metrics is None


def test_a_registered_recogniser_is_asked_before_the_built_in_ones() -> None:
    from trustjudge.audit._summary import SummaryMetrics, register_summary

    row = _score("q1", "a", 4.0)
    row["flavour"] = 7.0
    assert record_mode(row) == "score"
    register_summary("flavoured", SummaryMetrics({"flavour": lambda r: r.get("flavour")},
                                                 recognise=lambda r: "flavour" in r))
    try:
        assert record_mode(row) == "flavoured"
        s = summarize([row], bootstrap=0)
        assert s.mode == "flavoured" and s.metric == "flavour" and s.system("a").value == 7.0
    finally:
        register_summary("flavoured", None)
    assert record_mode(row) == "score"
