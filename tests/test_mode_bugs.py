"""Bugs the review of the task redesign found (issue 22, first step): each test failed on the code before it.

1. ``audit --dry-run`` / ``report --dry-run`` planned pairwise work under "score (N-point)" titles.
2. ``claims`` took ``--template``, ``--protocol`` and ``--max-new-tokens`` and ignored them (``--template
   STAGE=PATH`` is honoured now: tests/test_claims_protocols.py).
3. Python 3.10: TOML suites (``tomllib``), ``Template.is_valid``/``get_identifiers`` (3.11+).
4. The checklist audit's human pass was "value >= 1", wrong for labels whose top value is not 1.
5. The service's item schema lacked ``claims`` and ``gold_claims``.
"""

from __future__ import annotations

import json
import re
import string
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from trustjudge import Judge, LabelSet, items_from_dicts
from trustjudge.errors import ConfigError
from trustjudge.io._files import load_suite

from .conftest import small_items, write_jsonl


def _cli(*args: str | Path) -> Result:
    from trustjudge.cli import cli

    return CliRunner().invoke(cli, [str(a) for a in args])


# -- 1. the plans of audit and report -------------------------------------------------------------------

def _plans(output: str) -> list[tuple[str, int]]:
    """(title, judgments) of every plan table printed."""
    titles = re.findall(r"Plan: (.+?) with mock/hash", output)
    counts = [int(n) for n in re.findall(r"judgments \(prompts\)\s*\S\s*([\d,]+)", output)]
    assert len(titles) == len(counts), output
    return list(zip(titles, counts))


@pytest.mark.parametrize("command", [["audit"], ["report", "--html", "r.html"]])
def test_audit_and_report_dry_runs_plan_each_scale_pointwise(command: list[str], tmp_path: Path) -> None:
    # small_items: 5 responses (one pointwise judgment each per scale), 3 + 1 pairs (two orders each: 8)
    items = write_jsonl(tmp_path / "items.jsonl", small_items())
    html = tmp_path / "r.html"
    args = [a if a != "r.html" else str(html) for a in command]
    result = _cli(*args, items, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "--scales", "5,100",
                  "--dry-run")
    assert result.exit_code == 0, result.output
    assert _plans(result.output) == [("score (5-point)", 5), ("score (100-point)", 5), ("compare", 8)]
    assert not html.exists()


def test_plan_refuses_a_kind_it_does_not_know(tmp_path: Path) -> None:
    j = Judge("mock/hash", store=tmp_path / "s.sqlite")
    try:
        items = items_from_dicts(small_items())
        assert j.plan(items, "score").judgments == 5 and j.plan(items, "compare").judgments == 8
        with pytest.raises(ConfigError, match="score \\(5-point\\)"):
            j.plan(items, "score (5-point)")
        assert j.plan(items, j.score_task(100)).judgments == 5
    finally:
        j.close()


# -- 2. claims refuses the options it cannot honour -----------------------------------------------------

CLAIMS_ITEM = {"id": "q1", "question": "Where is Paris?", "evidence": ["Paris is in France."],
               "responses": [{"id": "a", "text": "Paris is in France.", "claims": ["Paris is in France."]}]}


@pytest.mark.parametrize(("option", "value", "why"), [
    ("--protocol", "cot", "directly"),
    ("--protocol", "direct", "directly"),
    ("--max-new-tokens", "9", "--extract-tokens"),
])
def test_claims_refuses_the_options_it_would_ignore(option: str, value: str, why: str, tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", [CLAIMS_ITEM])
    store, out = tmp_path / "s.sqlite", tmp_path / "out.jsonl"
    result = _cli("claims", items, "-j", "mock/hash", "--store", store, "--out", out, option, value, "-q")
    assert result.exit_code == 2, result.output
    assert f"{option} does not apply to claims" in result.output and why in result.output
    assert not store.exists() and not out.exists()  # refused before any work
    assert option not in _cli("claims", "--help").output


def test_claims_runs_without_them(tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", [CLAIMS_ITEM])
    out = tmp_path / "out.jsonl"
    result = _cli("claims", items, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "--out", out,
                  "--temperature", "0.5", "-q")
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["source"] == "given" and [c["text"] for c in row["claims"]] == ["Paris is in France."]


# -- 3. Python 3.10 ------------------------------------------------------------------------------------

SUITE_TOML = """
labels = "FULL=1,PARTIAL=0.5,NO=0"

[[checklist]]
id = "capital"
text = "Does it name the capital?"
weight = 2
"""


def test_toml_suite_without_tomllib_reads_with_tomli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python 3.10 has no tomllib: the tomli package (a dependency there) reads the suite the same."""
    pytest.importorskip("tomli")
    path = tmp_path / "suite.toml"
    path.write_text(SUITE_TOML, encoding="utf-8")
    with_tomllib = load_suite(path)
    monkeypatch.setitem(sys.modules, "tomllib", None)  # `import tomllib` raises ImportError, as on 3.10
    with pytest.raises(ImportError):
        import tomllib  # noqa: F401
    suite = load_suite(path)
    assert suite == with_tomllib
    assert [(c.id, c.text, c.weight) for c in suite.checklist] == [("capital", "Does it name the capital?", 2.0)]
    assert suite.labels == "FULL=1,PARTIAL=0.5,NO=0"
    bad = tmp_path / "bad.toml"
    bad.write_text("labels = \n", encoding="utf-8")
    with pytest.raises(Exception, match="invalid TOML") as info:
        load_suite(bad)
    assert str(bad) in str(info.value)


@pytest.mark.parametrize("text", ["plain", "$x and ${y} and $x", "$$ dollars", "cost $5", "a $ b", "${ok} $",
                                  "${bad-name}", "$$x $y"])
def test_template_fields_match_the_311_methods(text: str) -> None:
    from trustjudge.modes._prompts import _identifiers

    template = string.Template(text)
    assert _identifiers(template) == (set(template.get_identifiers()), template.is_valid())


def test_templates_read_without_the_311_template_methods(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Template.is_valid and get_identifiers are Python 3.11+: templates are checked without them."""
    from trustjudge.modes._prompts import CHECK_FIELDS, Prompts, read_template

    monkeypatch.delattr(string.Template, "is_valid")
    monkeypatch.delattr(string.Template, "get_identifiers")
    Prompts.load()  # every packaged template
    mine = tmp_path / "check.txt"
    mine.write_text("costs $5 ${check}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"'\$' that is not a field"):
        read_template(mine, "check.txt", CHECK_FIELDS)
    mine.write_text("${question}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="lacks the field"):
        read_template(mine, "check.txt", CHECK_FIELDS)


def test_mypy_checks_at_the_oldest_supported_python() -> None:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    oldest = pyproject["project"]["requires-python"].removeprefix(">=")
    assert pyproject["tool"]["mypy"]["python_version"] == oldest
    assert "tomli>=2; python_version < '3.11'" in pyproject["project"]["dependencies"]


# -- 4. the checklist audit on labels whose top value is not 1 -----------------------------------------

def _checklist_item() -> dict[str, Any]:
    # one response, four checks; the human labels A, B, C, C: two of four take the top label
    return {"id": "q1", "question": "What is the capital of France?",
            "checklist": ["Is it right?", "Is it short?", "Is it polite?", "Is it in English?"],
            "responses": [{"id": "a", "text": "Paris.", "human_checks": {"1": "A", "2": "B", "3": "C", "4": "C"}}]}


@pytest.mark.parametrize("spec", ["A=0,B=1,C=2", "A=0,B=0.5,C=1", "C,B,A"])
def test_checklist_audit_passes_on_the_top_label(spec: str, tmp_path: Path) -> None:
    from trustjudge.modes._audits import checklist_audit

    labels = LabelSet.parse(spec)
    j = Judge("mock/hash", store=tmp_path / "s.sqlite")
    try:
        records = [r.to_dict() for r in j.checklist(items_from_dicts([_checklist_item()]), labels=labels)]
    finally:
        j.close()
    report = checklist_audit(records, labels=labels)
    cal = report["calibration"]
    assert report["checks_with_human_labels"] == 4 and cal["base_rate"] == 0.5
    ps = [c["p_pass"] for c in records[0]["checks"]]
    assert ps == [c["probabilities"]["C"] for c in records[0]["checks"]]  # C, the top label, passes
    humans = [0, 0, 1, 1]
    assert cal["brier"] == pytest.approx(sum((p - h) ** 2 for p, h in zip(ps, humans)) / 4)
    with pytest.raises(ConfigError, match=r"judged with the labels \['A', 'B', 'C'\]|\['C', 'B', 'A'\]"):
        checklist_audit(records)  # the default YES/NO is not what they were judged with


@pytest.mark.parametrize("spec", ["A=0,B=1,C=2", "A=0,B=0.5,C=1"])
def test_checklist_command_audits_on_the_top_label(spec: str, tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", [_checklist_item()])
    audit = tmp_path / "audit.json"
    result = _cli("checklist", items, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "--labels", spec,
                  "--out", tmp_path / "out.jsonl", "--audit", audit, "-q")
    assert result.exit_code == 0, result.output
    assert json.loads(audit.read_text())["calibration"]["base_rate"] == 0.5


# -- 5. the service's item schema ----------------------------------------------------------------------

def test_service_item_schema_documents_every_item_field() -> None:
    """Every field the loader reads into an item or a response is in the service's item schema."""
    import dataclasses

    pytest.importorskip("fastapi")
    from trustjudge.io._items import Item, Response
    from trustjudge.serve import openapi_json

    schemas = json.loads(openapi_json())["components"]["schemas"]
    assert {f.name for f in dataclasses.fields(Response)} <= set(schemas["ResponseIn"]["properties"])
    assert {f.name for f in dataclasses.fields(Item)} - {"line"} <= set(schemas["ItemIn"]["properties"])
    assert set(schemas["ClaimIn"]["properties"]) == {"text", "human", "source"}


def test_service_claims_takes_given_and_gold_claims(tmp_path: Path) -> None:
    httpx = pytest.importorskip("httpx")
    from trustjudge.serve import create_app

    from .test_server import serving

    rows = [{"id": "q1", "question": "Tell me about Paris.", "evidence": ["Paris is the capital of France."],
             "gold_claims": ["Paris is the capital of France.", "Paris is in Europe."],
             "responses": [{"id": "a", "text": "Paris is the capital.",
                            "claims": [{"text": "Paris is the capital of France.", "human": "supported"},
                                       "Paris has 3 million people."]}]}]
    app = create_app("mock/hash", store_path=tmp_path / "srv.sqlite")
    with serving(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        got = client.post("/v1/claims", json={"items": rows, "match": True})
        bad = client.post("/v1/claims", json={"items": [dict(rows[0], gold_claims="one string")], "match": True})
    assert got.status_code == 200, got.text
    (record,) = got.json()["records"]
    assert record["source"] == "given"
    assert [c["text"] for c in record["claims"]] == ["Paris is the capital of France.", "Paris has 3 million people."]
    assert record["matching"] is not None
    j = Judge("mock/hash", store=tmp_path / "lib.sqlite")
    try:
        assert got.json()["records"] == [r.to_dict() for r in j.claims(items_from_dicts(rows), match=True)]
    finally:
        j.close()
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "gold_claims"
