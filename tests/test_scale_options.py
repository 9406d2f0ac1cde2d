"""Scales wherever they are given take what ``score --scale`` takes (a top value, or an integer range such as
``0-5``): a suite file's ``scale``, ``store show --scale`` / ``--criteria-scale`` and ``rank --scale``; the
help shows such options as ``N|LO-HI``; and ``cli/_options`` keeps no unused name."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import trustjudge
from tests.conftest import write_jsonl
from trustjudge.cli import cli
from trustjudge.errors import InputError
from trustjudge.io._files import load_suite

SRC = Path(trustjudge.__file__).resolve().parent
ITEM = {"id": "q", "question": "What is 2 + 2?",
        "responses": [{"id": "a", "text": "4", "system": "s1"}, {"id": "b", "text": "5", "system": "s2"}]}
CRITERION = {"name": "accuracy", "description": "Is it right?"}


def _cli(*args: Any) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args])


def _rows(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_the_options_module_keeps_no_unused_name() -> None:
    path = SRC / "cli" / "_options.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    texts = {p: p.read_text(encoding="utf-8") for p in SRC.rglob("*.py")}
    unused = []
    for name in names:
        word = re.compile(rf"\b{re.escape(name)}\b")
        uses = sum(len(word.findall(text)) for p, text in texts.items() if p != path)
        if uses == 0 and len(word.findall(texts[path])) <= 1 and name != "__all__":
            unused.append(name)
    assert unused == []


@pytest.mark.parametrize(("given", "read"), [(7, 7), ("10", 10), ("0-5", "0-5"), (" 0..3 ", "0..3"), (4.0, 4)])
def test_a_suite_scale_takes_what_the_command_line_takes(tmp_path: Path, given: Any, read: Any) -> None:
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"criteria": [CRITERION], "scale": given}))
    assert load_suite(path).scale == read


@pytest.mark.parametrize(("given", "message"), [
    ("5-2", "needs two or more levels"), (1, "needs two or more levels"), ("abc", "must be a top value"),
    (True, "must be a top value"), (2.5, "must be a top value"), ([5], "must be a top value")])
def test_a_bad_suite_scale_names_the_file_and_the_field(tmp_path: Path, given: Any, message: str) -> None:
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"criteria": [CRITERION], "scale": given}))
    with pytest.raises(InputError, match=message) as caught:
        load_suite(path)
    assert caught.value.file == str(path) and caught.value.field == "scale"


def test_a_suite_range_judges_as_the_same_range_on_the_command_line(tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", [ITEM])
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"criteria": [CRITERION], "scale": "0-3"}))
    store = tmp_path / "s.sqlite"
    from_suite = _cli("criteria", items, "--suite", suite, "-j", "mock/hash", "--store", store)
    assert from_suite.exit_code == 0, from_suite.output
    rows = _rows(from_suite.stdout)
    assert [(c["points"], c.get("scale_min")) for r in rows for c in r["criteria"]] == [(3, 0), (3, 0)]
    flagged = _cli("criteria", items, "--suite", suite, "--scale", "0-3", "-j", "mock/hash", "--store", store)
    assert flagged.exit_code == 0 and "model calls 0" in " ".join(flagged.output.split())  # the same judgments
    assert _rows(flagged.stdout) == rows


def test_store_show_and_rank_take_any_scale_range(tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", [ITEM])
    store = tmp_path / "s.sqlite"
    judged = _cli("score", items, "-j", "mock/hash", "--store", store, "--scale", "0-5", "-q")
    assert judged.exit_code == 0, judged.output
    shown = _cli("store", "show", items, "q", "-j", "mock/hash", "--store", store, "--scale", "0-5", "--kind",
                 "score", "--json")
    assert shown.exit_code == 0, shown.output
    entries = _rows(shown.stdout)
    assert len(entries) == 2 and all(e["outputs"] and e["outputs"][0].get("stored", True) for e in entries)
    assert entries[0]["outputs"][0]["request"]["labels"][0] == "0]"  # the 0-5 prompt, as stored
    other = _cli("store", "show", items, "q", "-j", "mock/hash", "--store", store, "--scale", "5", "--kind", "score")
    assert other.exit_code == 0 and other.stdout.count("not in the store") == 2  # 1-5 was never judged

    out = tmp_path / "rank.jsonl"
    ranked = _cli("rank", items, "-j", "mock/hash", "--store", store, "--scale", "0-5", "--bootstrap", "0",
                  "--out", out, "-q")
    assert ranked.exit_code == 0, ranked.output
    scores = [r for r in _rows(out.read_text(encoding="utf-8")) if "scores" in r]
    assert [(r["scale"], r["scale_min"]) for r in scores] == [(5, 0), (5, 0)]
    for command in (["rank", items], ["store", "show", items, "q"]):
        bad = _cli(*command, "-j", "mock/hash", "--store", store, "--scale", "5-2")
        assert bad.exit_code == 2 and "Invalid value for '--scale'" in bad.output
    crit = _cli("store", "show", items, "q", "-j", "mock/hash", "--store", store, "--criteria-scale", "0-3")
    assert crit.exit_code == 0, crit.output


@pytest.mark.parametrize("command", [["criteria"], ["score"], ["rank"], ["store", "show"]])
def test_scale_options_read_as_a_top_value_or_a_range_in_the_help(command: list[str]) -> None:
    text = _cli(*command, "--help").output
    assert re.search(r"--scale N\|LO-HI\s", text), text
    assert not re.search(r"--scale (TEXT|\[)", text)
