"""Recipes on real images: VisPlotBench runs the plotting code each attempt wrote (matplotlib, in the sandbox)
and scores the PNG it drew; AutoFigure scores a figure image on its dimensions; PuzzleWorld's puzzle images go
to the judge with the steps. The metrics are checked by hand on small inputs: the judge is a scripted mock that
reads each image it is shown (its mean colour picks the label distribution), so the numbers are known.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image as PILImage

from trustjudge import Judge, items_from_dicts
from trustjudge._images import Image, split
from trustjudge.backends import LabelRequest, MockBackend, register_mock
from trustjudge.recipes import get_recipe, run_recipe

RED_BAR = "```python\nimport matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.bar([1, 2], [3, 4], color='red')\nfig.savefig('plot.png')\n```"  # noqa: E501
BLUE_LINE = ("import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([0, 1, 2], [0, 2, 1], color='blue')\n"
             "fig.savefig('out.png')\n")
FAILS = "import matplotlib.pyplot as plt\nplt.plot([1, 2], [1])\nplt.savefig('x.png')\n"  # shapes differ: an error
NO_PNG = "print('I forgot to save the figure')\n"
RAISES = "raise ValueError('no data')\n"

HIGH = {90: 0.7, 70: 0.3}   # a red plot: expected 84, P(>= 75) = 0.7, P(<= 25) = 0
LOW = {10: 0.8, 30: 0.2}    # a blue plot: expected 14, P(>= 75) = 0, P(<= 25) = 0.8


def _redness(image: Image) -> float:
    import numpy as np

    rgb = np.asarray(image.pil(), dtype=np.float64)
    return float((rgb[..., 0] - rgb[..., 2]).mean())


def by_colour(req: LabelRequest) -> list[float]:
    """A red image gets HIGH, any other LOW (on a 0-100 scale); other label sets: the first label."""
    values = [int(lab.rstrip("]")) if lab.rstrip("]").isdigit() else -1 for lab in req.labels]
    images = [p for p in split(req.prompt) if isinstance(p, Image)]
    if len(values) != 101 or not images:
        return [1.0 if i == 0 else 0.0 for i in range(len(values))]
    dist = HIGH if _redness(images[-1]) > 5 else LOW
    return [dist.get(v, 0.0) for v in values]


@pytest.fixture()
def mock() -> Iterator[MockBackend]:
    backend = MockBackend("vision-recipes", script=by_colour)
    register_mock("vision-recipes", backend)
    try:
        yield backend
    finally:
        register_mock("vision-recipes", None)


TASKS = [
    {"id": "t1", "question": "A red bar chart of 3 and 4.",
     "responses": [{"id": "a1", "text": FAILS}, {"id": "a2", "text": RED_BAR}]},
    {"id": "t2", "question": "A scatter plot.",
     "responses": [{"id": "a1", "text": NO_PNG}, {"id": "a2", "text": RAISES}]},
    {"id": "t3", "question": "A line chart.",
     "responses": [{"id": "a1", "text": BLUE_LINE}, {"id": "a2", "text": RED_BAR}]},
]


@pytest.mark.slow
def test_visplotbench_executes_each_attempt_scores_its_plot_and_keeps_the_first_that_drew(
        mock: MockBackend, tmp_path: Path) -> None:
    recipe = get_recipe("visplotbench")
    store = tmp_path / "s.sqlite"
    with Judge("mock/vision-recipes", store=store, **recipe.judge_kwargs()) as j:
        run = run_recipe(recipe, items_from_dicts(TASKS), j, bootstrap=0)
        calls = j.stats.model_calls
    assert calls == 3  # the three attempts that drew; failures ask nothing
    kinds = {(r["item_id"], r["response_id"]): r["execution"] for r in run.records}
    assert kinds == {("t1", "a1"): "error", ("t1", "a2"): "ok", ("t2", "a1"): "no_image", ("t2", "a2"): "error",
                     ("t3", "a1"): "ok", ("t3", "a2"): "ok"}
    assert run.execution["failures"] == {"error": 2, "no_image": 1}
    assert run.execution["pass_rate_first"] == pytest.approx(1 / 3) and run.execution["pass_rate_any"] == \
        pytest.approx(2 / 3)
    assert run.execution["pass_rate_by_attempt"] == pytest.approx([1 / 3, 2 / 3])
    t3 = {r["response_id"]: r for r in run.records if r["item_id"] == "t3"}
    assert t3["a1"]["scores"]["expected"] == pytest.approx(14) and t3["a2"]["scores"]["expected"] == pytest.approx(84)
    # by hand: t1's a2 84 (good 0.7, bad 0), t2 none drew (0, good 0, bad 1), t3 the first that drew, a1: 14
    # (the benchmark retries only until an attempt runs, and scores that one)
    values = {name: r.value for name, r in run.readings.items()}
    assert next(iter(values)) == "pass_rate"
    assert values["pass_rate"] == pytest.approx(2 / 3)
    assert values["expected score (ours)"] == pytest.approx((84 + 0 + 14) / 3)
    assert values["P(>= 75) (ours)"] == pytest.approx((0.7 + 0 + 0) / 3)
    assert values["P(<= 25) (ours)"] == pytest.approx((0 + 1 + 0.8) / 3)
    assert values["score (benchmark)"] == pytest.approx((90 + 0 + 10) / 3)  # the argmax of HIGH, none, LOW
    # a rerun executes nothing and calls nothing
    with Judge("mock/vision-recipes", store=store, **recipe.judge_kwargs()) as j:
        again = run_recipe(recipe, items_from_dicts(TASKS), j, bootstrap=0)
        assert j.stats.model_calls == 0
    assert again.execution["runs"] == 0 and again.execution["from_store"] == 6
    assert {n: r.value for n, r in again.readings.items()} == values


@pytest.mark.slow
def test_trustjudge_run_visplotbench_prints_the_published_metrics(mock: MockBackend, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from trustjudge.cli import cli

    items = tmp_path / "tasks.jsonl"
    items.write_text("".join(json.dumps(t) + "\n" for t in TASKS[:1]))
    out = tmp_path / "run.json"
    result = CliRunner().invoke(cli, ["run", "visplotbench", str(items), "--judge", "mock/vision-recipes", "--store",
                                      str(tmp_path / "s.sqlite"), "--json", str(out), "--bootstrap", "0"])
    assert result.exit_code == 0, result.output
    for name in ("pass_rate (published)", "score (benchmark)", "expected score (ours)", "P(>= 75) (ours)"):
        assert name in result.output
    data = json.loads(out.read_text())
    assert data["execution"]["failures"] == {"error": 1}
    assert data["readings"]["expected score (ours)"]["value"] == pytest.approx(84)


def figure(colour: str) -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", (24, 16), colour).save(buf, "PNG")
    return buf.getvalue()


def test_autofigure_scores_the_figure_image_on_eight_dimensions_overall_the_mean(
        mock: MockBackend, tmp_path: Path) -> None:
    (tmp_path / "fig.png").write_bytes(figure("red"))
    (tmp_path / "ref.png").write_bytes(figure("white"))
    rows = [{"id": "f1", "question": "Figure 2: the method's pipeline.", "reference_images": ["ref.png"],
             "responses": [{"id": "ours", "text": "", "images": ["fig.png"]}]}]
    recipe = get_recipe("autofigure")
    scripted: list[str] = []

    def per_dimension(req: LabelRequest) -> list[float]:
        scripted.append(req.prompt)
        k = len(scripted)  # dimension k of 8 gets the point mass on level k + 1 (2..9)
        return [1.0 if lab.rstrip("]") == str(k + 1) else 0.0 for lab in req.labels]

    mock.script = per_dimension
    from trustjudge.io._items import items_from_dicts as parse

    with Judge("mock/vision-recipes", store=tmp_path / "s.sqlite", **recipe.judge_kwargs()) as j:
        run = run_recipe(recipe, parse(rows, base=tmp_path), j, bootstrap=0)
    assert len(scripted) == 8 and all("\ue000image" in p for p in scripted)
    assert all(p.count("\ue000image") == 2 for p in scripted)  # the figure and the reference figure
    (record,) = run.records
    assert [c["name"] for c in record["criteria"]] == list(recipe.options["criteria"][i].name for i in range(8))
    assert run.result.value == pytest.approx(sum(range(2, 10)) / 8)  # overall = the mean of the 8 dimensions


def test_puzzleworld_reads_the_puzzle_images_and_the_judge_sees_them_with_each_step(
        mock: MockBackend, tmp_path: Path) -> None:
    from trustjudge.recipes._readers import read

    (tmp_path / "p1").mkdir()
    (tmp_path / "p1" / "content.png").write_bytes(figure("red"))
    data = tmp_path / "puzzles.jsonl"
    data.write_text(json.dumps({"id": "p1", "title": "Grid", "flavor_text": "Look closely.",
                                "images": ["p1/content.png"], "reasoning": ["Read the grid.", "Spell the word."],
                                "solution": "CAT",
                                "raw_output": "I read the grid and spelled CAT."}) + "\n")
    items = read(data, "puzzleworld")
    assert len(items[0].images) == 1 and items[0].images[0].width == 24
    recipe = get_recipe("puzzleworld")
    with Judge("mock/vision-recipes", store=tmp_path / "s.sqlite", **recipe.judge_kwargs()) as j:
        run_recipe(recipe, items, j, bootstrap=0)
    prompts = [r.prompt for r in mock.history if isinstance(r, LabelRequest)]
    assert len(prompts) == 2 and all(items[0].images[0].digest in p for p in prompts)


def test_autofigure_pairwise_keeps_both_good_and_both_bad_apart_over_both_orders(
        mock: MockBackend, tmp_path: Path) -> None:
    (tmp_path / "red.png").write_bytes(figure("red"))
    (tmp_path / "blue.png").write_bytes(figure("blue"))
    rows = [{"id": "f1", "question": "Figure 1: the model.",
             "responses": [{"id": "ours", "text": "", "images": ["red.png"]},
                           {"id": "baseline", "text": "", "images": ["blue.png"]}]}]

    def four_labels(req: LabelRequest) -> list[float]:
        assert list(req.labels) == ["A]", "B]", "BOTH_GOOD]", "BOTH_BAD]"]
        shown_first = next(p for p in split(req.prompt) if isinstance(p, Image))
        return [0.6, 0.1, 0.2, 0.1] if _redness(shown_first) > 5 else [0.1, 0.5, 0.2, 0.2]

    mock.script = four_labels
    recipe = get_recipe("autofigure-pairwise")
    from trustjudge.io._items import items_from_dicts as parse

    with Judge("mock/vision-recipes", store=tmp_path / "s.sqlite", **recipe.judge_kwargs()) as j:
        run = run_recipe(recipe, parse(rows, base=tmp_path), j, bootstrap=0)
        assert j.stats.model_calls == 16  # 8 dimensions x both orders
    (record,) = run.records
    # by hand, per dimension: A 0.6 + 0.5 (B shown first = A mirrored), B 0.1 + 0.1, both good 0.2 + 0.2, both bad
    # 0.1 + 0.2, over 2
    expected = {"A": 0.55, "B": 0.1, "BOTH_GOOD": 0.2, "BOTH_BAD": 0.15}
    for c in record["criteria"]:
        assert c["label_probabilities"] == pytest.approx(expected)
        assert c["probabilities"]["tie"] == pytest.approx(0.35)  # both good and both bad together as the tie
    values = {name: r.value for name, r in run.readings.items()}
    assert values == pytest.approx({"first (benchmark: one random order)": 1.0,  # ours wins in either order
                                    "second (benchmark: one random order)": 0.0,
                                    "both_good (benchmark: one random order)": 0.0,
                                    "both_bad (benchmark: one random order)": 0.0,
                                    "first (hard, both orders)": 1.0, "second (hard, both orders)": 0.0,
                                    "both_good (hard, both orders)": 0.0, "both_bad (hard, both orders)": 0.0,
                                    "first (soft, both orders)": 0.55, "second (soft, both orders)": 0.1,
                                    "both_good (soft, both orders)": 0.2,
                                    "both_bad (soft, both orders)": 0.15})
