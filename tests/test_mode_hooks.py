"""A mode's audit and report as plug-in hooks (issue 22): ``Task.audit`` gives data, ``report_sections`` gives
sections as plain data that ``report/`` draws, and a third party's mode with them gets ``--audit`` / ``--report``
on its command with no other file touched; the built-in modes go through the same hooks."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from tests.conftest import write_jsonl
from tests.test_mode_contract import ITEM, VerdictRecord, VerdictTask
from trustjudge import Judge, Mode, get_mode, items_from_dicts, register_mode, unregister_mode
from trustjudge.cli import cli
from trustjudge.modes._base import AuditContext, Task
from trustjudge.modes._registry import option
from trustjudge.modes._sections import Bars, Note, Section, Series, Table
from trustjudge.report._modes import render_mode_report

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class GradedTask(VerdictTask):
    """The contract test's verdict task, with an audit and a report of its own (as a plug-in would write)."""

    kind: ClassVar[str] = "graded"
    audit_options: ClassVar[Mapping[str, str]] = {"rescore": "With --audit: also score every response."}

    def audit(self, records: Sequence[Mapping[str, Any]], context: AuditContext) -> dict[str, Any] | None:
        judged = [r for r in records if r["unscored"] is None]
        out: dict[str, Any] = {"responses": len(records), "verdicts": dict(Counter(r["verdict"] for r in judged)),
                               "mean_p_first": sum(r["probabilities"][self.labels[0]] for r in judged) / len(judged)}
        if "rescore" in context.asked:
            scores = [r.to_dict() for r in context.run(context.task_of("score"), context.items())]
            out["scored"] = len(scores)
        return out

    @classmethod
    def report_sections(cls, audit: Mapping[str, Any]) -> list[Section]:
        verdicts = sorted(audit["verdicts"].items())
        return [Section("verdicts", "Verdicts <per> response", (
            Note("How often each verdict was the most probable."),
            Table.of([("verdict", False), ("responses", True)], verdicts, name="verdicts"),
            Bars("plot-verdicts", "Verdicts", "One bar per verdict.", "Verdict counts",
                 tuple(v for v, _ in verdicts), (Series("responses", tuple(float(n) for _, n in verdicts)),)))),
            Section("spread", "Mean probability", (Table.of([("measure", False), ("value", True)],
                                                            [("mean P(first label)", audit["mean_p_first"])]),),
                    nav="Spread")]

    @classmethod
    def report_facts(cls, audit: Mapping[str, Any]) -> list[tuple[str, str]]:
        return [("responses", str(audit["responses"]))]


@dataclass(frozen=True)
class GradedOptions:
    labels: tuple[str, ...] = option(("CORRECT", "WRONG"), "The verdicts a response may get.", cli=False)


class PlainTask(VerdictTask):
    """An audit without report hooks: the report shows its fields in one table."""

    def audit(self, records: Sequence[Mapping[str, Any]], context: AuditContext) -> dict[str, Any] | None:
        return {"responses": len(records)}


GRADED = Mode("graded", GradedTask, VerdictRecord, GradedOptions, lambda s, o: GradedTask(o.labels, s.protocol),
              summary="A verdict per response, audited.", command="graded")
PLAIN = Mode("plain", PlainTask, VerdictRecord, GradedOptions, lambda s, o: PlainTask(o.labels, s.protocol),
             command="plain")


@pytest.fixture
def graded() -> Iterator[Mode]:
    register_mode(GRADED)
    register_mode(PLAIN)
    try:
        yield GRADED
    finally:
        unregister_mode("graded")
        unregister_mode("plain")


def _cli(*args: str | Path) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args])


def _calls(monkeypatch: pytest.MonkeyPatch) -> list[Judge]:
    """Every judge the CLI builds (their model calls add up to the run's)."""
    from trustjudge import cli as cli_module

    judges: list[Judge] = []
    real = cli_module._make_judge

    def keep(*args: Any, **kwargs: Any) -> Judge:
        judges.append(real(*args, **kwargs))
        return judges[-1]

    monkeypatch.setattr(cli_module, "_make_judge", keep)
    return judges


def test_the_registry_says_which_modes_audit() -> None:
    assert {name for name in ("score", "compare", "criteria", "criteria-compare", "checklist", "claims")
            if get_mode(name).audits} == {"criteria", "criteria-compare", "checklist", "claims"}
    assert not Task.audit(GradedTask(), [], AuditContext(list, lambda t, i: [], lambda n: GradedTask()))
    with pytest.raises(ValueError, match="mode 'score' has no audit"):
        render_mode_report({}, title="t", mode="score")


def test_a_plugin_mode_gets_its_audit_and_report_with_no_other_file_touched(
        graded: Mode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = " ".join(_cli("graded", "--help").output.split())
    assert "--audit FILE" in text and "--report FILE" in text and "--rescore With --audit: also score" in text
    items = write_jsonl(tmp_path / "items.jsonl", [ITEM])
    store, out, audit, report = (tmp_path / n for n in ("s.sqlite", "out.jsonl", "audit.json", "report.html"))
    refused = _cli("graded", items, "-j", "mock/hash", "--store", store, "--rescore")
    assert refused.exit_code == 2 and "--rescore needs --audit or --report" in refused.output
    assert not store.exists()

    args = ["graded", items, "-j", "mock/hash", "--store", store, "--out", out, "--audit", audit, "--report", report,
            "--rescore"]
    judges = _calls(monkeypatch)
    first = _cli(*args)
    assert first.exit_code == 0, first.output
    assert sum(j.stats.model_calls for j in judges) == 3 + 3  # three verdicts, then the audit's three scores
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    # by hand from the records: each response's verdict, and the mean of P(CORRECT)
    wins = Counter(max(r["probabilities"], key=r["probabilities"].get) for r in rows)
    mean = sum(r["probabilities"]["CORRECT"] for r in rows) / 3
    got = json.loads(audit.read_text(encoding="utf-8"))
    assert got["responses"] == 3 and got["verdicts"] == dict(wins) and got["scored"] == 3
    assert math.isclose(got["mean_p_first"], mean, rel_tol=1e-12)

    page = report.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page.lower()
    assert '<section id="verdicts"><h2>Verdicts &lt;per&gt; response</h2>' in page
    assert '<a href="#verdicts">Verdicts</a><a href="#spread">Spread</a>' in page
    assert "<dt>mode</dt><dd>graded</dd>" in page and "<dt>responses</dt><dd>3</dd>" in page
    for verdict, n in wins.items():
        assert f'<tr><td>{verdict}</td><td class="num">{n}</td></tr>' in page
    assert f'<td>mean P(first label)</td><td class="num">{mean:.3f}</td>' in page
    svg = re.search(r'<figure class="plot" id="plot-verdicts">\s*<svg .*?</svg>', page, re.DOTALL)
    assert svg and "One bar per verdict." in page

    judges.clear()
    again = _cli(*args)
    assert again.exit_code == 0, again.output
    assert sum(j.stats.model_calls for j in judges) == 0  # records and the audit's scores: all from the store
    assert json.loads(audit.read_text(encoding="utf-8")) == got


def test_an_audit_without_report_hooks_shows_its_fields(graded: Mode, tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", [ITEM])
    report = tmp_path / "r.html"
    done = _cli("plain", items, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "--report", report, "-q")
    assert done.exit_code == 0, done.output
    page = report.read_text(encoding="utf-8")
    assert '<section id="audit"><h2>Audit</h2>' in page and '<tr><td>responses</td><td>3</td></tr>' in page
    assert "--rescore" not in _cli("plain", "--help").output


def test_a_builtin_audit_through_the_hook_matches_the_audit_function(tmp_path: Path) -> None:
    from trustjudge.io._files import load_suite
    from trustjudge.modes._audits import checklist_audit

    items = items_from_dicts(json.loads(line) for line in (ROOT / "examples/checklist.jsonl").read_text().splitlines())
    with Judge("mock/hash", store=tmp_path / "s.sqlite") as j:
        task = j.checklist_task(load_suite(ROOT / "examples/suite.json").checklist)
        records = [r.to_dict() for r in j.run(task, items)]
        pairs = [r.to_dict() for r in j.compare([it for it in items if len(it.responses) >= 2])]
        context = AuditContext(lambda: list(items), j.run, j.task)
        assert task.audit(records, context) == checklist_audit(records, pairs)
        calls = j.stats.model_calls
        # a records-only context (what a recipe's "mode" audit uses) judges nothing more
        assert task.audit(records, AuditContext.records_only(j.task)) == checklist_audit(records)
        assert j.stats.model_calls == calls
    sections = type(task).report_sections(checklist_audit(records, pairs))
    assert [s.id for s in sections][:2] == ["calibration", "consistency"]


@pytest.mark.model
def test_checklist_audit_and_report_through_the_hook_on_the_bundled_judge(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real SmolLM2 judge (llama.cpp): ``checklist --audit --report`` runs the mode's audit hook, its numbers
    are the records' (checked by hand), the page draws its sections, and a rerun makes zero model calls."""
    items = write_jsonl(tmp_path / "items.jsonl", [{
        "id": "boil", "question": "At what temperature does water boil at sea level?",
        "checklist": [{"id": "temp", "text": "Does the response say 100 degrees Celsius?"},
                      {"id": "unit", "text": "Does the response name a unit?"}],
        "responses": [{"id": "good", "text": "Water boils at 100 degrees Celsius.",
                       "human_checks": {"temp": True, "unit": True}},
                      {"id": "bad", "text": "It boils at 50.", "human_checks": {"temp": False, "unit": False}}]}])
    store, out, audit, report = (tmp_path / n for n in ("s.sqlite", "out.jsonl", "audit.json", "r.html"))
    args = ["checklist", items, "-j", "llamacpp/smollm2-135m", "--store", store, "--out", out, "--audit", audit,
            "--report", report, "-q"]
    judges = _calls(monkeypatch)
    first = _cli(*args)
    assert first.exit_code == 0, first.output
    assert sum(j.stats.model_calls for j in judges) == 4 + 2  # four checks, then one pair in both orders
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    checks = [(c["p_pass"], c["human"]) for r in rows for c in r["checks"]]
    assert len(checks) == 4 and all(0.0 <= p <= 1.0 for p, _ in checks)
    brier = sum((p - (1.0 if h == 1.0 else 0.0)) ** 2 for p, h in checks) / 4
    got = json.loads(audit.read_text(encoding="utf-8"))
    assert got["responses"] == 2 and got["checks_with_human_labels"] == 4
    assert math.isclose(got["calibration"]["brier"], brier, rel_tol=1e-9)
    assert set(got["conflict_ratio_vs_pairwise"]) == {"two_pass", "likelihood"}
    page = report.read_text(encoding="utf-8")
    assert '<section id="calibration"><h2>Calibration of P(pass)</h2>' in page and 'id="plot-reliability"' in page
    assert f'<td>Brier score</td><td class="num">{brier:.3f}</td>' in page
    judges.clear()
    again = _cli(*args)
    assert again.exit_code == 0, again.output
    assert sum(j.stats.model_calls for j in judges) == 0
    assert json.loads(audit.read_text(encoding="utf-8")) == got
