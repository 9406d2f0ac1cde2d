"""The PQR recipe (issue 24): P and Q on criteria the judge generates per task and persona, R from claims that
cite their sources (FA: factual accuracy, CV: citation coverage, CC: citation correctness beside), combined per
report; recipes with several
parts. The metric is computed by hand; a rerun makes no call. Each test failed on the code before the change
(no recipe could use two modes, and criteria had to be written in advance)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trustjudge import InputError, MockBackend, items_from_dicts
from trustjudge.backends import GenerateRequest, Generation, LabelRequest
from trustjudge.recipes import get_recipe, load_recipe, recipe_judge, run_recipe

from .conftest import write_jsonl

MARATHON = {"s1": "Long runs build endurance.", "s2": "Tapering lowers injury risk."}
ROWS: list[dict[str, Any]] = [
    {"id": "q1", "question": "Plan my marathon training.", "profile": "Runner, 34, little time.", "sources": MARATHON,
     "responses": [
         {"id": "a", "text": "Report A", "claims": [{"text": "Long runs build endurance.", "source": "s1"},
                                                    {"text": "Tapering raises injury risk.", "source": "s2"},
                                                    {"text": "A marathon is 42 km."}]},
         {"id": "b", "text": "Report B", "claims": [{"text": "Long runs build endurance.", "source": "s1"}]}]},
    {"id": "q2", "question": "Choose a laptop for me.", "profile": "Student, small budget.",
     "sources": {"s1": "Laptop X weighs 1 kg."},
     "responses": [{"id": "a", "text": "Report A2", "claims": [{"text": "Laptop X weighs 1 kg.", "source": "s1"}]}]},
]
P_GEN = "- Goal | 3 | Serves the user's goal.\n- Style | 1 | Written as the user likes.\nEND"
Q_GEN = "1. Depth | 1 | Goes deep.\n2. Clarity | 1 | Reads clearly.\nEND"
SCORES = {("Report A", "Goal"): 8, ("Report A", "Style"): 4, ("Report A", "Depth"): 6, ("Report A", "Clarity"): 10,
          ("Report B", "Goal"): 2, ("Report B", "Style"): 6, ("Report B", "Depth"): 4, ("Report B", "Clarity"): 4,
          ("Report A2", "Goal"): 10, ("Report A2", "Style"): 10, ("Report A2", "Depth"): 8,
          ("Report A2", "Clarity"): 6}
SUPPORTED = {"Long runs build endurance.": 0.9, "Tapering raises injury risk.": 0.2, "A marathon is 42 km.": 0.6,
             "Laptop X weighs 1 kg.": 0.8}


def _between(prompt: str, tag: str) -> str:
    return prompt.rsplit(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


def _backend() -> MockBackend:
    def labels(req: LabelRequest) -> list[float]:
        if "<claim>" in req.prompt:
            p = SUPPORTED[_between(req.prompt, "claim")]
            return [p if lab.startswith("SUPPORTED") else 1 - p if lab.startswith("UNSUPPORTED") else 0.0
                    for lab in req.labels]
        score = SCORES[(_between(req.prompt, "response"), _between(req.prompt, "criterion").split(":", 1)[0])]
        return [1.0 if lab.rstrip("]").strip() == str(score) else 0.0 for lab in req.labels]

    def generate(req: GenerateRequest) -> Generation:
        text = P_GEN if "personalization alignment" in req.prompt else Q_GEN
        return Generation(text, (-0.1,) * 5, "stop", 10)

    return MockBackend("pqr", labels, generate)


def _never(req: Any) -> Any:
    raise AssertionError("a rerun must be served from the store")


def test_pqr_by_hand_and_a_rerun_makes_no_call(tmp_path: Path) -> None:
    recipe = get_recipe("pqr")
    assert recipe.mode == "criteria+claims" and [p.name for p in recipe.parts] == ["P", "Q", "FA", "CV", "CC"]
    store = tmp_path / "s.sqlite"
    judge = recipe_judge(recipe, _backend(), store=store)  # type: ignore[arg-type]
    run = run_recipe(recipe, items_from_dicts(ROWS), judge, bootstrap=200)
    # 2 generations per item (P, Q); 3 responses x 2 criteria each for P and Q; the claims verified once for FA
    # and CC (5 claims, of which b's is a's first with the same source: one stored judgment)
    assert judge.stats.generate_calls == 4 and judge.stats.label_calls == 6 + 6 + 4
    judge.close()
    # P = weighted 0-10 aggregate / 10 (weights 3:1 -> 0.75, 0.25); Q equal weights
    p = {"A": (0.75 * 8 + 0.25 * 4) / 10, "B": (0.75 * 2 + 0.25 * 6) / 10, "A2": (0.75 * 10 + 0.25 * 10) / 10}
    q = {"A": (6 + 10) / 20, "B": (4 + 4) / 20, "A2": (8 + 6) / 20}
    fa = {"A": (0.9 + 0.2 + 0.6) / 3, "B": 0.9, "A2": 0.8}
    cc = {"A": (0.9 + 0.2) / 2, "B": 0.9, "A2": 0.8}  # the uncited claim is not in CC
    cv = {"A": 2 / 3, "B": 1.0, "A2": 1.0}  # citation coverage: A's third claim cites nothing
    total = {k: (p[k] + q[k] + 0.5 * fa[k] + 0.5 * cv[k]) / 3 for k in p}  # R = (FA + CV) / 2; CC beside
    assert run.parts["P"].value == pytest.approx(sum(p.values()) / 3)
    assert run.parts["Q"].value == pytest.approx(sum(q.values()) / 3)
    assert run.parts["FA"].value == pytest.approx(sum(fa.values()) / 3)
    assert run.parts["CC"].value == pytest.approx(sum(cc.values()) / 3)
    assert run.parts["CV"].value == pytest.approx(sum(cv.values()) / 3)
    assert run.result.value == pytest.approx(sum(total.values()) / 3)
    assert run.result.systems["a"].value == pytest.approx((total["A"] + total["A2"]) / 2)
    assert run.result.systems["b"].value == pytest.approx(total["B"])
    assert {r["part"] for r in run.records} == {"P", "Q", "FA,CV,CC"}
    gen = next(r for r in run.records if r["part"] == "P")["generated_criteria"]
    assert [(c["name"], c["weight"]) for c in gen] == [("Goal", 0.75), ("Style", 0.25)]
    data = run.to_dict()
    assert set(data["parts"]) == {"P", "Q", "FA", "CV", "CC"} and data["recipe"]["parts"][4]["metric"]["name"] == (
        "citation_accuracy")
    again_judge = recipe_judge(recipe, MockBackend("pqr", _never, _never), store=store)  # type: ignore[arg-type]
    again = run_recipe(recipe, items_from_dicts(ROWS), again_judge, bootstrap=200)
    assert again_judge.stats.model_calls == 0 and again.result.value == pytest.approx(run.result.value)
    again_judge.close()


def test_a_weighted_part_unscored_leaves_the_report_unscored(tmp_path: Path) -> None:
    rows = [dict(ROWS[1], responses=[{"id": "a", "text": "Report A2", "claims": [{"text": "Laptop X weighs 1 kg."}]}])]
    recipe = get_recipe("pqr")
    judge = recipe_judge(recipe, _backend(), store=tmp_path / "s.sqlite")  # type: ignore[arg-type]
    run = run_recipe(recipe, items_from_dicts(rows), judge, bootstrap=50)
    judge.close()
    # no claim cites a source: coverage 0 (a real 0), correctness unscored (nothing cited), shown but not combined
    assert run.parts["CC"].overall.unscored == 1 and run.parts["FA"].value == pytest.approx(0.8)
    assert run.parts["CV"].value == pytest.approx(0.0)
    p, q = (0.75 * 10 + 0.25 * 10) / 10, (8 + 6) / 20
    assert run.result.value == pytest.approx((p + q + 0.5 * 0.8 + 0.5 * 0.0) / 3)
    weighted = dataclasses.replace(recipe, metric_params={**recipe.metric_params, "weights": {"P": 1.0, "CC": 1.0}})
    judge = recipe_judge(weighted, _backend(), store=tmp_path / "s.sqlite")  # type: ignore[arg-type]
    run = run_recipe(weighted, items_from_dicts(rows), judge, bootstrap=50)
    judge.close()
    assert run.result.overall.n == 0 and run.result.overall.unscored == 1  # a weighted part unscored: never a silent 0


@pytest.mark.parametrize("text, field, message", [
    ('mode = "criteria"\n[parts.P]\nmode = "criteria"\nmetric = { name = "mean_aggregate" }\n'
     '[metric]\nname = "parts_mean"\n', "mode", "is given by each part"),
    ('[parts.P]\nmode = "claims"\nmetric = { name = "mean_aggregate" }\n[metric]\nname = "parts_mean"\n',
     "parts.P.metric.name", "reads criteria records, not claims"),
    ('[parts.P]\nmode = "claims"\nmetric = { name = "claims" }\n[metric]\nname = "parts_mean"\n'
     'weights = { R = 1.0 }\n', "metric.weights.R", "names no part"),
    ('[parts.P]\nmode = "claims"\nmetric = { name = "claims" }\nbogus = 1\n[metric]\nname = "parts_mean"\n',
     "parts.P.bogus", "is not a part field"),
    ('[parts.P]\nmode = "claims"\noptions = { nope = 1 }\nmetric = { name = "claims" }\n[metric]\n'
     'name = "parts_mean"\n', "parts.P.options.nope", "is not an option of mode 'claims'"),
    ('[parts.P]\nmode = "claims"\nmetric = { name = "claims" }\n[metric]\nname = "claims"\n',
     "metric.name", "not a recipe with parts"),
])
def test_bad_parts_recipes_name_the_file_and_field(tmp_path: Path, text: str, field: str, message: str) -> None:
    path = tmp_path / "recipe.toml"
    path.write_text('name = "x"\nversion = "1"\nbenchmark = "b"\nsource = "s"\n' + text, encoding="utf-8")
    with pytest.raises(InputError, match=message) as info:
        load_recipe(path)
    assert info.value.field == field and info.value.file == str(path)


def test_cli_run_pqr_prints_the_parts_and_reruns_from_the_store(tmp_path: Path) -> None:
    from trustjudge.cli import cli

    items = write_jsonl(tmp_path / "items.jsonl", ROWS)
    store, out, js = tmp_path / "s.sqlite", tmp_path / "out.jsonl", tmp_path / "r.json"
    args = ["run", "pqr", str(items), "-j", "mock/hash", "--store", str(store), "--out", str(out), "--json", str(js)]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    assert "Parts" in first.output and "citation_accuracy" in first.output
    data = json.loads(js.read_text())
    assert set(data["parts"]) == {"P", "Q", "FA", "CV", "CC"}
    # mock/hash writes no criteria list: P and Q are unscored (said), so is the combined number
    assert data["parts"]["P"]["unscored"] == 3 and data["result"]["unscored"] == 3
    assert data["parts"]["FA"]["n"] == 3
    rerun = CliRunner().invoke(cli, args)
    assert rerun.exit_code == 0 and "model calls 0," in rerun.output, rerun.output


@pytest.mark.model
def test_pqr_end_to_end_on_the_bundled_judge(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install trustjudge[llamacpp])")
    rows = [{"id": "q1", "question": "How should I start running?", "profile": "Office worker, 40, no sport.",
             "sources": {"s1": "Beginners should alternate walking and running."},
             "responses": [{"id": "a", "text": "Alternate walking and running three times a week.",
                            "claims": [{"text": "Beginners should alternate walking and running.", "source": "s1"}]}]}]
    recipe = get_recipe("pqr")
    store = tmp_path / "s.sqlite"
    judge = recipe_judge(recipe, "llamacpp/smollm2-135m", store=store)
    try:
        run = run_recipe(recipe, items_from_dicts(rows), judge, bootstrap=50)
        assert judge.stats.generate_calls == 2  # P's and Q's criteria, one generation each
    finally:
        judge.close()
    for name in ("FA", "CV", "CC"):
        assert run.parts[name].overall.n == 1 and 0.0 <= run.parts[name].value <= 1.0
    assert run.parts["CV"].value == 1.0  # the one claim cites s1
    for name in ("P", "Q"):
        part = run.parts[name]
        assert (part.overall.n == 1 and 0.0 <= part.value <= 1.0) or part.overall.unscored == 1
    rows_p = [r for r in run.records if r["part"] == "P"]
    assert rows_p[0]["generation"]  # the raw generation is kept, parsed or not
    if run.result.overall.n:
        assert 0.0 <= run.result.value <= 1.0
    else:  # a small judge may write no parseable criteria: the report is unscored, said, never 0
        assert run.result.overall.unscored == 1
    again = recipe_judge(recipe, "llamacpp/smollm2-135m", store=store)
    try:
        rerun = run_recipe(recipe, items_from_dicts(rows), again, bootstrap=50)
        assert again.stats.model_calls == 0 and rerun.to_dict() == run.to_dict()
    finally:
        again.close()


# -- two levels of weights: dimensions, each over its own sub-criteria (pqr 2.0) -----------------------------

P_TWO = ("- Goal alignment | 3 | Serves the user's goals.\n- Goal alignment / Plan | 1 | Gives a plan.\n"
         "- goal alignment / Time | 1 | Fits the user's time.\n- Presentation fit | 1 | Suits the user.\n"
         "- Presentation fit / Tone | 1 | The user's tone.\nEND")
TWO_SCORES = {"Goal alignment": 2, "Goal alignment / Plan": 8, "goal alignment / Time": 4, "Presentation fit": 2,
              "Presentation fit / Tone": 10, "Depth": 6, "Clarity": 10}


def test_pqr_p_is_dimensions_weighted_over_their_own_sub_criteria(tmp_path: Path) -> None:
    def labels(req: LabelRequest) -> list[float]:
        if "<claim>" in req.prompt:
            return [0.5 if lab.startswith(("SUPPORTED", "UNSUPPORTED")) else 0.0 for lab in req.labels]
        score = TWO_SCORES[_between(req.prompt, "criterion").split(":", 1)[0]]
        return [1.0 if lab.rstrip("]").strip() == str(score) else 0.0 for lab in req.labels]

    def generate(req: GenerateRequest) -> Generation:
        assert "DIMENSION / SUB-CRITERION" in req.prompt  # the recipe's two-level generation prompt
        return Generation(P_TWO if "personalization alignment" in req.prompt else Q_GEN, (-0.1,) * 5, "stop", 10)

    recipe = get_recipe("pqr")
    rows = [dict(ROWS[1], responses=[{"id": "a", "text": "Report", "claims": [{"text": "X.", "source": "s1"}]}])]
    judge = recipe_judge(recipe, MockBackend("two", labels, generate), store=tmp_path / "s.sqlite")
    run = run_recipe(recipe, items_from_dicts(rows), judge, bootstrap=0)
    judge.close()
    # Goal alignment: (8 + 4) / 2 = 6 over its two sub-criteria (their dimension line's own 2 is not used);
    # Presentation fit: 10; P = (3 x 6 + 1 x 10) / 4 = 7 on 0-10
    assert run.parts["P"].value == pytest.approx(0.7)
    flat = next(r for r in run.records if r["part"] == "P")["aggregate"]["expected"]
    assert flat == pytest.approx((3 * 2 + 8 + 4 + 2 + 10) / 7)  # the flat weighted mean it replaces: 4.29
    assert run.parts["Q"].value == pytest.approx((6 + 10) / 20)  # no sub-criteria: each line its own dimension


def test_two_level_by_hand_and_what_leaves_it_unscored() -> None:
    from trustjudge.recipes import get_metric

    metric = get_metric("two_level")
    params = metric.checked({}, "metric")

    def record(*crits: tuple[str, float, float | None]) -> dict[str, Any]:
        return {"criteria": [{"name": n, "weight": w, "scores": {"expected": s}, "unscored": None if s is not None
                              else "no_label_mass"} for n, w, s in crits]}

    r = record(("A", 0.5, 1.0), ("A / x", 0.1, 4.0), ("A / y", 0.3, 8.0), ("B", 0.1, 2.0))
    assert metric.value(r, params) == pytest.approx((0.5 * (0.1 * 4 + 0.3 * 8) / 0.4 + 0.1 * 2.0) / 0.6)
    assert metric.value(record(("A / x", 1.0, 4.0)), params) is None  # a sub-criterion without its dimension
    assert metric.value(record(("A", 1.0, 4.0), ("A / x", 1.0, None)), params) is None  # an unscored one
    assert metric.value(record(("A", 1.0, None), ("A / x", 1.0, 3.0)), params) == pytest.approx(3.0)


def test_a_generation_template_must_stay_in_the_recipe_folder(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "out.txt").write_text("${question} ${n}")
    path = tmp_path / "r" / "recipe.toml"
    path.write_text('name = "x"\nversion = "1"\nbenchmark = "b"\nsource = "s"\nmode = "criteria"\n[options]\n'
                    'generate_criteria = 2\ngeneration_template = "../out.txt"\n[metric]\nname = "two_level"\n')
    with pytest.raises(InputError, match="outside the recipe's folder") as info:
        load_recipe(path)
    assert info.value.field == "options.generation_template"
