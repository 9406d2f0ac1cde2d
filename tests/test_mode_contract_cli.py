"""`rank --mode` and `store show` ask the mode (issue 37): a plug-in is ranked by its summary and listed by its
own declaration (``Mode.rank_options``, ``Mode.stored``), with no mode name in the CLI."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tests.conftest import write_jsonl
from trustjudge.cli import cli
from trustjudge.mode_api import Item, Mode, StoredJudgments, get_mode, register_mode, unregister_mode


def _items(tmp_path: Path, n: int = 4) -> Path:
    return write_jsonl(tmp_path / "items.jsonl", [
        {"id": f"q{i}", "question": f"What is {i} + {i}?",
         "responses": [{"id": "a", "system": "good", "text": str(2 * i)},
                       {"id": "b", "system": "bad", "text": f"The sky {i}"}]} for i in range(n)])


def _invoke(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def declared(relevance: None) -> Iterator[Callable[..., Mode]]:
    """Register the fixture's mode again under another name, with more of the contract declared."""
    names: list[str] = []

    def register(name: str, **fields: Any) -> Mode:
        names.append(name)
        return register_mode(dataclasses.replace(get_mode("relevance"), name=name, command=None, route=None,
                                                 **fields))

    yield register
    for name in names:
        unregister_mode(name)


def test_rank_ranks_a_plugin_mode_by_its_summary(relevance: None, tmp_path: Path) -> None:
    result = _invoke("rank", _items(tmp_path), "--mode", "relevance", "-j", "mock/hash",
                     "--store", tmp_path / "s.sqlite", "--json", tmp_path / "rank.json", "--bootstrap", 20)
    assert result.exit_code == 0, result.output
    ranked = json.loads((tmp_path / "rank.json").read_text())
    assert ranked["mode"] == "relevance" and ranked["metric"] == "p_yes"
    assert sorted(s["system"] for s in ranked["systems"]) == ["bad", "good"]
    assert all(s["n"] == 4 for s in ranked["systems"])


def test_rank_refuses_a_mode_with_no_summary(tmp_path: Path) -> None:
    result = _invoke("rank", _items(tmp_path), "--mode", "steps", "-j", "mock/hash", "--store", tmp_path / "s.sqlite")
    assert result.exit_code == 2
    assert "the steps mode has no summary to rank by; the modes with one are score," in result.output
    unknown = _invoke("rank", _items(tmp_path), "--mode", "nosuch", "-j", "mock/hash")
    assert unknown.exit_code == 2 and "unknown mode 'nosuch'" in unknown.output


def test_rank_builds_the_task_with_the_modes_rank_options(declared: Callable[..., Mode], tmp_path: Path) -> None:
    seen: list[tuple[list[str], int | str]] = []

    def rank_options(items: list[Item], scale: int | str) -> dict[str, Any]:
        seen.append(([it.id for it in items], scale))
        return {"protocol": "cot"}

    declared("relevance_ranked", rank_options=rank_options)
    result = _invoke("rank", _items(tmp_path, 2), "--mode", "relevance_ranked", "-j", "mock/hash", "--scale", 7,
                     "--store", tmp_path / "s.sqlite", "--dry-run")
    assert result.exit_code == 0, result.output
    assert seen == [(["q0", "q1"], 7)]
    assert "cot" in result.output  # the plan of the task built with the options it gave


def _by_response(task: Any, item: Item, fmt: Callable[..., Any], asked: bool) -> Iterator[dict[str, Any]]:
    for response, question in zip(item.responses, task.questions(item, fmt)):
        yield {"item_id": item.id, "response_id": response.id, "protocol": task.protocol,
               "question": question}


def test_store_show_lists_a_mode_by_its_declaration(declared: Callable[..., Mode], tmp_path: Path) -> None:
    heading: Callable[[Any], str] = lambda e: f"relevant? {e['item_id']} / response {e['response_id']}"  # noqa: E731
    declared("relevance_shown", stored=StoredJudgments(_by_response, heading, listed=True))
    items, store = _items(tmp_path, 1), tmp_path / "s.sqlite"
    judged = _invoke("relevance", items, "-j", "mock/hash", "--store", store, "--out", tmp_path / "r.jsonl")
    assert judged.exit_code == 0, judged.output
    shown = _invoke("store", "show", items, "q0", "-j", "mock/hash", "--store", store, "--kind", "relevance_shown")
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert [line for line in lines if line.startswith("relevant?")] == ["relevant? q0 / response a",
                                                                        "relevant? q0 / response b"]
    assert "not in the store" not in shown.output  # the same prompts as the relevance run's, so stored
    every = _invoke("store", "show", items, "q0", "-j", "mock/hash", "--store", store, "--json")
    kinds = [json.loads(line)["judgment"] for line in every.output.splitlines()]
    assert kinds == ["score", "score", "compare", "compare", "relevance_shown", "relevance_shown"]


def test_store_show_lists_an_undeclared_mode_by_its_questions(relevance: None, tmp_path: Path) -> None:
    items, store = _items(tmp_path, 1), tmp_path / "s.sqlite"
    assert _invoke("relevance", items, "-j", "mock/hash", "--store", store).exit_code == 0
    shown = _invoke("store", "show", items, "q0", "-j", "mock/hash", "--store", store, "--kind", "relevance")
    assert shown.exit_code == 0, shown.output
    assert [line for line in shown.output.splitlines() if line.startswith("relevance")] == [
        "relevance q0: question 1 (direct)", "relevance q0: question 2 (direct)"]


def test_a_commands_template_options_come_from_the_modes_declared_templates() -> None:
    from trustjudge.cli._options import _kind_templates
    from trustjudge.errors import ConfigError

    assert [(flag, dest) for flag, dest, _ in _kind_templates(("score", "compare"))] == [
        ("--template", "pointwise_template"), ("--pairwise-template", "pairwise_template")]
    assert [(flag, dest) for flag, dest, _ in _kind_templates(("criteria",))] == [  # its judge template, not
        ("--template", "criterion_template")]                                       # generate_criteria
    with pytest.raises(ConfigError, match="no judge template among the modes steps"):
        _kind_templates(("steps",))
