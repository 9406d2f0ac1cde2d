"""datamind reads DSGym's own evaluation files (issue 35): the evaluator's <run>_results.json and the agent's
prediction_<i>.json, written here in that schema (dsgym/eval/utils.py, allocated_code/env.py as vendored in
zjunlp/DataMind@4b49ef0); bad rows named by file, line and field; an empty prediction scores 0 without the judge,
as DSGym's aggregate counts an unsuccessful sample."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trustjudge import InputError, MockBackend
from trustjudge.backends import LabelRequest
from trustjudge.cli import cli
from trustjudge.recipes import get_recipe, recipe_judge, run_recipe
from trustjudge.recipes._readers import detect, read
from trustjudge.recipes._run import prepare_items


def _result(sample: str, query: str, truth: Any, prediction: Any, success: bool = True) -> dict[str, Any]:
    """One EvaluationResult.to_dict() row as DSGym's evaluator writes it."""
    return {"sample_id": sample, "dataset_name": "qrdata", "query": query, "ground_truth": truth,
            "prediction": prediction, "raw_response": f"<answer>{prediction}</answer>",
            "metrics": {"equivalence_by_llm": {"score": 1.0}}, "execution_time": 1.5, "total_turns": 3,
            "success": success, "extra_info": {"query_id": sample.rsplit("_", 1)[-1], "done": True}}


ROWS = [_result("qrdata__1", "Mean age?", "34.2", "34.19"),
        _result("qrdata__2", "Which group is larger?", "treatment", "control"),
        _result("qrdata__3", "p-value below 0.05?", "yes", "", success=False)]


def _write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, indent=2))
    return path


def test_dsgym_results_file_is_read_and_detected(tmp_path: Path) -> None:
    path = _write(tmp_path / "run_results.json", ROWS)
    assert detect(path, "datamind") and not detect(path, "omnispatial")
    items = read(path, "datamind")
    assert [i.id for i in items] == ["qrdata__1", "qrdata__2", "qrdata__3"]
    first = items[0]
    assert first.question == "Mean age?" and first.reference == "34.2"
    assert [r.text for r in first.responses] == ["34.19"]  # the prediction, not the raw response
    assert first.fields["subset"] == "qrdata"
    assert items[2].responses[0].text == "" and items[2].fields["dsgym_success"] is False
    # the summary file (no raw_response, no trajectory) reads the same
    summary = _write(tmp_path / "run_summary.json", [{k: v for k, v in r.items() if k != "raw_response"}
                                                       for r in ROWS])
    assert [i.reference for i in read(summary, "datamind")] == ["34.2", "treatment", "yes"]


def test_dsgym_prediction_files_are_read_one_or_several(tmp_path: Path) -> None:
    one = {"prediction": "42", "ground_truth": "42.0", "query": None, "turns": 2,
           "conversation": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "42"}],
           "extra_info": {"index": 7, "query_id": "q7"}, "token_usage": {"input_tokens": 1}}
    single = _write(tmp_path / "prediction_7.json", one)
    assert detect(single, "datamind")
    (item,) = read(single, "datamind")
    assert item.id == "q7" and item.question == "N/A" and item.responses[0].text == "42"  # DSGym's query default
    lines = tmp_path / "predictions.jsonl"
    lines.write_text(json.dumps(one) + "\n" + json.dumps({**one, "extra_info": {"index": 8}, "prediction": 3}) + "\n")
    assert [(i.id, i.responses[0].text) for i in read(lines, "datamind")] == [("q7", "42"), ("8", "3")]


@pytest.mark.parametrize("row, line, field, words", [
    ({"query": "q", "ground_truth": "1"}, 2, "prediction", "is missing"),
    ({"query": "q", "ground_truth": " ", "prediction": "1"}, 2, "ground_truth", "without ground truth"),
    ({"query": "q", "ground_truth": "1", "prediction": {"a": 1}}, 2, "prediction", "must be a string"),
    (_result("qrdata__1", "again", "1", "1"), 2, "sample_id", "repeats sample 'qrdata__1' of row 1"),
    ("not a row", 2, None, "must be an object"),
])
def test_bad_dsgym_rows_name_file_line_and_field(tmp_path: Path, row: Any, line: int, field: str | None,
                                                  words: str) -> None:
    path = _write(tmp_path / "run_results.json", [ROWS[0], row])
    with pytest.raises(InputError) as info:
        read(path, "datamind")
    assert info.value.file == str(path) and info.value.line == line and info.value.field == field
    assert words in info.value.reason
    with pytest.raises(InputError, match=r"results\.json"):
        read(_write(tmp_path / "n.json", 3), "datamind")


def test_datamind_on_dsgym_results_by_hand_the_empty_prediction_scores_zero_without_the_judge(tmp_path: Path) -> None:
    p = {"34.19": 0.9, "control": 0.3}
    asked: list[str] = []

    def script(req: LabelRequest) -> list[float]:
        found = [q for text, q in p.items() if f"<response>\n{text}\n</response>" in req.prompt]
        assert found, req.prompt[-300:]
        asked.append(req.prompt)
        return [found[0] if lab.startswith("YES") else 1 - found[0] for lab in req.labels]

    recipe = get_recipe("datamind")
    items = prepare_items(recipe, read(_write(tmp_path / "run_results.json", ROWS), "datamind"))
    judge = recipe_judge(recipe, MockBackend("eq", script), store=tmp_path / "s.sqlite")
    try:
        run = run_recipe(recipe, items, judge, bootstrap=100)
    finally:
        judge.close()
    assert len(asked) == 2  # the empty prediction is settled by the rule
    # DSGym: the mean over all 3 samples, the unsuccessful one 0: hard (1 + 0 + 0) / 3, soft (0.9 + 0.3 + 0) / 3
    assert run.result.value == pytest.approx(1 / 3) and run.result.overall.n == 3
    assert run.readings["soft"].value == pytest.approx(0.4)


def test_run_datamind_detects_the_results_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "run_results.json", ROWS)
    out = tmp_path / "m.json"
    result = CliRunner().invoke(cli, ["run", "datamind", str(path), "-j", "mock/hash", "--json", str(out),
                                      "--store", str(tmp_path / "s.sqlite"), "-q"])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["result"]["n"] == 3 and data["readings"]["hard"]["published"] is True
