"""AutoFigure (issue 35): the benchmark's 8 dimensions, its judge prompt read from a checkout
(``autofigure/judge.py``, the f-string ``VLMJudgeEvaluator.evaluate_single_figure`` assigns to ``prompt``, sha256
checked) with its expressions mapped or fixed, and its overall score (the mean of the dimensions) by hand.
The checkout here is a project-written stand-in with the same structure and expressions."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image as PILImage

from trustjudge import InputError, Judge
from trustjudge._images import Image, split
from trustjudge.backends import LabelRequest, MockBackend, register_mock
from trustjudge.io._items import items_from_dicts
from trustjudge.recipes import compute, get_metric, get_recipe, run_recipe
from trustjudge.recipes._prompt import load_benchmark_prompt
from trustjudge.recipes._recipe import with_benchmark_prompt

STAND_IN = '''class VLMJudgeEvaluator:
    def evaluate_single_figure(self, figure_path, figure_id=None, content_text=None, content_type="paper"):
        content_context_prompt = f"Source: {content_text}"
        prompt = f"""{content_context_prompt}{reference_context_prompt}
Grade the figure from 1 to 10 ($ signs kept).{content_fidelity_prompt}
Reply as {{"figure_id": "{figure_id}", "kind": "{content_type}", "for": "{type_context['audience']}"}}
"""
        return prompt
'''


def png(tmp_path: Path, name: str, colour: str) -> str:
    buf = io.BytesIO()
    PILImage.new("RGB", (16, 10), colour).save(buf, "PNG")
    (tmp_path / name).write_bytes(buf.getvalue())
    return name


def test_the_recipe_scores_the_benchmarks_eight_dimensions() -> None:
    recipe = get_recipe("autofigure")
    assert [c.name for c in recipe.options["criteria"]] == [
        "aesthetic_and_design_quality", "visual_expressiveness", "professional_polish", "clarity", "logical_flow",
        "accuracy", "completeness", "appropriateness"]
    spec = recipe.benchmark_prompt
    assert spec["file"] == "autofigure/judge.py" and spec["function"] == "VLMJudgeEvaluator.evaluate_single_figure"
    assert spec["sha256"].startswith("67ea9514") and spec["commit"] == recipe.provenance["commit"]


def test_the_benchmarks_prompt_from_a_checkout_judges_each_dimension_overall_the_mean(tmp_path: Path) -> None:
    (tmp_path / "bench" / "autofigure").mkdir(parents=True)
    (tmp_path / "bench" / "autofigure" / "judge.py").write_text(STAND_IN)
    recipe = get_recipe("autofigure")
    with pytest.raises(InputError, match="67ea9514"):  # the stand-in is not the benchmark's file
        load_benchmark_prompt(recipe, tmp_path / "bench")
    prompt = load_benchmark_prompt(recipe, tmp_path / "bench", allow_changed=True)
    assert prompt.text.startswith('${question}\nGrade the figure from 1 to 10 ($$ signs kept).\nReply as '
                                  '{"figure_id": "figure", "kind": "paper", "for": "the paper\'s readers"}')
    used = with_benchmark_prompt(recipe, prompt)
    seen: list[tuple[str, int]] = []

    def per_dimension(req: LabelRequest) -> list[float]:
        parts = split(req.prompt)
        seen.append(("".join(p for p in parts if isinstance(p, str)), sum(isinstance(p, Image) for p in parts)))
        k = len(seen)  # dimension k of 8: the point mass on level k + 1 (2..9)
        return [1.0 if lab.rstrip("]") == str(k + 1) else 0.0 for lab in req.labels]

    register_mock("autofigure-dims", MockBackend("autofigure-dims", script=per_dimension))
    try:
        rows = [{"id": "f1", "question": "Our method encodes, retrieves, then decodes.",
                 "reference_images": [png(tmp_path, "ref.png", "white")],
                 "responses": [{"id": "ours", "text": "", "images": [png(tmp_path, "fig.png", "red")]}]}]
        with Judge("mock/autofigure-dims", store=tmp_path / "s.sqlite", **used.judge_kwargs()) as j:
            run = run_recipe(used, items_from_dicts(rows, base=tmp_path), j, bootstrap=0)
    finally:
        register_mock("autofigure-dims", None)
    assert len(seen) == 8 and all(n == 2 for _, n in seen)  # the reference figure and the candidate
    assert all("Our method encodes, retrieves, then decodes.\nGrade the figure from 1 to 10 ($ signs kept)." in text
               for text, _ in seen)  # the source text where the code puts its context block
    for c in recipe.options["criteria"]:  # each dimension asked once, in its own call
        assert sum(c.description in text for text, _ in seen) == 1, c.name
    assert run.result.value == pytest.approx(sum(range(2, 10)) / 8)  # overall = the mean of the 8 dimensions
    assert run.records[0]["prompt"]["source"] == "benchmark"



def test_the_judges_own_score_is_the_headline_the_expected_one_beside(tmp_path: Path) -> None:
    """judge.py averages the scores its judge writes: the published reading is the judge's own level per
    dimension (hard), first; the expected score under its distribution (soft) beside it."""
    def leaning(req: LabelRequest) -> list[float]:  # every dimension: 0.6 on level 9, 0.4 on level 1
        return [0.6 if lab.rstrip("]") == "9" else 0.4 if lab.rstrip("]") == "1" else 0.0 for lab in req.labels]

    register_mock("autofigure-leaning", MockBackend("autofigure-leaning", script=leaning))
    try:
        recipe = get_recipe("autofigure")
        rows = [{"id": "f1", "question": "Our method encodes, then decodes.",
                 "responses": [{"id": "ours", "text": "", "images": [png(tmp_path, "fig.png", "red")]}]}]
        with Judge("mock/autofigure-leaning", store=tmp_path / "s.sqlite", **recipe.judge_kwargs()) as j:
            run = run_recipe(recipe, items_from_dicts(rows, base=tmp_path), j, bootstrap=0)
    finally:
        register_mock("autofigure-leaning", None)
    assert list(run.readings) == ["hard", "soft"]
    assert run.result.value == pytest.approx(9.0)                      # the judge's own level, 9 on each
    assert run.readings["soft"].value == pytest.approx(0.6 * 9 + 0.4 * 1)

PAIR_STAND_IN = '''class VLMJudgeEvaluator:
    def pairwise_comparison(self, figure1_path, figure2_path, comparison_id, content_text=None, content_type="paper"):
        content_context_prompt = f"Source: {content_text}"
        prompt = f"""{content_context_prompt}
Pick A, B, Both good or Both bad.{content_fidelity_prompt}
{{"comparison_id": "{comparison_id}",{content_fidelity_json_template} "final_decision": {{"winner": "A"}}}}
"""
        return prompt
'''


def test_pairwise_the_final_decision_is_the_headline_with_the_benchmarks_prompt(tmp_path: Path) -> None:
    recipe = get_recipe("autofigure-pairwise")
    assert [c.name for c in recipe.options["criteria"]][-1] == "final_decision"
    assert recipe.metric_params["criterion"] == "final_decision"
    (tmp_path / "bench" / "autofigure").mkdir(parents=True)
    (tmp_path / "bench" / "autofigure" / "judge.py").write_text(PAIR_STAND_IN)
    with pytest.raises(InputError, match="67ea9514"):
        load_benchmark_prompt(recipe, tmp_path / "bench")
    prompt = load_benchmark_prompt(recipe, tmp_path / "bench", allow_changed=True)
    assert prompt.text.startswith('${question}\nPick A, B, Both good or Both bad.\n{"comparison_id": "pair", '
                                  '"final_decision": {"winner": "A"}}')
    used = with_benchmark_prompt(recipe, prompt)
    final = next(c.description for c in recipe.options["criteria"] if c.name == "final_decision")
    texts: list[str] = []

    def labels(req: LabelRequest) -> list[float]:
        parts = split(req.prompt)
        text = "".join(p for p in parts if isinstance(p, str))
        texts.append(text)
        if final not in text:
            return [0.25, 0.25, 0.25, 0.25]
        first = next(p for p in parts if isinstance(p, Image)).pil().convert("RGB").getpixel((0, 0))
        return [0.7, 0.1, 0.1, 0.1] if first == (255, 0, 0) else [0.1, 0.6, 0.2, 0.1]  # A, B, BOTH_GOOD, BOTH_BAD

    register_mock("autofigure-pairs", MockBackend("autofigure-pairs", script=labels))
    try:
        rows = [{"id": "p1", "question": "Our method encodes, then decodes.",
                 "responses": [{"id": "generated", "text": "", "images": [png(tmp_path, "g.png", "red")]},
                               {"id": "original", "text": "", "images": [png(tmp_path, "o.png", "blue")]}]}]
        with Judge("mock/autofigure-pairs", store=tmp_path / "s.sqlite", **used.judge_kwargs()) as j:
            run = run_recipe(used, items_from_dicts(rows, base=tmp_path), j, bootstrap=0)
    finally:
        register_mock("autofigure-pairs", None)
    assert len(texts) == 16 and all("Our method encodes, then decodes.\nPick A, B" in t for t in texts)
    # by hand, the final decision over both orders (the second mirrored): A (0.7 + 0.6) / 2, B (0.1 + 0.1) / 2,
    # both good (0.1 + 0.2) / 2, both bad (0.1 + 0.1) / 2; the other dimensions do not enter the headline
    values = {name: r.value for name, r in run.readings.items()}
    soft = {"first": 0.65, "second": 0.1, "both_good": 0.15, "both_bad": 0.1}
    # published first: the share of pairs whose final decision is A (its most probable label), as the code counts
    # published first: the judge's answer in the pair's one drawn order (p1, seed 0: swapped, the original shown
    # as A; its answer B is the generated figure), as judge.py counts it; ours beside it over both orders
    bench = {"first": 1.0, "second": 0.0, "both_good": 0.0, "both_bad": 0.0}
    hard = {"first": 1.0, "second": 0.0, "both_good": 0.0, "both_bad": 0.0}
    assert next(iter(values)) == "first (benchmark: one random order)" and run.result.value == 1.0
    assert values == pytest.approx({**{f"{k} (benchmark: one random order)": v for k, v in bench.items()},
                                    **{f"{k} (hard, both orders)": v for k, v in hard.items()},
                                    **{f"{k} (soft, both orders)": v for k, v in soft.items()}})


def test_pairwise_the_benchmarks_reading_is_one_seeded_random_order_per_pair(tmp_path: Path) -> None:
    """judge.py shows each pair in one random order and counts its judge's answer there, the order undone. A judge
    that favours whichever figure it is shown first tells the readings apart: in one order the generated figure
    wins, in the other the original; over both orders (ours) the generated one, slightly better, wins."""
    from trustjudge.recipes._vision import drawn_order

    def position_biased(req: LabelRequest) -> list[float]:  # A, B, BOTH_GOOD, BOTH_BAD; red = the generated
        first = next(p for p in split(req.prompt) if isinstance(p, Image)).pil().convert("RGB").getpixel((0, 0))
        return [0.7, 0.1, 0.1, 0.1] if first == (255, 0, 0) else [0.6, 0.2, 0.1, 0.1]

    # the draws are fixed by the seed and the pair's ids, the same on every run and machine
    assert [drawn_order(0, f"p{i}", "generated", "original") for i in range(8)] == [0, 1, 1, 1, 0, 1, 1, 0]
    assert [drawn_order(1, f"p{i}", "generated", "original") for i in range(8)] == [1, 1, 0, 1, 1, 1, 0, 0]
    rows = [{"id": f"p{i}", "question": f"Method {i} encodes, then decodes.",
             "responses": [{"id": "generated", "text": "", "images": [png(tmp_path, "g.png", "red")]},
                           {"id": "original", "text": "", "images": [png(tmp_path, "o.png", "blue")]}]}
            for i in range(8)]
    recipe = get_recipe("autofigure-pairwise")
    register_mock("autofigure-biased", MockBackend("autofigure-biased", script=position_biased))
    try:
        with Judge("mock/autofigure-biased", store=tmp_path / "s.sqlite", **recipe.judge_kwargs()) as j:
            run = run_recipe(recipe, items_from_dicts(rows, base=tmp_path), j, bootstrap=0)
            assert j.stats.model_calls == 8 * 16  # per pair: 8 dimensions x both orders (judge.py: 1 call)
    finally:
        register_mock("autofigure-biased", None)
    values = {name: r.value for name, r in run.readings.items()}
    # by hand, seed 0: pairs p0, p4, p7 shown as given (the generated figure as A, answered A: generated wins),
    # the other 5 swapped (the original as A, answered A: the original wins)
    assert run.result.value == pytest.approx(3 / 8) and run.result.params["order_seed"] == 0
    assert values["second (benchmark: one random order)"] == pytest.approx(5 / 8)
    assert values["both_good (benchmark: one random order)"] == values["both_bad (benchmark: one random order)"] == 0
    # ours, both orders, the second mirrored: A (0.7 + 0.2) / 2 = 0.45, B (0.1 + 0.6) / 2 = 0.35
    assert values["first (soft, both orders)"] == pytest.approx(0.45)
    assert values["second (soft, both orders)"] == pytest.approx(0.35)
    assert values["first (hard, both orders)"] == 1.0
    # another seed, other draws (p2, p6, p7 as given): the same records, no call
    other = compute(get_metric("figure_pairwise"), run.records, {**run.result.params, "order_seed": 1}, bootstrap=0)
    assert other.value == pytest.approx(3 / 8) and other.params["order_seed"] == 1
    data = run.to_dict()
    assert data["readings"]["first (benchmark: one random order)"]["published"]
    assert data["result"]["params"]["order"] == "random"
