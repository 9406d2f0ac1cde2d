"""The HTML report of the judging-mode audits: reliability plot, tables, escaping, and ``--report`` on the CLI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trustjudge import Judge, MockBackend, items_from_dicts
from trustjudge.backends import LabelRequest
from trustjudge.modes._audits import checklist_audit, claims_audit, claims_sensitivity, criteria_audit, grounding_audit
from trustjudge.report._modes import render_mode_report

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
METHODS = ("discrete", "geval", "expected", "trustjudge")


def _check_record(rid: str, checks: list[tuple[float, float | None]]) -> dict[str, Any]:
    return {"item_id": "q", "response_id": rid, "unscored": None,
            "satisfaction": sum(p for p, _ in checks) / len(checks),
            "checks": [{"id": str(i), "p_pass": p, "value": p, "human": h, "unscored": None}
                       for i, (p, h) in enumerate(checks)]}


def _figure(page: str, plot_id: str) -> str:
    match = re.search(rf'<figure class="plot" id="{plot_id}">\s*(<svg .*?</svg>)', page, re.DOTALL)
    assert match, f"no {plot_id} figure with an inline svg"
    return match.group(1)


def _bins(page: str) -> tuple[int, int]:
    svg = _figure(page, "plot-reliability")
    return len(re.findall(r'id="plot-reliability-bin-\d+"', svg)), len(re.findall(r'id="plot-reliability-point-\d+"',
                                                                                   svg))


def _table_rows(page: str, cls: str) -> int:
    match = re.search(rf'<table class="{cls}">(.*?)</table>', page, re.DOTALL)
    assert match, f"no {cls} table"
    return match.group(1).count("<tr>")


def test_checklist_report_reliability_plot_and_metrics() -> None:
    # P(pass) .05 .15 .35 .55 .75 .95 against humans 0 0 1 0 1 1: six bins of ten, one judgment each.
    # Brier (.0025 + .0225 + .4225 + .3025 + .0625 + .0025) / 6 = .136; ECE (.05+.15+.65+.55+.25+.05) / 6 = .283;
    # AUROC 8/9 = .889; accuracy (p > .5: 0 0 0 1 1 1) 4/6 = .667; kappa (4/6 - 1/2) / (1/2) = .333.
    records = [_check_record("a", [(0.05, 0.0), (0.15, 0.0), (0.35, 1.0)]),
               _check_record("b", [(0.55, 0.0), (0.75, 1.0), (0.95, 1.0), (0.5, None)])]
    audit = checklist_audit(records)
    assert len(audit["calibration"]["reliability"]) == 6
    page = render_mode_report(audit, title="Checklist audit", mode="checklist")
    assert page.startswith("<!DOCTYPE html>") and "default-src 'none'" in page
    assert _bins(page) == (6, 6)
    assert 'id="plot-reliability-diagonal"' in _figure(page, "plot-reliability")
    assert _table_rows(page, "reliability") == 6 + 1  # the header row and one row per bin
    for number in ("0.136", "0.283", "0.889", "0.667", "0.333"):
        assert f'<td class="num">{number}</td>' in page, number
    assert "Cohen&#x27;s kappa" in page and "Brier score" in page and "AUROC" in page
    assert "[0.30, 0.40)" in page and "+0.650" in page  # the bin of .35 (human 1): observed above predicted
    assert "<script" not in page.lower()


def test_checklist_report_with_pairwise_conflicts_and_no_labels() -> None:
    records = [_check_record("a", [(0.9, None)]), _check_record("b", [(0.2, None)])]
    pairs = [{"item_id": "q", "first_id": "a", "second_id": "b", "unscored": None,
              "verdicts": {"two_pass": "second", "likelihood": "first"}}]
    audit = checklist_audit(records, pairs)
    page = render_mode_report(audit, title="t", mode="checklist")
    assert _bins(page) == (0, 0) and "No reliability bins (no judgments with human labels)" in page
    # satisfaction a .9 > b .2: the two-pass verdict "second" is a conflict, the likelihood verdict "first" is not
    assert re.search(r'<td>two_pass</td><td class="num">1\.000</td><td class="num"></td><td class="num">1 / 1</td>',
                     page)
    assert re.search(r'<tr class="tj"><td>likelihood</td><td class="num">0\.000</td>', page)


def test_claims_report_with_sensitivity(tmp_path: Path) -> None:
    def claim(p: float, label: str, human: str) -> dict[str, Any]:
        return {"text": "c", "p_supported": p, "probabilities": {label: 0.9, "OTHER": 0.1}, "unscored": None,
                "human": human}

    # Four bins (.9, .3, .6, .2); Brier .275, accuracy .5, AUROC .5, label accuracy .75 (test_claims).
    records: list[dict[str, Any]] = [
               {"item_id": "q", "response_id": "a", "unscored": None,
                "claims": [claim(.9, "SUPPORTED", "SUPPORTED"), claim(.3, "UNSUPPORTED", "UNSUPPORTED")]},
               {"item_id": "q", "response_id": "b", "unscored": None,
                "claims": [claim(.6, "PARTIAL", "PARTIAL"), claim(.2, "UNSUPPORTED", "SUPPORTED")]},
               {"item_id": "q", "response_id": SCRIPT, "unscored": SCRIPT, "claims": []}]
    audit = claims_audit(records)

    def labels(req: LabelRequest) -> list[float]:  # supported only when passage "A." comes first, and negations
        first = req.prompt.split('<evidence n="1">\n', 1)[1].split("\n", 1)[0]
        supported = first == "A." or "It is not true that" in req.prompt
        return [(1.0 if supported else 0.0) if lab.startswith("SUPPORTED") else (0.0 if supported else 1.0)
                if lab.startswith("UNSUPPORTED") else 0.0 for lab in req.labels]

    judge = Judge(MockBackend("order", labels), store=tmp_path / "s.sqlite")
    items = items_from_dicts([{"id": "q", "question": "Q?", "evidence": ["A.", "B."],
                               "responses": [{"id": "a", "text": "x", "claims": ["The sky is blue."]}]}])
    audit["sensitivity"] = claims_sensitivity(judge.run, items, judge.claims_task())
    judge.close()
    page = render_mode_report(audit, title="Claims", mode="claims", details={"judge": SCRIPT})
    assert _bins(page) == (4, 4)
    cal = audit["supported_calibration"]
    for number in ("0.275", "0.500", "0.750", f"{cal['ece']:.3f}", f"{audit['label_agreement']['kappa']:.3f}"):
        assert f'<td class="num">{number}</td>' in page, number
    assert "label accuracy" in page and "label kappa" in page
    # evidence order: the claim moves from 1 to 0 (shift 1.0); its negation is supported too (1 of 1)
    assert re.search(r"<td>evidence order reversed</td><td>mean \|shift\| of P\(supported\)</td>"
                     r'<td class="num">1\.000</td><td class="num">1</td>', page)
    assert re.search(r'<td>negation</td><td>claims supported with their negation</td><td class="num">1</td>', page)
    assert f"<td>{ESCAPED}</td>" in page and f"<dd>{ESCAPED}</dd>" in page  # unscored reason and details
    assert "<script" not in page.lower()


def test_criteria_report_tables_and_escaping(tmp_path: Path) -> None:
    def score(rid: str, values: dict[str, float], aggregate: float) -> dict[str, Any]:
        return {"item_id": SCRIPT, "response_id": rid, "unscored": None, "human_score": aggregate,
                "aggregate": dict.fromkeys(METHODS, aggregate),
                "criteria": [{"name": n, "points": 5, "scores": dict.fromkeys(METHODS, v), "human": v,
                              "unscored": None} for n, v in values.items()]}

    def pair(first: str, second: str, verdicts: dict[str, str], overall: str) -> dict[str, Any]:
        return {"item_id": SCRIPT, "first_id": first, "second_id": second, "unscored": None, "verdict": overall,
                "criteria": [{"name": n, "verdict": v, "unscored": None} for n, v in verdicts.items()]}

    # As test_modes' by-hand case: "acc" CR 1/3 and NTR_3 1/1; x wins (x, y) on every criterion yet loses the
    # pointwise aggregate (2.0 < 2.5): 1 of 1 sweeps.
    scores = [score("x", {"acc": 3, SCRIPT: 1}, 2.0), score("y", {"acc": 2, SCRIPT: 3}, 2.5),
              score("z", {"acc": 1, SCRIPT: 2}, 1.5)]
    pairs = [pair("x", "y", {"acc": "first", SCRIPT: "first"}, "first"),
             pair("y", "z", {"acc": "first", SCRIPT: "second"}, "first"),
             pair("x", "z", {"acc": "second", SCRIPT: "tie"}, "second")]
    audit = criteria_audit(scores, pairs, ks=(3,))

    def script(req: LabelRequest) -> list[float]:  # 5 with the knowledge block, 3 without
        want = "5" if "<knowledge>" in req.prompt else "3"
        return [1.0 if lab == want + "]" else 0.0 for lab in req.labels]

    judge = Judge(MockBackend("g", script), store=tmp_path / "s.sqlite", scale=5)
    items = items_from_dicts([{"id": "a", "question": "Q?", "knowledge": "K.",
                               "responses": [{"id": "1", "text": "x", "human_score": 1},
                                             {"id": "2", "text": "y", "human_score": 2}]}])
    audit["grounding"] = grounding_audit(judge.run, items, judge.score_task(), method="discrete")
    judge.close()
    page = render_mode_report(audit, title=SCRIPT, mode="criteria")
    assert "<script" not in page.lower()
    assert f"<h1>{ESCAPED}</h1>" in page and f"<title>{ESCAPED} · criteria audit</title>" in page
    assert f"<th colspan=\"8\">criterion {ESCAPED}</th>" in page and f"<td>{ESCAPED}</td>" in page
    _figure(page, "plot-agreement")
    assert 'id="plot-reliability"' not in page
    # per criterion and method: agreement rows (2 criteria x 4 methods, + the aggregate's 4), CR rows, NTR rows
    assert page.count('<tr class="tj"><td>trustjudge</td>') == 2 + 1 + 2
    assert re.search(r'<tr class="tj"><td>trustjudge</td><td class="num">0\.333</td><td class="num"></td>'
                     r'<td class="num">1 / 3</td>', page)  # acc's CR
    assert re.search(r'<td>NTR_3</td><td class="num">1\.000</td><td class="num"></td><td class="num">1 / 1</td>'
                     r'<td class="num">1</td>', page)  # acc: one circular triple
    assert re.search(r'<td>won on every criterion</td><td class="num">1</td>', page)
    assert re.search(r'<td>lost the pointwise aggregate</td><td class="num">1</td><td class="num">1\.000</td>', page)
    assert re.search(r'<td>mean shift \(with − without grounding\)</td><td class="num">2\.000</td>', page)


def test_unknown_mode_and_empty_audit() -> None:
    with pytest.raises(ValueError, match="mode"):
        render_mode_report({}, title="t", mode="score")
    page = render_mode_report({"future": {"x": SCRIPT}}, title="t", mode="claims")
    assert _bins(page) == (0, 0) and "Other fields" in page and ESCAPED in page and "<script" not in page.lower()


def test_cli_checklist_report(tmp_path: Path) -> None:
    audit, report = tmp_path / "A.json", tmp_path / "R.html"
    done = subprocess.run([sys.executable, "-m", "trustjudge.cli", "checklist", "examples/checklist.jsonl",
                           "--suite", "examples/suite.json", "-j", "mock/hash", "--store", str(tmp_path / "s.sqlite"),
                           "--out", str(tmp_path / "out.jsonl"), "--audit", str(audit), "--report", str(report)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert audit.exists() and report.exists()
    page = report.read_text(encoding="utf-8")
    assert "<svg" in page and 'id="plot-reliability"' in page and "mock/hash" in page
    import json

    bins = json.loads(audit.read_text())["calibration"]["reliability"]
    assert _bins(page) == (len(bins), len(bins))
