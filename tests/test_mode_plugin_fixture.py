"""The plug-in as a test fixture (issue 37): tests/fixtures/relevance_plugin, a mode package written only against
``trustjudge.mode_api``, made visible as an installed distribution (its entry point in a ``.dist-info``), goes
through the verbs a built-in mode does, by the contract alone: judged and resumed, summarised, calibrated,
selected with a guarantee, served. No file of trustjudge names it."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

import trustjudge.mode_api as api
from tests.conftest import write_jsonl
from trustjudge.cli import cli
from trustjudge.modes._registry import PLUGIN_GROUP, unregister_mode
from trustjudge.serve import create_app

FIXTURE = Path(__file__).parent / "fixtures" / "relevance_plugin"


@pytest.fixture
def relevance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The fixture package, installed as a distribution on a temporary sys.path entry; forgotten afterwards."""
    site = tmp_path / "site"
    info = site / "tj_relevance-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tj-relevance\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{PLUGIN_GROUP}]\nrelevance = tj_relevance:MODE\n")
    monkeypatch.delenv("TRUSTJUDGE_MODE_PLUGINS", raising=False)
    with monkeypatch.context() as m:
        m.syspath_prepend(str(site))
        m.syspath_prepend(str(FIXTURE / "src"))
        yield
    unregister_mode("relevance")
    sys.modules.pop("tj_relevance", None)
    importlib.invalidate_caches()


def _rows(n: int, prefix: str = "q") -> list[dict[str, object]]:
    """Items whose responses a human labelled relevant (human_score 1) or not (0), alike for both systems."""
    return [{"id": f"{prefix}{i}", "question": f"What is {i} + {i}?",
             "responses": [{"id": "a", "system": "good", "text": str(2 * i), "human_score": 1},
                           {"id": "b", "system": "bad", "text": f"The sky {i}", "human_score": int(i % 3 == 0)}]}
            for i in range(n)]


def _invoke(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_the_fixture_imports_only_the_public_mode_api() -> None:
    source = (FIXTURE / "src" / "tj_relevance" / "__init__.py").read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert [line for line in imports if "trustjudge" in line] == ["from trustjudge.mode_api import ("]


def test_the_mode_api_is_pinned() -> None:
    assert set(api.__all__) == {
        "ANSWER_MARKER", "MODES", "SYSTEM", "Asking", "AuditContext", "Cost", "Item", "JudgeSettings", "LabelUnits",
        "Mode", "Note", "Outcome", "PairHeader", "Question", "RecordBase", "Response", "ResponseHeader", "Section",
        "SummaryMetrics", "Table", "Task", "TemplateSpec", "Unit", "UnitReader", "fields_section", "get_mode",
        "optional", "option", "quote", "register_mode", "unregister_mode",
        "Image", "Pictures", "images_block", "judged_empty", "pictures"}  # images (issue 36)
    assert all(hasattr(api, name) for name in api.__all__)


def test_the_plugin_is_judged_resumed_and_summarised(relevance: None, tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", _rows(6))
    store = tmp_path / "s.sqlite"
    args = ["relevance", items, "-j", "mock/hash", "--store", store]
    first = _invoke(*args, "--out", tmp_path / "a.jsonl", "--summary", tmp_path / "a.json")
    assert first.exit_code == 0, first.output
    assert "model calls 12" in first.output
    again = _invoke(*args, "--out", tmp_path / "b.jsonl")
    assert again.exit_code == 0 and "model calls 0" in again.output, again.output
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    per_system = json.loads((tmp_path / "a.json").read_text())
    assert per_system["mode"] == "relevance" and per_system["metric"] == "p_yes"
    assert sorted(s["system"] for s in per_system["systems"]) == ["bad", "good"]
    assert all(s["n"] == 6 for s in per_system["systems"])
    alone = _invoke("summary", tmp_path / "a.jsonl", "--json", tmp_path / "c.json")
    assert alone.exit_code == 0, alone.output
    assert json.loads((tmp_path / "c.json").read_text())["systems"] == per_system["systems"]


def test_the_plugin_is_calibrated_and_selected_with_a_guarantee(relevance: None, tmp_path: Path) -> None:
    cal_items = write_jsonl(tmp_path / "cal.jsonl", _rows(60))
    new_items = write_jsonl(tmp_path / "new.jsonl", _rows(10, prefix="n"))
    store = tmp_path / "s.sqlite"
    fitted = _invoke("calibrate", cal_items, "--mode", "relevance", "-j", "mock/hash", "--store", store,
                     "--out", tmp_path / "cal.json")
    assert fitted.exit_code == 0, fitted.output
    cal = json.loads((tmp_path / "cal.json").read_text())
    assert cal["mode"] == "relevance" and cal["classes"] == ["YES", "NO"]
    assert len(cal["calibration_set"]["human"]) == 120
    selected = _invoke("select", new_items, "-j", "mock/hash", "--store", store, "--calibration", tmp_path / "cal.json",
                       "--target-agreement", "0.5", "--out", tmp_path / "sel.jsonl", "--summary", tmp_path / "sel.json")
    assert selected.exit_code == 0, selected.output
    rows = [json.loads(line) for line in (tmp_path / "sel.jsonl").read_text().splitlines()]
    assert len(rows) == 20 and all("calibrated" in r for r in rows)


def test_the_plugin_is_served(relevance: None, tmp_path: Path) -> None:
    app = create_app("mock/hash", store_path=tmp_path / "srv.sqlite")
    with TestClient(app) as c:
        response = c.post("/v1/relevance", json={"items": _rows(2)})
    assert response.status_code == 200, response.text
    assert [r["response_id"] for r in response.json()["records"]] == ["a", "b", "a", "b"]


def test_a_mode_without_a_summary_says_so_rather_than_writing_none(tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", [{"id": "q", "question": "2+2?",
                                                    "responses": [{"id": "a", "text": "1. 2+2=4"}]}])
    result = CliRunner().invoke(cli, ["steps", str(items), "-j", "mock/hash", "--store", str(tmp_path / "s.sqlite"),
                                      "--out", str(tmp_path / "o.jsonl"), "--summary", str(tmp_path / "o.json")])
    assert result.exit_code != 0 and "no summary for mode 'steps'" in result.output, result.output
    assert (tmp_path / "o.jsonl").read_text().strip(), "the records judged are kept"


def test_the_plugin_command_applies_its_calibration(relevance: None, tmp_path: Path) -> None:
    cal_items = write_jsonl(tmp_path / "cal.jsonl", _rows(30))
    new_items = write_jsonl(tmp_path / "new.jsonl", _rows(5, prefix="n"))
    store = tmp_path / "s.sqlite"
    fitted = _invoke("calibrate", cal_items, "--mode", "relevance", "-j", "mock/hash", "--store", store,
                     "--out", tmp_path / "cal.json")
    assert fitted.exit_code == 0, fitted.output
    judged = _invoke("relevance", new_items, "-j", "mock/hash", "--store", store, "--calibration",
                     tmp_path / "cal.json", "--target-agreement", "0.5", "--out", tmp_path / "o.jsonl")
    assert judged.exit_code == 0, judged.output
    rows = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert len(rows) == 10 and all("calibrated" in r for r in rows)
