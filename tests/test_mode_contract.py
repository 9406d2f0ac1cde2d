"""The contract every registered mode keeps (issue 22): a command in the CLI, a route in the service (or a
stated reason why not), records that round-trip through the one serializer, ``store show`` listing its
questions, deterministic ``mock/hash`` runs; and a plug-in mode, registered through the registry or an
entry point, runs through :meth:`Judge.run` like a built-in."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

import trustjudge
import trustjudge._plugins as plugins_module
import trustjudge.modes._registry as modes_module
from tests.conftest import write_jsonl
from trustjudge import MODES, ConfigError, Judge, Mode, get_mode, items_from_dicts, register_mode, unregister_mode
from trustjudge.cli import cli
from trustjudge.engine._asking import Question
from trustjudge.engine._engine import EMPTY_RESPONSE, Outcome
from trustjudge.io._items import Item
from trustjudge.modes._base import Format, Task
from trustjudge.modes._prompts import ANSWER_MARKER, SYSTEM, quote
from trustjudge.modes._records import ResponseHeader
from trustjudge.serve import create_app

# One item every built-in mode can judge with its default options: criteria, a checklist, evidence and given
# claims, three responses (so pairs).
ITEM: dict[str, Any] = {
    "id": "tea", "question": "How do I brew green tea?",
    "evidence": ["Green tea brews best at 70-80 C for one to three minutes."],
    "criteria": [{"name": "accuracy", "description": "Are the temperature and time right?", "weight": 2},
                 {"name": "clarity", "description": "Is it clear?", "levels": ["unclear", "clear enough", "clear"]}],
    "checklist": [{"id": "temp", "text": "Does it give a temperature below boiling?"},
                  {"id": "time", "text": "Does it give a time of at most three minutes?"}],
    "responses": [
        {"id": "a", "system": "s1", "text": "Use 80 C water for two minutes.", "claims": ["Use 80 C water.",
                                                                                          "Steep two minutes."]},
        {"id": "b", "system": "s2", "text": "Boil it hard for ten minutes.", "claims": ["Boil for ten minutes."]},
        {"id": "c", "system": "s3", "text": "Steep at 75 C for one minute.", "claims": ["75 C.", "One minute."]},
    ],
}

BUILTIN = sorted(MODES)


def _items() -> list[Item]:
    return items_from_dicts([ITEM])


def _records(mode: Mode, store: Path) -> list[dict[str, Any]]:
    with Judge("mock/hash", store=store) as j:
        return [r.to_dict() for r in j.run(mode.task_of(j), _items())]


def test_the_built_in_modes_are_registered() -> None:
    # every mode file of the package is a built-in mode (a new one is one file there), the first six always
    files = sorted(p.stem.replace("_", "-") for p in Path(trustjudge.modes.__file__).parent.glob("[!_]*.py"))
    assert files == BUILTIN
    assert {"score", "compare", "criteria", "criteria-compare", "checklist", "claims"} <= set(BUILTIN)
    assert trustjudge.get_mode is get_mode and isinstance(MODES["score"], Mode)
    with pytest.raises(TypeError):
        MODES["x"] = MODES["score"]  # type: ignore[index]  # a read-only view
    with pytest.raises(ConfigError, match="built-in"):
        register_mode(Mode("score", *[getattr(MODES["score"], f.name) for f in fields(Mode)][1:]))
    with pytest.raises(ConfigError, match=r"unknown mode 'nope'.*score"):
        get_mode("nope")


@pytest.mark.parametrize("name", BUILTIN)
def test_mode_options_are_documented_and_build_its_task(name: str, tmp_path: Path) -> None:
    mode = MODES[name]
    assert mode.name == name and mode.task.kind == name
    assert all(mode.option_help().values()), f"{name}: every option has help text"
    for spec in mode.templates.values():
        assert (Path(trustjudge.__file__).parent / "templates" / spec.file).is_file() and spec.fields
    with Judge("mock/hash", store=tmp_path / "s.sqlite") as j:
        assert isinstance(mode.task_of(j), mode.task)
        assert isinstance(j.task(name), mode.task)
        with pytest.raises(ConfigError, match=f"mode {name!r}.*its options"):
            mode.task_of(j, no_such_option=1)


@pytest.mark.parametrize("name", BUILTIN)
def test_mode_has_a_cli_command_that_writes_its_records(name: str, tmp_path: Path) -> None:
    mode = MODES[name]
    assert mode.command, f"{name} has no CLI command"
    command, *flags = mode.command.split()
    assert command in cli.commands  # type: ignore[attr-defined]
    options = {opt for p in cli.commands[command].params for opt in p.opts}  # type: ignore[attr-defined]
    assert set(flags) <= options
    items = write_jsonl(tmp_path / "items.jsonl", [ITEM])
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(cli, [command, *flags, str(items), "-j", "mock/hash", "--store",
                                      str(tmp_path / "cli.sqlite"), "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert written == _records(mode, tmp_path / "lib.sqlite")


@pytest.mark.parametrize("name", BUILTIN)
def test_mode_has_a_service_route_that_returns_its_records(name: str, tmp_path: Path) -> None:
    mode = MODES[name]
    app = create_app("mock/hash", store_path=tmp_path / "srv.sqlite")
    if mode.route is None:
        assert mode.not_served, f"{name}: no route and no reason"
        return
    assert mode.route in {getattr(r, "path", None) for r in app.routes}
    with TestClient(app) as c:
        response = c.post(mode.route, json={"items": [ITEM]})
    assert response.status_code == 200, response.text
    assert response.json()["records"] == _records(mode, tmp_path / "lib.sqlite")


@pytest.mark.parametrize("name", BUILTIN)
def test_mode_records_round_trip_through_the_serializer(name: str, tmp_path: Path) -> None:
    mode = MODES[name]
    with Judge("mock/hash", store=tmp_path / "s.sqlite") as j:
        records = list(j.run(mode.task_of(j), _items()))
    assert records and all(type(r) is mode.record for r in records)
    assert len(records) == sum(mode.task_of(j).count(it) for it in _items())
    for record in records:
        row = record.to_dict()
        again = mode.record.from_dict(json.loads(json.dumps(row)))
        assert again == record
        assert json.dumps(again.to_dict()) == json.dumps(row)


@pytest.mark.parametrize("name", BUILTIN)
def test_store_show_lists_the_mode_questions(name: str, tmp_path: Path) -> None:
    mode = MODES[name]
    store = tmp_path / "s.sqlite"
    items = write_jsonl(tmp_path / "items.jsonl", [ITEM])
    with Judge("mock/hash", store=store) as j:
        list(j.run(mode.task_of(j), _items()))
        asked = mode.task_of(j).questions(_items()[0], j.backend.format_prompt)
    result = CliRunner().invoke(cli, ["store", "show", str(items), "tea", "--kind", name, "--json", "-j", "mock/hash",
                                      "--store", str(store)])
    assert result.exit_code == 0, result.output
    shown = [json.loads(line) for line in result.output.splitlines()]
    assert len(shown) == len(asked) > 0
    assert {entry["judgment"] for entry in shown} == {name}
    assert all(o.get("stored") is not False for entry in shown for o in entry["outputs"])


@pytest.mark.parametrize("name", BUILTIN)
def test_mock_hash_runs_are_deterministic(name: str, tmp_path: Path) -> None:
    mode = MODES[name]
    first, second = _records(mode, tmp_path / "a.sqlite"), _records(mode, tmp_path / "b.sqlite")
    assert json.dumps(first) == json.dumps(second)
    with Judge("mock/hash", store=tmp_path / "a.sqlite") as j:  # a rerun reads every judgment from the store
        assert [r.to_dict() for r in j.run(mode.task_of(j), _items())] == first
        assert j.stats.model_calls == 0


# -- a plug-in mode ---------------------------------------------------------------------------------------


@dataclass
class VerdictRecord(ResponseHeader):
    """A categorical verdict on one response."""

    labels: list[str]
    probabilities: dict[str, float] | None
    verdict: str | None
    unscored: str | None


@dataclass(frozen=True)
class VerdictOptions:
    labels: tuple[str, ...] = modes_module.option(("CORRECT", "WRONG"), "The verdicts a response may get.")


@dataclass(frozen=True)
class VerdictTask(Task):
    """One categorical verdict per response, written outside the package as a plug-in would be."""

    kind: ClassVar[str] = "verdict"
    labels: tuple[str, ...] = ("CORRECT", "WRONG")
    protocol: Any = "direct"

    def size(self, item: Item) -> int:
        return len(item.responses)

    def questions(self, item: Item, fmt: Format) -> list[Question | str]:
        out: list[Question | str] = []
        for r in item.responses:
            if not r.text.strip():
                out.append(EMPTY_RESPONSE)
                continue
            user = (f"Question: {quote(item.question)}\nResponse: {quote(r.text)}\nReply in the form "
                    f'"{ANSWER_MARKER}X]" where X is one of {", ".join(self.labels)}.')
            out.append(Question(fmt(SYSTEM, user, ANSWER_MARKER), tuple(f"{x}" for x in self.labels), ANSWER_MARKER))
        return out

    def records(self, items: Sequence[Item], outcomes: Sequence[Outcome], judge: str) -> Iterator[VerdictRecord]:
        it = iter(outcomes)
        for item in items:
            for r in item.responses:
                out = next(it)
                probs = None if out.probs is None else dict(zip(self.labels, (p / sum(out.probs)
                                                                               for p in out.probs)))
                verdict = max(probs, key=lambda k: probs[k]) if probs else None
                yield VerdictRecord(item.id, r.id, r.system, judge, list(self.labels), probs, verdict, out.unscored)


def _build_verdict(settings: Any, options: VerdictOptions) -> VerdictTask:
    return VerdictTask(options.labels, settings.protocol)


VERDICT = Mode("verdict", VerdictTask, VerdictRecord, VerdictOptions, _build_verdict, min_responses=1,
               summary="A categorical verdict per response.")


@pytest.fixture
def verdict_mode() -> Iterator[Mode]:
    register_mode(VERDICT)
    try:
        yield VERDICT
    finally:
        unregister_mode("verdict")


def test_a_registered_plugin_mode_runs_through_judge_run(verdict_mode: Mode, tmp_path: Path) -> None:
    assert "verdict" in MODES and MODES["verdict"] is verdict_mode
    items = _items() + items_from_dicts([{"id": "e", "question": "Q?", "responses": [{"id": "x", "text": " "}]}])
    with Judge("mock/hash", store=tmp_path / "s.sqlite") as j:
        plan = j.plan(items, "verdict")  # a mode name reaches the plug-in through the registry
        assert plan.judgments == 4 and plan.model_calls == 3
        records = list(j.run(j.task("verdict"), items))
        assert j.stats.model_calls == 3
        again = list(j.run(j.task("verdict", labels=("CORRECT", "WRONG")), items))
    assert again == records and [type(r) for r in records] == [VerdictRecord] * 4
    assert [r.response_id for r in records] == ["a", "b", "c", "x"]
    assert records[-1].unscored == EMPTY_RESPONSE and records[0].verdict in ("CORRECT", "WRONG")
    assert VerdictRecord.from_dict(records[0].to_dict()) == records[0]
    assert list(records[0].to_dict()) == ["item_id", "response_id", "system", "judge", "labels", "probabilities",
                                          "verdict", "unscored"]
    with pytest.raises(ConfigError, match="a mode named 'verdict' is registered already"):
        register_mode(Mode("verdict", VerdictTask, VerdictRecord, VerdictOptions, _build_verdict))
    unregister_mode("verdict")
    with pytest.raises(ConfigError, match="unknown mode 'verdict'"):
        get_mode("verdict")


def _plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, source: str) -> None:
    (tmp_path / "verdict_plugin.py").write_text(textwrap.dedent(source), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "verdict_plugin", raising=False)
    ep = EntryPoint(name="verdict", value=value, group=modes_module.PLUGIN_GROUP)
    monkeypatch.setattr(plugins_module, "entry_points", lambda group: [ep] if group == modes_module.PLUGIN_GROUP
                        else [])


def test_an_entry_point_mode_loads_lazily_and_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _plugin(tmp_path, monkeypatch, "verdict_plugin:MODE", """
        from tests.test_mode_contract import VERDICT as MODE
    """)
    try:
        assert "verdict" in list(MODES) and "verdict_plugin" not in sys.modules  # listed, not imported
        with Judge("mock/hash", store=tmp_path / "s.sqlite") as j:
            records = list(j.run(j.task("verdict"), _items()))
        assert "verdict_plugin" in sys.modules and len(records) == 3
        monkeypatch.setenv(modes_module.PLUGINS_ENV, "other")  # the pinned set leaves it out
        unregister_mode("verdict")
        assert "verdict" not in MODES
    finally:
        unregister_mode("verdict")


def test_a_broken_plugin_mode_names_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _plugin(tmp_path, monkeypatch, "verdict_plugin:MODE", """
        raise RuntimeError("boom")
    """)
    with pytest.raises(ConfigError, match=r"mode plug-in 'verdict' \(verdict_plugin:MODE\) cannot be loaded: "
                                          r"RuntimeError: boom"):
        get_mode("verdict")
    assert "score" in MODES and get_mode("score").name == "score"  # the others are unaffected
    _plugin(tmp_path, monkeypatch, "verdict_plugin:MODE", """
        MODE = 42
    """)
    with pytest.raises(ConfigError, match="gives a int, not a trustjudge Mode"):
        MODES["verdict"]


def test_claims_plan_counts_what_is_known_before_extraction(tmp_path: Path) -> None:
    """Judge.plan no longer refuses claims: it plans the given claims' questions and says what it leaves out."""
    extracted = {**ITEM, "id": "x", "responses": [{"id": "r", "text": "Use 80 C water."}]}
    items = items_from_dicts([ITEM, extracted])
    with Judge("mock/hash", store=tmp_path / "s.sqlite") as j:
        task = j.claims_task()
        plan = j.plan(items, task)
        assert plan.judgments == 5 == plan.model_calls  # 2 + 1 + 2 given claims; the extracted response: none
        ran = [r.to_dict() for r in j.run(task, items)]
        assert j.plan(items, "claims").model_calls == 0  # the given claims' verifications are stored now
        # questions -> records (the Task contract) gives the same records where the claims are given
        asked = [q for it in items for q in task.questions(it, j.backend.format_prompt)]
        known = [r.to_dict() for r in task.records(items, j.asking().labels(asked, "direct"), j.name)]
    assert known[:3] == ran[:3] and ran[3]["source"] == "extracted" and ran[3]["extraction"] is not None
    assert known[3]["unscored"] == "not_extracted" and known[3]["claims"] == []
    written = write_jsonl(tmp_path / "items.jsonl", [ITEM, extracted])
    result = CliRunner().invoke(cli, ["claims", str(written), "-j", "mock/hash", "--store", str(tmp_path / "d.sqlite"),
                                      "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "not counted" in result.output and "claim extractions" in result.output


@pytest.mark.model
def test_every_mode_on_the_bundled_judge_round_trips_and_reruns_free(tmp_path: Path) -> None:
    """The real SmolLM2 judge through every registered mode's Task.run: records of the mode's type with
    label mass read, byte-identical through the serializer, and a rerun from the store with zero calls."""
    store = tmp_path / "s.sqlite"
    first: dict[str, list[dict[str, Any]]] = {}
    with Judge("hf/smollm2-135m", store=store) as j:
        for name in BUILTIN:
            mode = MODES[name]
            records = list(j.run(mode.task_of(j), _items()))
            assert records and all(type(r) is mode.record for r in records)
            assert any(r.to_dict()["unscored"] is None for r in records), name
            first[name] = [r.to_dict() for r in records]
            assert [mode.record.from_dict(row).to_dict() for row in first[name]] == first[name]
        assert j.stats.model_calls > 0
    with Judge("hf/smollm2-135m", store=store) as j:
        for name in BUILTIN:
            assert [r.to_dict() for r in j.run(MODES[name].task_of(j), _items())] == first[name]
        assert j.stats.model_calls == 0
