"""``calibrate --mode checklist|criteria --suite FILE`` reads items that carry no checks or criteria of their own,
as the checklist and criteria commands do (issue 39): the error that tells users to pass a suite is now true."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from trustjudge.cli import cli

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _calibrate(tmp_path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["calibrate", *args, "-j", "mock/hash", "--store", str(tmp_path / "s.sqlite")])
    return result.exit_code, " ".join((result.output + str(result.exception or "")).split())


def test_calibrate_checklist_takes_the_suite_the_example_needs(tmp_path: Path) -> None:
    code, output = _calibrate(tmp_path, str(EXAMPLES / "checklist.jsonl"), "--mode", "checklist", "--out",
                              str(tmp_path / "bare.json"))
    assert code != 0 and "no suite gives one" in output  # without it: the item's own error
    out = tmp_path / "cal.json"
    code, output = _calibrate(tmp_path, str(EXAMPLES / "checklist.jsonl"), "--mode", "checklist", "--suite",
                              str(EXAMPLES / "suite.json"), "--method", "isotonic", "--out", str(out))
    assert code == 0, output
    suite = json.loads((EXAMPLES / "suite.json").read_text())
    units = sum(len(r["human_checks"]) for line in (EXAMPLES / "checklist.jsonl").read_text().splitlines()
                for r in json.loads(line)["responses"])
    assert len(suite["checklist"]) * 2 == units  # every check of the suite, for both responses
    assert f"{units} labelled verdicts" in output
    verified, said = _calibrate(tmp_path, str(EXAMPLES / "checklist.jsonl"), "--mode", "checklist", "--suite",
                                str(EXAMPLES / "suite.json"), "--verify", str(out))
    assert verified == 0 and "verified" in said


def test_calibrate_criteria_takes_a_suite(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "question": "How should I brew green tea?",
             "responses": [{"id": "r", "text": f"Steep {i} minutes.", "human_criteria": {"accuracy": 1 + i % 5}}]}
            for i in range(4)]
    items = tmp_path / "crit.jsonl"
    items.write_text("".join(json.dumps(r) + "\n" for r in rows))
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"criteria": [{"name": "accuracy", "description": "Is it right?"}]}))
    code, output = _calibrate(tmp_path, str(items), "--mode", "criteria", "--suite", str(suite), "--out",
                              str(tmp_path / "c.json"))
    assert code == 0, output
    assert "4 labelled verdicts" in output


def test_a_suite_that_gives_the_mode_nothing_is_refused(tmp_path: Path) -> None:
    code, output = _calibrate(tmp_path, str(EXAMPLES / "items.jsonl"), "--suite", str(EXAMPLES / "suite.json"),
                              "--out", str(tmp_path / "c.json"))
    assert code == 2 and "--suite gives the compare mode nothing" in output
