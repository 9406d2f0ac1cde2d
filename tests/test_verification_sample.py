"""The verification sample (issue 34): a seeded, stratified sample of a run's verdicts to label, and the exact
test of whether the guarantee holds on this data, on planted data where the truth is known."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trustjudge.audit import _sample as V
from trustjudge.cli import cli
from trustjudge.errors import ConfigError


def _run(tmp_path: Path, n: int = 200, kept: int = 150) -> tuple[Path, Path]:
    """A run's verdicts (as `select --out` writes them: the first response preferred throughout, the first
    ``kept`` kept) and its items."""
    items, verdicts = tmp_path / "items.jsonl", tmp_path / "verdicts.jsonl"
    items.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Question {i}?", "responses": [
        {"id": "a", "text": f"A{i}"}, {"id": "b", "text": f"B{i}"}]}) + "\n" for i in range(n)))
    verdicts.write_text("".join(json.dumps({
        "item_id": f"q{i}", "first_id": "a", "second_id": "b", "human": None,
        "calibrated": {"verdict": "first", "confidence": 0.9 if i < kept else 0.4,
                       "abstained": None if i < kept else "below_threshold"}}) + "\n" for i in range(n)))
    return items, verdicts


def _invoke(*args: Any) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _label(sample: Path, truth: Any) -> None:
    """Fill each sampled pair's `human` from the planted truth (item index -> the preferred response)."""
    rows = [json.loads(line) for line in sample.read_text().splitlines()]
    for row in rows:
        for pair in row["pairs"]:
            pair["human"] = truth(int(row["id"][1:]))
    sample.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize(("truth", "said", "result"), [
    (lambda i: "first" if i % 5 < 3 else "second", "REFUTED", "refuted"),  # 60% agree, target 0.8
    (lambda i: "first" if i % 20 else "second", "holds", "holds"),  # 95% agree
])
def test_a_labelled_sample_says_whether_the_guarantee_holds_on_this_data(tmp_path: Path, truth: Any, said: str,
                                                                         result: str) -> None:
    items, verdicts = _run(tmp_path)
    sample = tmp_path / "sample.jsonl"
    drew = _invoke("sample", verdicts, "--items", items, "--out", sample, "--target-agreement", 0.8,
                   "--risk-delta", 0.1, "--size", 60)
    assert drew.exit_code == 0, drew.output
    key = json.loads((tmp_path / "sample.jsonl.key.json").read_text())
    assert [u["stratum"] for u in key["units"]].count("kept") == 60
    assert [u["stratum"] for u in key["units"]].count("abstained") == 15  # a quarter as many
    assert key["run"] == {"kept": 150, "abstained": 50}
    rows = [json.loads(line) for line in sample.read_text().splitlines()]
    assert all(p["human"] is None for r in rows for p in r["pairs"]) and sum(len(r["pairs"]) for r in rows) == 75
    assert "verdict" not in sample.read_text()  # the labellers do not see the judge's verdicts
    _label(sample, truth)
    checked = _invoke("check-sample", sample, "--out", tmp_path / "result.json")
    assert checked.exit_code == 0, checked.output
    assert said in checked.output
    out = json.loads((tmp_path / "result.json").read_text())
    assert out["result"] == result and out["kept_labelled"] == 60
    agreeing = sum(truth(int(u["key"][0][1:])) == "first" for u in key["units"] if u["stratum"] == "kept")
    assert out["kept_agreed"] == agreeing


def test_the_sample_is_seeded_and_does_not_depend_on_the_records_order(tmp_path: Path) -> None:
    _, verdicts = _run(tmp_path)
    units = V.pair_units([json.loads(line) for line in verdicts.read_text().splitlines()], "v")
    again = V.draw(list(reversed(units)), size=30, seed=4)
    assert V.draw(units, size=30, seed=4) == again
    assert V.draw(units, size=30, seed=5) != again
    assert len(V.draw(units, size=500)) == 150 + 50  # each stratum capped at what the run has


def test_the_binomial_tests_are_exact_and_undecided_says_how_many_more() -> None:
    assert V.binomial_test(11, 11, 0.8, 0.1)["result"] == "holds"  # 0.8 ** 11 = 0.086
    assert V.binomial_test(10, 10, 0.8, 0.1)["result"] == "undecided"  # 0.8 ** 10 = 0.107
    assert V.binomial_test(10, 10, 0.8, 0.1)["label_more"] == 1
    r = V.binomial_test(17, 20, 0.8, 0.1)
    assert r["result"] == "undecided" and r["p_below_target"] == pytest.approx(0.41144, abs=1e-4)
    more = r["label_more"]
    assert more is not None and V.binomial_test(17 + round(0.85 * more), 20 + more, 0.8, 0.1)["result"] == "holds"
    assert V.binomial_test(16, 20, 0.8, 0.1)["label_more"] is None  # exactly the target: no count decides
    assert V.sample_size(0.8, 0.1, 0.05) == 106


def test_bad_input_is_refused_naming_the_file_line_and_field(tmp_path: Path) -> None:
    items, verdicts = _run(tmp_path, n=5, kept=3)
    rows = verdicts.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(rows[0] + "\n" + json.dumps({**json.loads(rows[1]), "calibrated": {"verdict": "first"}}) + "\n")
    with pytest.raises(ConfigError, match=r"bad\.jsonl: line 2: field 'calibrated\.abstained' is missing"):
        _invoke("sample", bad, "--items", items, "--out", tmp_path / "s.jsonl", "--target-agreement", 0.8,
                "--risk-delta", 0.1)
    sample = tmp_path / "s.jsonl"
    _invoke("sample", verdicts, "--items", items, "--out", sample, "--target-agreement", 0.8, "--risk-delta", 0.1)
    key = tmp_path / "s.jsonl.key.json"
    data = json.loads(key.read_text())
    data["units"][1]["stratum"] = "maybe"
    key.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"s\.jsonl\.key\.json: units\[1\] needs"):
        _invoke("check-sample", sample)


def test_a_negative_seed_is_refused_not_a_traceback() -> None:
    units = [{"key": [f"q{i}", "a", "b"], "stratum": V.KEPT, "verdict": "first"} for i in range(5)]
    with pytest.raises(ConfigError, match="seed is a whole number >= 0, got --seed -5"):
        V.draw(units, size=2, seed=-5)  # before: numpy's ValueError
    assert len(V.draw(units, size=2, seed=0)) == 2
