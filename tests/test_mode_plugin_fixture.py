"""The plug-in as a test fixture (issue 37): tests/fixtures/relevance_plugin, a mode package written only against
``trustjudge.mode_api``, made visible as an installed distribution (its entry point in a ``.dist-info``), goes
through the verbs a built-in mode does, by the contract alone: judged and resumed, summarised, calibrated,
selected with a guarantee, served. No file of trustjudge names it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

import trustjudge.mode_api as api
from tests.conftest import RELEVANCE_PLUGIN, run_cli, write_jsonl
from trustjudge import ConfigError, Judge, items_from_dicts
from trustjudge.backends import LabelRequest, MockBackend, register_mock
from trustjudge.cli import cli
from trustjudge.serve import create_app


def _rows(n: int, prefix: str = "q") -> list[dict[str, object]]:
    """Items whose responses a human labelled relevant (human_score 1) or not (0), alike for both systems."""
    return [{"id": f"{prefix}{i}", "question": f"What is {i} + {i}?",
             "responses": [{"id": "a", "system": "good", "text": str(2 * i), "human_score": 1},
                           {"id": "b", "system": "bad", "text": f"The sky {i}", "human_score": int(i % 3 == 0)}]}
            for i in range(n)]


def _invoke(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_the_fixture_imports_only_the_public_mode_api() -> None:
    source = (RELEVANCE_PLUGIN / "src" / "tj_relevance" / "__init__.py").read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert [line for line in imports if "trustjudge" in line] == ["from trustjudge.mode_api import ("]


def test_the_mode_api_is_pinned() -> None:
    assert set(api.__all__) == {
        "ANSWER_MARKER", "MODES", "SYSTEM", "Asking", "AuditContext", "Cost", "Item", "JudgeSettings", "LabelUnits",
        "Mode", "Note", "Outcome", "PairHeader", "Question", "RecordBase", "Response", "ResponseHeader", "Section",
        "SummaryMetrics", "Table", "Task", "TemplateSpec", "Unit", "UnitReader", "fields_section", "get_mode",
        "optional", "option", "quote", "register_mode", "unregister_mode",
        "Image", "Pictures", "images_block", "judged_empty", "pictures",  # images (issue 36)
        "ByPair", "ByPart", "ByResponse", "Cascading",
        "StoredJudgments",  # store show's listing (issue 37)
        "LevelUnits"}  # a calibration over a scale's levels, within a tolerance (issue 37)
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
    cal_items = write_jsonl(tmp_path / "cal.jsonl", _rows(60))
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


def test_the_plugin_ships_its_template_and_a_judge_replaces_it(relevance: None, tmp_path: Path) -> None:
    item = items_from_dicts(_rows(1))[0]

    def prompt(**settings: object) -> str:
        judge = Judge("mock/hash", store=tmp_path / "s.sqlite", **settings)  # type: ignore[arg-type]
        question = judge.task("relevance").questions(item, judge.backend.format_prompt)[0]
        assert isinstance(question, api.Question)
        return str(question.prompt)

    packaged = (RELEVANCE_PLUGIN / "src" / "tj_relevance" / "templates" / "relevance.txt").read_text()
    assert "Does the response address the question?" in packaged
    assert "Does the response address the question?" in prompt()  # from the plug-in's own package
    own = tmp_path / "mine.txt"
    own.write_text("Q: $question\nA: $response\nOn topic? $task\n")
    assert "On topic?" in prompt(templates={"relevance": own})
    assert "On topic?" in prompt(relevance_template=own)  # the NAME_template= keyword, for any mode's template
    with pytest.raises(ConfigError, match=r"mine2.txt lacks the field\(s\) \$\{response\}"):
        bad = tmp_path / "mine2.txt"
        bad.write_text("Q: $question\n$task\n")
        prompt(templates={"relevance": bad})
    with pytest.raises(ConfigError, match=r"unknown template name 'relevence'.*relevance"):
        Judge("mock/hash", store=tmp_path / "s.sqlite", templates={"relevence": own})


def _knowing(salt: str) -> Callable[[LabelRequest], list[float]]:
    """A mock judge that sees off-topic answers ("The sky ...") when it is sure (half of the prompts, by a salted
    hash), and is wrong, unsure, on the others."""
    def script(request: LabelRequest) -> list[float]:
        sure = hashlib.sha256((salt + request.prompt).encode()).digest()[0] % 2 == 1
        relevant = ("The sky" not in request.prompt) == sure
        p_yes = (0.97 if sure else 0.6) if relevant else (0.03 if sure else 0.4)
        return [0.99 * (p_yes if label.startswith("YES") else 1 - p_yes) for label in request.labels]
    return script


def test_the_plugin_cascades_and_is_reported(relevance: None, tmp_path: Path) -> None:
    register_mock("first", MockBackend("first", _knowing("1")))
    register_mock("second", MockBackend("second", _knowing("2")))
    try:
        _cascade_the_plugin(tmp_path)
    finally:
        register_mock("first", None)
        register_mock("second", None)


def _cascade_the_plugin(tmp_path: Path) -> None:
    rows = _rows(200)
    for row in rows:  # labels the judges agree with when they are sure: "The sky" is off topic
        row["responses"][1]["human_score"] = 0  # type: ignore[index]
    cal_items = write_jsonl(tmp_path / "cal.jsonl", rows)
    new_items = write_jsonl(tmp_path / "new.jsonl", _rows(10, prefix="n"))
    store = tmp_path / "s.sqlite"
    for k, judge in enumerate(("mock/first", "mock/second")):
        fitted = _invoke("calibrate", cal_items, "--mode", "relevance", "-j", judge, "--store", store,
                         "--out", tmp_path / f"cal{k}.json")
        assert fitted.exit_code == 0, fitted.output
    args = ["select", new_items, "--store", store, "--cascade", "mock/first,mock/second,human", "--calibration",
            tmp_path / "cal0.json", "--calibration", tmp_path / "cal1.json", "--target-agreement", "0.7",
            "--out", tmp_path / "o.jsonl", "--summary", tmp_path / "s.json", "--abstained-out", tmp_path / "h.jsonl"]
    result = _invoke(*args)
    assert result.exit_code == 0, result.output
    assert "responses" in result.output  # the cascade's table names the mode's unit
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["mode"] == "relevance" and summary["unit"] == "responses" and summary["verdicts"] == 20
    assert [t["judge"] for t in summary["tiers"]] == ["mock/first", "mock/second", "human"]
    assert all(t["decided"] > 0 for t in summary["tiers"]), summary["tiers"]  # every tier has its share
    rows = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert len(rows) == 20 and all(r["tier"] in (1, 2, 3) and r["cascade"] for r in rows)
    assert sum(t["asked"] for t in summary["tiers"][1:2]) == sum(r["tier"] > 1 for r in rows)
    people = {(r["item_id"], r["response_id"]) for r in rows if r["tier"] == 3}
    todo = [json.loads(line) for line in (tmp_path / "h.jsonl").read_text().splitlines()]
    assert {(t["id"], r["id"]) for t in todo for r in t["responses"]} == people
    again = _invoke(*args[:-6], "--out", tmp_path / "o2.jsonl", "--summary", tmp_path / "s2.json",
                    "--abstained-out", tmp_path / "h2.jsonl")
    assert again.exit_code == 0, again.output
    assert [t["model_calls"] for t in json.loads((tmp_path / "s2.json").read_text())["tiers"][:2]] == [0, 0]
    assert (tmp_path / "o2.jsonl").read_text() == (tmp_path / "o.jsonl").read_text()


@pytest.mark.filterwarnings("ignore:The .initial. parameter is deprecated:DeprecationWarning")  # inspect_ai's
def test_the_plugin_scores_an_inspect_eval(relevance: None, tmp_path: Path) -> None:
    pytest.importorskip("inspect_ai")
    from inspect_ai import Task as EvalTask
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.solver import generate

    from trustjudge.inspect_scorer import trustjudge_scorer

    def output(messages: list[object], tools: object, tool_choice: object, config: object) -> ModelOutput:
        out = ModelOutput.from_content(model="mockllm", content="4")
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # no tiktoken download
        return out

    task = EvalTask(dataset=[Sample(input="What is 2 + 2?", id="s0")], solver=generate(),
                    scorer=trustjudge_scorer("relevance", judge="mock/hash", store=tmp_path / "s.sqlite"))
    [log] = inspect_eval(task, model=get_model("mockllm/model", custom_outputs=output), log_dir=str(tmp_path / "l"),
                         display="none")
    assert log.status == "success" and log.samples, log.error
    got = log.samples[0].scores["trustjudge_scorer"]  # type: ignore[index]
    meta = got.metadata or {}
    assert meta["kind"] == "relevance" and meta["method"] == "p_yes"
    assert got.value == pytest.approx(meta["record"]["relevance"]["YES"])  # the mode's first summary metric
    with pytest.raises(ConfigError, match=r"kind must be one of .*relevance.*, got 'steps'"):
        trustjudge_scorer("steps", judge="mock/hash", store=tmp_path / "s.sqlite")


def test_the_pytest_plugin_asserts_on_the_plugins_metric(relevance: None, tmp_path: Path) -> None:
    from trustjudge.pytest_plugin import assert_metric_at_least

    question = "What is 2 + 2?"
    with Judge("mock/hash", store=tmp_path / "s.sqlite") as judge:
        record = assert_metric_at_least(judge, "relevance", question, "4", 0.0)
        p_yes = record.to_dict()["relevance"]["YES"]
        assert 0 < p_yes < 1
        assert_metric_at_least(judge, "relevance", question, "4", p_yes, "p_yes")  # the mode's first metric
        with pytest.raises(AssertionError, match=r"the response's p_yes is .*, below the minimum 1\.5"):
            assert_metric_at_least(judge, "relevance", question, "4", 1.5)
        with pytest.raises(ConfigError, match="has no metric 'p_no'"):
            assert_metric_at_least(judge, "relevance", question, "4", 0.5, "p_no")
        with pytest.raises(ConfigError, match="mode 'steps' has no summary metric"):
            assert_metric_at_least(judge, "steps", question, "1. 4", 0.5)


def test_the_plugin_is_audited_and_reported_through_its_hooks(relevance: None, tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", _rows(4))
    out, audit, report = tmp_path / "o.jsonl", tmp_path / "a.json", tmp_path / "r.html"
    done = _invoke("relevance", items, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "--out", out,
                   "--audit", audit, "--report", report)
    assert done.exit_code == 0, done.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    mean = sum(r["relevance"]["YES"] for r in rows) / len(rows)  # by hand, from the records
    got = json.loads(audit.read_text())
    assert got["responses"] == got["judged"] == 8 and got["mean_p_yes"] == pytest.approx(mean, rel=1e-12)
    page = report.read_text()
    assert '<section id="relevance"><h2>Relevance</h2>' in page and "<dt>mode</dt><dd>relevance</dd>" in page
    assert f'<td>mean P(YES)</td><td class="num">{mean:.3f}</td>' in page


def test_the_plugin_command_takes_its_own_template(relevance: None, tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", _rows(3))
    store = tmp_path / "s.sqlite"
    args = ["relevance", items, "-j", "mock/hash", "--store", store]
    assert "model calls 6" in _invoke(*args, "--out", tmp_path / "a.jsonl").output
    own = tmp_path / "mine.txt"
    own.write_text("Q: $question\nA: $response\nOn topic? $task\n")
    mine = _invoke(*args, "--template", own, "--out", tmp_path / "b.jsonl")
    assert mine.exit_code == 0 and "model calls 6" in mine.output, mine.output  # other prompts: asked anew
    bad = tmp_path / "bad.txt"
    bad.write_text("Q: $question\n$task\n")
    with pytest.raises(ConfigError, match=r"bad\.txt lacks the field\(s\) \$\{response\}"):  # before any work
        _invoke(*args, "--template", bad, "--out", tmp_path / "c.jsonl")
    assert not (tmp_path / "c.jsonl").exists()


def test_a_recipe_runs_the_plugin_through_its_own_summary_metric(relevance: None, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Recipes ask the mode too: the `summary` metric reads the mode's declared summary metrics, a plug-in's as
    well as a built-in's, and refuses one the mode does not declare, naming the file and field."""
    items = write_jsonl(tmp_path / "items.jsonl", _rows(5))
    recipe = tmp_path / "recipe.toml"
    head = 'name = "rel"\nversion = "1"\nbenchmark = "b"\nsource = "s"\nmode = "relevance"\n[metric]\n'
    recipe.write_text(head + 'name = "summary"\n')
    out, metric = tmp_path / "records.jsonl", tmp_path / "metric.json"
    run = _invoke("run", recipe, items, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "-o", out,
                  "--json", metric)
    assert run.exit_code == 0, run.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    by_hand = [r["relevance"]["YES"] for r in records if not r.get("unscored")]
    got = json.loads(metric.read_text())
    got = got["result"]
    assert len(by_hand) == 10 and got["params"] == {"value": "p_yes", "mode": "relevance"}
    assert abs(got["value"] - sum(by_hand) / len(by_hand)) < 1e-12
    recipe.write_text(head + 'name = "summary"\nvalue = "p_no"\n')
    code, _, err = run_cli(capsys, "run", recipe, items, "-j", "mock/hash", "--store", tmp_path / "s.sqlite")
    assert code == 2 and f"{recipe}: field 'metric'" in err
    assert "has no summary metric 'p_no' (its metrics: p_yes)" in err, err
    recipe.write_text(head.replace('"relevance"', '"compare"') + 'name = "summary"\n')
    code, _, err = run_cli(capsys, "run", recipe, items, "-j", "mock/hash", "--store", tmp_path / "s.sqlite")
    assert code == 2 and "mode 'compare' declares none" in err, err
