"""The CLI builds one command per mode from the registry (issue 22): a third party's mode, registered or
installed, gets its command with no CLI edit, its options read from its options dataclass; and the built-in
commands refuse the options they would ignore."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from click.testing import CliRunner

import trustjudge.modes._registry as modes_module
from tests.conftest import write_jsonl
from tests.test_mode_contract import ITEM, VerdictRecord, VerdictTask, _plugin
from trustjudge import Judge, Mode, items_from_dicts, register_mode, unregister_mode
from trustjudge.cli import cli
from trustjudge.errors import ConfigError

option = modes_module.option


def _labels(text: str) -> tuple[str, ...]:
    labels = tuple(x.strip() for x in text.split(",") if x.strip())
    if len(labels) < 2:
        raise ConfigError(f"give two labels or more, got {text!r}")
    return labels


@dataclass(frozen=True)
class VerdictOptions:
    labels: tuple[str, ...] = option(("CORRECT", "WRONG"), "The verdicts a response may get.", parse=_labels,
                                     shown="CORRECT,WRONG")
    upper: bool = option(False, "Ask for the labels in upper case.")
    tries: int = option(1, "How many tries (a number the task checks).", ge=1, le=3)
    margin: float | None = option(None, "A margin, if any.", ge=0.0)
    style: Literal["short", "long"] = option("short", "How the verdict is worded.")
    protocol: Literal["direct", "cot"] | None = option(None, "Protocol; default: the judge's.")


def _build(settings: Any, o: VerdictOptions) -> VerdictTask:
    labels = tuple(x.upper() for x in o.labels) if o.upper else o.labels
    return VerdictTask(labels, o.protocol or settings.protocol)


VERDICT = Mode("verdict", VerdictTask, VerdictRecord, VerdictOptions, _build, min_responses=1,
               summary="A categorical verdict per response.", command="verdict")


@pytest.fixture
def verdict() -> Iterator[Mode]:
    register_mode(VERDICT)
    try:
        yield VERDICT
    finally:
        unregister_mode("verdict")


def _cli(*args: str | Path) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_a_registered_mode_gets_its_command_with_its_options(verdict: Mode) -> None:
    assert "verdict" in cli.list_commands(None)  # type: ignore[arg-type]
    result = _cli("verdict", "--help")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "A categorical verdict per response." in text
    for flag, help_text in [("--labels TEXT", "The verdicts a response may get. [default: CORRECT,WRONG]"),
                            ("--upper", "Ask for the labels in upper case."),
                            ("--tries INTEGER RANGE",
                             "How many tries (a number the task checks). [default: 1; 1<=x<=3]"),
                            ("--margin FLOAT RANGE", "A margin, if any."),
                            ("--style [short|long]", "How the verdict is worded. [default: short]")]:
        assert f"{flag} {help_text}" in text, flag
    # the shared options of every judging command; --protocol is the judge's, filling the mode's field
    for flag in ("--judge", "--protocol", "--store", "--out", "--dry-run", "--format", "--skip-invalid"):
        assert flag in text
    assert "--max-pairs" not in text and "--suite" not in text and "--audit" not in text  # none applies
    assert "--template" not in text and "--calibration" not in text


def test_a_registered_mode_command_writes_its_records_and_reruns_from_the_store(verdict: Mode,
                                                                                 tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", [ITEM])
    store, out = tmp_path / "s.sqlite", tmp_path / "out.jsonl"
    args = ["verdict", items, "-j", "mock/hash", "--store", store, "--out", out, "--labels", "yes, no", "--upper"]
    result = _cli(*args)
    assert result.exit_code == 0, result.output
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    with Judge("mock/hash", store=tmp_path / "lib.sqlite") as j:
        expected = [r.to_dict() for r in j.run(j.task("verdict", labels=("YES", "NO")), items_from_dicts([ITEM]))]
    assert written == expected and written[0]["labels"] == ["YES", "NO"]
    assert "verdict: 3 records; model calls 3, from store 0" in " ".join(result.output.split())
    again = _cli(*args)
    assert again.exit_code == 0, again.output
    assert "verdict: 3 records; model calls 0, from store 3" in " ".join(again.output.split())
    assert [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] == written
    plan = _cli("verdict", items, "-j", "mock/hash", "--store", store, "--dry-run", "--labels", "yes,no", "--upper")
    assert plan.exit_code == 0 and "Plan: verdict" in plan.output, plan.output


@pytest.mark.parametrize(("args", "message"), [
    (["--labels", "ONE"], "Invalid value for --labels: give two labels or more"),
    (["--tries", "4"], "Invalid value for '--tries'"),
    (["--margin", "nan"], "not a finite number"),
    (["--style", "medium"], "Invalid value for '--style'"),
    (["--template", "items.jsonl"], "--template does not apply to verdict: it renders no prompt template"),
    (["--calibration", "items.jsonl"], "--calibration does not apply to verdict"),
])
def test_a_registered_mode_command_refuses_bad_options_before_any_work(verdict: Mode, tmp_path: Path,
                                                                       args: list[str], message: str) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", [ITEM])
    store = tmp_path / "s.sqlite"
    result = _cli("verdict", items, "-j", "mock/hash", "--store", store,
                  *[str(items) if a == "items.jsonl" else a for a in args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not store.exists()


def test_an_installed_mode_gets_its_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _plugin(tmp_path, monkeypatch, "verdict_plugin:MODE", """
        from tests.test_mode_commands import VERDICT as MODE
    """)
    try:
        assert "verdict_plugin" not in sys.modules
        result = _cli("verdict", "--help")
        assert result.exit_code == 0, result.output
        assert "--upper" in result.output and "verdict_plugin" in sys.modules
        items = write_jsonl(tmp_path / "items.jsonl", [ITEM])
        out = tmp_path / "out.jsonl"
        result = _cli("verdict", items, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "--out", out, "-q")
        assert result.exit_code == 0, result.output
        assert len(out.read_text(encoding="utf-8").splitlines()) == 3
    finally:
        unregister_mode("verdict")


def test_a_broken_installed_mode_names_itself_only_for_its_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _plugin(tmp_path, monkeypatch, "verdict_plugin:MODE", """
        raise RuntimeError("boom")
    """)
    assert "score" in cli.list_commands(None)  # type: ignore[arg-type]  # the others are unaffected
    from trustjudge.cli import main

    monkeypatch.setattr(sys, "argv", ["trustjudge", "verdict", "--help"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    assert "mode plug-in 'verdict' (verdict_plugin:MODE) cannot be loaded: RuntimeError: boom" in \
        " ".join(capsys.readouterr().err.split())
    result = _cli("nothing-of-the-kind")
    assert result.exit_code == 2 and "No such command" in result.output


@dataclass(frozen=True)
class _Clashing:
    out: int = option(1, "A field spelled like a shared option.")


def test_a_mode_option_clashing_with_a_shared_option_is_a_clear_error() -> None:
    mode = Mode("clash", VerdictTask, VerdictRecord, _Clashing, _build, command="clash")
    register_mode(mode)
    try:
        result = _cli("clash", "--help")
        assert isinstance(result.exception, ConfigError)
        assert "two options are --out" in str(result.exception) and "metadata['flag']" in str(result.exception)
        assert _cli("score", "--help").exit_code == 0
    finally:
        unregister_mode("clash")


# -- no option is silently ignored ----------------------------------------------------------------------

SUITE = {"criteria": [{"name": "accuracy", "description": "Is it right?"}]}


@pytest.mark.parametrize(("command", "args", "message"), [
    ("criteria", ["--grounding-audit"], "--grounding-audit needs --audit or --report"),
    ("checklist", ["--grounding-audit"], "--grounding-audit needs --audit or --report"),
    ("claims", ["--sensitivity"], "--sensitivity needs --audit or --report"),
    ("criteria", ["--pairwise", "--scale", "10"], "--scale is the scale of criteria scores"),
    ("criteria", ["--graded"], "--graded needs --pairwise"),
    ("claims", ["--protocol", "cot"], "--protocol does not apply to claims"),
])
def test_an_option_that_would_do_nothing_is_refused(command: str, args: list[str], message: str,
                                                    tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", [ITEM])
    store, out = tmp_path / "s.sqlite", tmp_path / "out.jsonl"
    result = _cli(command, items, "-j", "mock/hash", "--store", store, "--out", out, "-q", *args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not store.exists() and not out.exists()


def test_criteria_pairwise_scale_still_reaches_its_audit(tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", [ITEM])
    audit = tmp_path / "audit.json"
    result = _cli("criteria", items, "--pairwise", "--scale", "10", "--audit", audit, "-j", "mock/hash", "--store",
                  tmp_path / "s.sqlite", "--out", tmp_path / "out.jsonl", "-q")
    assert result.exit_code == 0, result.output
    assert json.loads(audit.read_text(encoding="utf-8"))


@pytest.mark.parametrize("command", [["audit"], ["report", "--html", "r.html"]])
def test_audit_dry_run_plans_the_injected_judgments_too(command: list[str], tmp_path: Path) -> None:
    import re

    items = write_jsonl(tmp_path / "items.jsonl", [ITEM])
    args = [a if a != "r.html" else str(tmp_path / "r.html") for a in command]
    result = _cli(*args, items, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "--scales", "5,100",
                  "--injection", "--dry-run")
    assert result.exit_code == 0, result.output
    titles = re.findall(r"Plan: (.+?) with mock/hash", result.output)
    counts = [int(n) for n in re.findall(r"judgments \(prompts\)\s*\S\s*([\d,]+)", result.output)]
    assert titles == ["score (5-point)", "score (5-point, injected)", "score (100-point)",
                      "score (100-point, injected)", "compare"]
    with Judge("mock/hash", store=tmp_path / "lib.sqlite") as j:
        assert sum(counts) == j.audit_judgments(items_from_dicts([ITEM]), [5, 100], injection=True) == 18


def test_store_show_lists_a_registered_mode_judgments(verdict: Mode, tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", [ITEM])
    store = tmp_path / "s.sqlite"
    ran = _cli("verdict", items, "-j", "mock/hash", "--store", store, "-q", "--out", tmp_path / "o.jsonl")
    assert ran.exit_code == 0, ran.output
    result = _cli("store", "show", items, "tea", "--kind", "verdict", "--json", "-j", "mock/hash", "--store", store)
    assert result.exit_code == 0, result.output
    shown = [json.loads(line) for line in result.output.splitlines()]
    assert [e["judgment"] for e in shown] == ["verdict"] * 3
    assert all(o.get("stored") is not False for e in shown for o in e["outputs"])


@pytest.mark.model
def test_a_registered_mode_command_on_the_bundled_judge(verdict: Mode, tmp_path: Path) -> None:
    """A plug-in mode's command on the real SmolLM2 judge: records with label mass read, the options reaching
    the task, and a rerun that makes zero model calls and writes the same records."""
    items = write_jsonl(tmp_path / "items.jsonl", [ITEM])
    store, out = tmp_path / "s.sqlite", tmp_path / "out.jsonl"
    args = ["verdict", items, "-j", "hf/smollm2-135m", "--store", store, "--out", out, "--labels", "yes,no", "--upper"]
    first = _cli(*args)
    assert first.exit_code == 0, first.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 3 and all(r["labels"] == ["YES", "NO"] for r in rows)
    assert any(r["unscored"] is None and r["verdict"] in ("YES", "NO") for r in rows)
    assert "model calls 0" not in " ".join(first.output.split())
    again = _cli(*args)
    assert again.exit_code == 0, again.output
    assert "verdict: 3 records; model calls 0, from store 3" in " ".join(again.output.split())
    assert [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] == rows
