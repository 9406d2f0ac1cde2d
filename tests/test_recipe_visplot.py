"""VisPlotBench (issue 35): its results file read (the benchmark executed the code: nothing runs here), its own
judge prompt read from a checkout (``instructs.json``, sha256 checked), and its formulas by hand: the execution
pass rate after each attempt (``print_exec_pass.py``), the judge's score with a missing plot and an unparsed
reply counted 0 (``vis_judge.py``), the shares >= 75 and <= 25; ours (expected, P(>= 75), P(<= 25)) beside.

The files are written here in the benchmark's schema (pandas' ``DataFrame.to_json`` of the run's rows); the
judge is a scripted mock that reads the colour of the plot it is shown.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from PIL import Image as PILImage

from trustjudge import InputError, Judge
from trustjudge._images import Image, split
from trustjudge.backends import LabelRequest, MockBackend, register_mock
from trustjudge.cli import cli
from trustjudge.recipes import get_recipe, run_recipe
from trustjudge.recipes._prompt import load_benchmark_prompt
from trustjudge.recipes._readers import detect, read
from trustjudge.recipes._recipe import with_benchmark_prompt

HIGH = {90: 0.7, 70: 0.3}   # a red plot: argmax 90, expected 84, P(>= 75) 0.7, P(<= 25) 0
LOW = {10: 0.8, 30: 0.2}    # a blue plot: argmax 10, expected 14, P(>= 75) 0, P(<= 25) 0.8
# a green plot: no mass on any label (unparsed): the benchmark counts 0, we leave it unscored


def png(colour: str) -> str:
    buf = io.BytesIO()
    PILImage.new("RGB", (20, 12), colour).save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()


SEEN: list[str] = []


def by_colour(req: LabelRequest) -> list[float]:
    values = [int(lab.rstrip("]")) if lab.rstrip("]").isdigit() else -1 for lab in req.labels]
    images = [p for p in split(req.prompt) if isinstance(p, Image)]
    SEEN.append("".join(p for p in split(req.prompt) if isinstance(p, str)))  # its text
    r, g, b = images[0].pil().convert("RGB").getpixel((0, 0))  # the generated plot comes first
    dist = HIGH if r > 200 and g < 50 else LOW if b > 200 else {}
    return [dist.get(v, 0.0) for v in values]


@pytest.fixture()
def mock() -> Any:
    backend = MockBackend("visplot", script=by_colour)
    register_mock("visplot", backend)
    try:
        yield backend
    finally:
        register_mock("visplot", None)


def attempt(error: str = "", plots: list[str] | None = None) -> dict[str, Any]:
    return {"code": "plot()", "error": error, "has_plot": bool(plots), "plots_generated": plots or [],
            "model_response": "...", "original_error": "", "original_has_plot": False}


ROWS: list[dict[str, Any]] = [
    # t1 draws at once (red); t2 fails, then its debug attempt 0 fails, attempt 1 draws (blue); t3 never draws;
    # t4 draws (green: the judge's reply unparsed)
    {"id": 1, **attempt(plots=[png("red")]), "debug_info": None},
    {"id": 2, **attempt("Traceback: KeyError 'x'"),
     "debug_info": {"attempts": {"1": attempt(plots=[png("blue")]), "0": attempt("Traceback: still")}}},
    {"id": 3, **attempt("Unexpected Error"), "debug_info": {"attempts": {"0": attempt("Unexpected Error")}}},
    {"id": 4, **attempt(plots=[png("green"), png("red")]), "debug_info": None},
]


def full_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with the dataset's columns the benchmark's results carry."""
    return [{"task__plot_description": f"Plot {r['id']}: a bar chart of sales by region.",
             "task__plot_style": "Use a title.", "model": "Qwen2.5-Coder-7B-Instruct", "used_lib": "matplotlib",
             "plots_gt": [png("white")], **r} for r in rows]


def results_file(path: Path, rows: list[dict[str, Any]] = ROWS) -> Path:
    """The rows as the benchmark's ``dump_results`` writes them: ``DataFrame.to_json``, {column: {index: value}}."""
    full = full_rows(rows)
    columns = sorted({k for r in full for k in r})
    path.write_text(json.dumps({c: {str(i): r.get(c) for i, r in enumerate(full)} for c in columns}))
    return path


def test_the_results_file_is_read_and_detected_attempts_in_order(tmp_path: Path) -> None:
    file = results_file(tmp_path / "results_Qwen2.5-Coder-7B-Instruct_python_head_0.json")
    assert detect(file, "visplotbench") and detect(file, "visplotbench-vis")
    items = {item.id: item for item in read(file, "visplotbench")}
    assert list(items) == ["1", "2", "3", "4"]
    assert [r.id for r in items["2"].responses] == ["initial", "debug0", "debug1"]  # debug attempts by number
    assert items["2"].fields["execution"] == "error,error,ok" and items["3"].fields["execution"] == \
        "no_image,no_image"
    assert items["1"].question == "Plot 1: a bar chart of sales by region.\nUse a title."
    assert [len(r.images) for r in items["2"].responses] == [0, 0, 1] and len(items["4"].responses[0].images) == 2
    assert items["1"].responses[0].system == "Qwen2.5-Coder-7B-Instruct" and not items["1"].reference_images
    vis = {item.id: item for item in read(file, "visplotbench-vis")}
    assert len(vis["4"].responses[0].images) == 1 and len(vis["4"].reference_images) == 1  # the first plot, the GT
    other = tmp_path / "items.jsonl"
    other.write_text(json.dumps({"id": "q", "question": "?", "responses": [{"id": "a", "text": "x"}]}) + "\n")
    assert not detect(other, "visplotbench")


def test_a_list_of_rows_and_the_old_task_columns(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([{"id": 7, "task__plot_description": "changed", "old_task__plot_description": "orig",
                                 "task__plot_style": "s", **attempt(plots=[png("red")])}]))
    (item,) = read(path, "visplotbench")
    assert item.question == "orig\ns" and item.fields["execution"] == "ok"


@pytest.mark.parametrize(("change", "line", "field"), [
    (lambda rows: rows[1].pop("has_plot"), 2, "has_plot"),
    (lambda rows: rows[1]["debug_info"]["attempts"]["1"].update(plots_generated="abc"), 2,
     "debug_info.attempts.1.plots_generated"),
    (lambda rows: rows[2].update(debug_info={"attempts": ["x"]}), 3, "debug_info"),
    (lambda rows: rows[0].update(error=3), 1, "error"),
])
def test_a_bad_row_is_named_by_file_line_and_field(tmp_path: Path, change: Any, line: int, field: str) -> None:
    rows = full_rows(json.loads(json.dumps(ROWS)))
    change(rows)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(InputError) as caught:
        read(path, "visplotbench")
    assert caught.value.file == str(path) and caught.value.line == line and caught.value.field == field


def test_the_ground_truth_setting_needs_the_ground_truth_plot(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([{"id": 1, "task__plot_description": "d", "task__plot_style": "s",
                                 **attempt(plots=[png("red")])}]))
    with pytest.raises(InputError, match="ground-truth plot") as caught:
        read(path, "visplotbench-vis")
    assert caught.value.field == "plots_gt" and caught.value.line == 1


def test_the_benchmarks_formulas_by_hand_published_first_ours_beside(mock: MockBackend, tmp_path: Path) -> None:
    file = results_file(tmp_path / "results.json")
    recipe = get_recipe("visplotbench")
    with Judge("mock/visplot", store=tmp_path / "s.sqlite", **recipe.judge_kwargs()) as j:
        run = run_recipe(recipe, read(file, "visplotbench"), j, bootstrap=0)
        calls = j.stats.model_calls
    assert calls == 3  # t1, t2's debug attempt 1, t4: the attempts that drew; nothing executed here
    assert run.execution["runs"] == 0 and run.execution["from_file"] == 7
    # print_exec_pass.py: Init 2/4 (t1, t4); Post A0 2/4; Post A1 3/4 (t2 fixed), each over all 4 tasks
    assert run.execution["pass_rate_by_attempt"] == pytest.approx([0.5, 0.5, 0.75])
    values = {name: r.value for name, r in run.readings.items()}
    assert list(values)[:4] == ["pass_rate", "score (benchmark)", "good (benchmark)", "bad (benchmark)"]
    assert values["pass_rate"] == pytest.approx(0.75)
    # the benchmark: argmax 90 (t1), 10 (t2), 0 (t3: no plot), 0 (t4: unparsed, fillna(0))
    assert values["score (benchmark)"] == pytest.approx((90 + 10 + 0 + 0) / 4)
    assert values["good (benchmark)"] == pytest.approx(1 / 4)   # >= 75: t1
    assert values["bad (benchmark)"] == pytest.approx(3 / 4)    # <= 25: t2, t3, t4
    # ours: expected 84 and 14, 0 for t3; t4 unscored
    assert values["expected score (ours)"] == pytest.approx((84 + 14 + 0) / 3)
    assert values["P(>= 75) (ours)"] == pytest.approx((0.7 + 0 + 0) / 3)
    assert values["P(<= 25) (ours)"] == pytest.approx((0 + 0.8 + 1) / 3)
    assert run.readings["expected score (ours)"].overall.unscored == 1
    assert run.readings["score (benchmark)"].overall.unscored == 0


def test_the_first_attempt_that_drew_is_the_one_scored(mock: MockBackend, tmp_path: Path) -> None:
    # the benchmark retries only until an attempt runs and scores that one: a later attempt is not "best of k"
    rows = [{"id": 1, **attempt(plots=[png("blue")]), "debug_info": {"attempts": {"0": attempt(plots=[png("red")])}}}]
    recipe = get_recipe("visplotbench")
    with Judge("mock/visplot", store=tmp_path / "s.sqlite", **recipe.judge_kwargs()) as j:
        run = run_recipe(recipe, read(results_file(tmp_path / "r.json", rows), "visplotbench"), j, bootstrap=0)
    assert run.readings["score (benchmark)"].value == pytest.approx(10)
    assert run.readings["expected score (ours)"].value == pytest.approx(14)


def _instructs(root: Path, text: str) -> str:
    folder = root / "VisPlotBench" / "plotting_benchmark" / "resources"
    folder.mkdir(parents=True)
    data = json.dumps({"python": {"system_prompt": "x", "judge_instruct_task": text, "judge_instruct_vis": "v"}},
                      indent=4)
    (folder / "instructs.json").write_text(data)
    return hashlib.sha256(data.encode()).hexdigest()


def test_the_benchmarks_task_prompt_is_read_from_a_checkout_its_hash_checked(mock: MockBackend,
                                                                              tmp_path: Path) -> None:
    recipe = get_recipe("visplotbench")
    assert recipe.benchmark_prompt["key"] == "python.judge_instruct_task"
    assert recipe.benchmark_prompt["sha256"].startswith("a5dd1356") and recipe.published_judge == "openai/gpt-4.1"
    _instructs(tmp_path, "Rate the plot against the task, 0 to 100 ($ kept).")
    with pytest.raises(InputError, match="a5dd1356"):  # a project-written stand-in is not the benchmark's file
        load_benchmark_prompt(recipe, tmp_path)
    prompt = load_benchmark_prompt(recipe, tmp_path, allow_changed=True)
    assert prompt.text.startswith("Rate the plot against the task, 0 to 100 ($$ kept).\n[PLOT TASK]:\n${question}")
    used = with_benchmark_prompt(recipe, prompt)
    SEEN.clear()
    rows = [{"id": 1, **attempt(plots=[png("red")])}]
    with Judge("mock/visplot", store=tmp_path / "s.sqlite", **used.judge_kwargs()) as j:
        run = run_recipe(used, read(results_file(tmp_path / "r.json", rows), "visplotbench"), j, bootstrap=0)
    assert "Rate the plot against the task, 0 to 100 ($ kept).\n[PLOT TASK]:\nPlot 1: a bar chart" in \
        SEEN[0]
    assert run.records[0]["prompt"]["source"] == "benchmark" and run.records[0]["prompt"]["matches_recipe"] is False


def test_a_json_prompt_key_that_is_missing_or_not_text_is_refused(tmp_path: Path) -> None:
    recipe = get_recipe("visplotbench")
    folder = tmp_path / "VisPlotBench" / "plotting_benchmark" / "resources"
    folder.mkdir(parents=True)
    for data, message in [({"python": {}}, "has no key python.judge_instruct_task"),
                          ({"python": {"judge_instruct_task": ["a"]}}, "holds list"), (None, "is not JSON")]:
        (folder / "instructs.json").write_text("{oops" if data is None else json.dumps(data))
        with pytest.raises(InputError, match=message) as caught:
            load_benchmark_prompt(recipe, tmp_path, allow_changed=True)
        assert caught.value.file == str(folder / "instructs.json")


def test_trustjudge_run_visplotbench_reads_the_results_file_and_prints_both(mock: MockBackend, tmp_path: Path) -> None:
    file = results_file(tmp_path / "results_m_python_head_0.json")
    out = tmp_path / "run.json"
    result = CliRunner().invoke(cli, ["run", "visplotbench", str(file), "--judge", "mock/visplot", "--store",
                                      str(tmp_path / "s.sqlite"), "--json", str(out), "--bootstrap", "0"])
    assert result.exit_code == 0, result.output
    for name in ("pass_rate (published)", "score (benchmark)", "good (benchmark)", "expected score (ours)",
                 "P(<= 25) (ours)", "Init 0.500, Post A0 0.500, Post A1 0.750"):
        assert name in result.output, name
    data = json.loads(out.read_text())
    assert data["readings"]["score (benchmark)"]["value"] == pytest.approx(25)
    assert data["execution"]["failures"] == {"error": 2, "no_image": 2}


def test_the_ground_truth_setting_shows_the_rendered_plot_then_the_ground_truth(tmp_path: Path) -> None:
    shown: list[list[tuple[int, int, int]]] = []

    def colours(req: LabelRequest) -> list[float]:
        shown.append([p.pil().convert("RGB").getpixel((0, 0)) for p in split(req.prompt) if isinstance(p, Image)])
        return by_colour(req)

    register_mock("visplot-vis", MockBackend("visplot-vis", script=colours))
    try:
        recipe = get_recipe("visplotbench-vis")
        assert recipe.input["format"] == "visplotbench-vis" and recipe.benchmark_prompt["key"] == \
            "python.judge_instruct_vis"
        _instructs(tmp_path, "Compare the two figures.")
        used = with_benchmark_prompt(recipe, load_benchmark_prompt(recipe, tmp_path, allow_changed=True))
        rows = [{"id": 1, **attempt(plots=[png("red"), png("blue")])}]
        for r in (recipe, used):
            shown.clear()
            with Judge("mock/visplot-vis", store=tmp_path / f"{id(r)}.sqlite", **r.judge_kwargs()) as j:
                run = run_recipe(r, read(results_file(tmp_path / "r.json", rows), "visplotbench-vis"), j, bootstrap=0)
            assert shown == [[(255, 0, 0), (255, 255, 255)]]  # the first plot only, then the ground truth
            assert run.readings["score (benchmark)"].value == pytest.approx(90)
    finally:
        register_mock("visplot-vis", None)


def test_a_benchmark_prompt_names_one_source_of_its_text(tmp_path: Path) -> None:
    from trustjudge.recipes import load_recipe

    (tmp_path / "p.txt").write_text("Rate.\n${question}\n${response}\n${task}\n")
    path = tmp_path / "recipe.toml"
    path.write_text('name = "r"\nversion = "1"\nbenchmark = "b"\nsource = "s"\nmode = "score"\n'
                    '[templates]\npointwise = "p.txt"\n[metric]\nname = "mean_score"\n'
                    '[benchmark_prompt]\nkind = "pointwise"\nfile = "i.json"\n'
                    f'constant = "A"\nkey = "python.x"\nsha256 = "{"0" * 64}"\n'
                    'layout = "${benchmark_prompt}\\n${question}\\n${response}\\n${task}"\n')
    with pytest.raises(InputError, match="exclude each other") as caught:
        load_recipe(path)
    assert caught.value.field == "benchmark_prompt.constant" and caught.value.file == str(path)


def test_execution_kinds_given_by_hand_are_checked_naming_file_line_and_field(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "t", "question": "A bar chart.", "execution": "ok,fine",
                                 "responses": [{"id": "a", "text": ""}, {"id": "b", "text": ""}]}) + "\n")
    result = CliRunner().invoke(cli, ["run", "visplotbench", str(items), "--judge", "mock/hash", "--store",
                                      str(tmp_path / "s.sqlite")])
    error = result.exception
    assert result.exit_code != 0 and isinstance(error, InputError) and "one kind (ok, error, no_image)" in str(error)
    assert error.file == str(items) and error.line == 1 and error.field == "execution"
