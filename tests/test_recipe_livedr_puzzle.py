"""The LiveDRBench and PuzzleWorld recipes (issue 24): match-only claims scored with the benchmark's greedy
one-to-one rule per subset (flights gated on its key claim), and step-wise verdicts scored as the expected last
correct step over the reference solution's steps. Metrics computed by hand from scripted probabilities; a
rerun makes no call; one end-to-end run on the real SmolLM2 judge."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trustjudge import InputError, MockBackend, items_from_dicts
from trustjudge.backends import LabelRequest
from trustjudge.cli import cli
from trustjudge.recipes import compute, get_metric, get_recipe, load_recipe, recipe_judge, run_recipe

from .conftest import write_jsonl

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None


def _between(prompt: str, tag: str) -> str:
    return prompt.rsplit(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


def _never(req: Any) -> Any:
    raise AssertionError("a rerun must be served from the store")


def _yes_no(p: float, labels: tuple[str, ...] | list[str]) -> list[float]:
    names = [lab.rstrip("]").strip() for lab in labels]
    if "YES" not in names:  # the flights' 0-3 grades: P(3) = p, P(0) = 1 - p
        return [p if n == "3" else 1.0 - p if n == "0" else 0.0 for n in names]
    return [p if n == "YES" else 1.0 - p for n in names]


# -- LiveDRBench --------------------------------------------------------------------------------------------

def _claims(*texts: str) -> list[dict[str, str]]:
    return [{"text": t} for t in texts]


DR_ROWS: list[dict[str, Any]] = [
    {"id": "e1", "subset": "entities", "question": "Which labs released open 7B models in 2024?",
     "gold_claims": ["Lab Alpha released Model A-7B in March 2024.", "Lab Beta released B-7B in 2024.",
                     "Lab Gamma released G-7B in May 2024."],
     "responses": [{"id": "sys1", "text": "x", "claims": _claims("Alpha's A-7B came out in March 2024.",
                                                                "Beta put out B-7B.")},
                   {"id": "sys2", "text": "y", "claims": _claims("Gamma released G-7B in May 2024.")}]},
    {"id": "f1", "subset": "flights", "question": "Which flight diverted over a cracked windshield in 2023?",
     "gold_claims": ["The flight was XY123.", "It happened on 4 June 2023."],
     "responses": [{"id": "sys1", "text": "x", "claims": _claims("It was on 4 June 2023.")},
                   {"id": "sys2", "text": "y", "claims": _claims("Flight XY123 diverted.", "It was in July.")}]},
    {"id": "m1", "subset": "materials", "question": "Name a sodium-ion cathode above 160 mAh/g, with its source.",
     "gold_claims": ["NaXO2 reaches 165 mAh/g (Doe et al. 2024)."],
     "responses": [{"id": "sys1", "text": "x", "claims": _claims("NaXO2: 165 mAh/g, Doe 2024.")}]},
    {"id": "n1", "question": "Which dataset has 10k dialogues in Welsh?",  # no subset field: group "-"
     "gold_claims": ["WelshChat has 10k dialogues."],
     "responses": [{"id": "sys1", "text": "x", "claims": _claims("CymruTalk has 5k dialogues.")}]},
]
MATCH = {  # P(YES) that the predicted claim holds the gold claim's key information; pairs not listed: 0.1
    ("Lab Alpha released Model A-7B in March 2024.", "Alpha's A-7B came out in March 2024."): 0.9,
    ("Lab Beta released B-7B in 2024.", "Alpha's A-7B came out in March 2024."): 0.7,
    ("Lab Alpha released Model A-7B in March 2024.", "Beta put out B-7B."): 0.8,
    ("Lab Beta released B-7B in 2024.", "Beta put out B-7B."): 0.4,
    ("Lab Gamma released G-7B in May 2024.", "Gamma released G-7B in May 2024."): 0.6,
    ("It happened on 4 June 2023.", "It was on 4 June 2023."): 0.9,
    ("The flight was XY123.", "It was on 4 June 2023."): 0.2,
    ("The flight was XY123.", "Flight XY123 diverted."): 0.95,
    ("It happened on 4 June 2023.", "It was in July."): 0.3,
    ("NaXO2 reaches 165 mAh/g (Doe et al. 2024).", "NaXO2: 165 mAh/g, Doe 2024."): 0.55,
}


def _dr_backend(seen: list[str] | None = None) -> MockBackend:
    def labels(req: LabelRequest) -> list[float]:
        if seen is not None:
            seen.append(req.prompt)
        pair = (_between(req.prompt, "golden_claim"), _between(req.prompt, "predicted_claim"))
        return _yes_no(MATCH.get(pair, 0.1), req.labels)

    return MockBackend("livedr", labels)


def test_livedrbench_greedy_f1_per_subset_by_hand_and_a_rerun_makes_no_call(tmp_path: Path) -> None:
    recipe = get_recipe("livedrbench")
    assert recipe.mode == "claims" and recipe.by == "subset" and recipe.options["verify"] is False
    store = tmp_path / "s.sqlite"
    prompts: list[str] = []
    judge = recipe_judge(recipe, _dr_backend(prompts), store=store)  # type: ignore[arg-type]
    run = run_recipe(recipe, items_from_dicts(DR_ROWS), judge, bootstrap=200)
    # the greedy one-to-one metric (the recipe's before 2.0) on the same records
    greedy = compute(get_metric("greedy_claims"), run.records, {}, items={i.id: i for i in items_from_dicts(DR_ROWS)},
                     by="subset", bootstrap=200)
    # match only: one question per (gold, predicted) pair, no verification, no extraction
    assert judge.stats.label_calls == 3 * 2 + 3 * 1 + 2 * 1 + 2 * 2 + 1 + 1 and judge.stats.generate_calls == 0
    judge.close()
    own = [p for p in prompts if "Give the grade of the predicted value" not in p]  # flights: graded 0-3
    assert len(own) == len(prompts) - 2 * (1 + 2)
    assert all("all the key information of the golden claim" in p for p in own)
    # greedy: each predicted claim in order takes the first free gold claim with P >= 0.5
    # e1/sys1: "Alpha's" takes gold 0 (0.9); "Beta put out" finds gold 0 taken, gold 1 at 0.4 < 0.5: 1 hit of
    # 3 gold, 2 predicted (the best one-to-one assignment would have found 2)
    f1 = {("e1", "sys1"): 2 * 1 / (3 + 2), ("e1", "sys2"): 2 * 1 / (3 + 1),
          ("f1", "sys1"): 0.0,  # one hit (the date) but the key claim (the flight) unmatched: gated to 0
          ("f1", "sys2"): 2 * 1 / (2 + 2), ("m1", "sys1"): 2 * 1 / (1 + 1), ("n1", "sys1"): 0.0}
    assert greedy.value == pytest.approx(sum(f1.values()) / 6)
    groups = greedy.groups
    assert set(groups) == {"entities", "flights", "materials", "-"}
    assert groups["entities"].value == pytest.approx((f1[("e1", "sys1")] + f1[("e1", "sys2")]) / 2)
    assert groups["flights"].value == pytest.approx((0.0 + 0.5) / 2)
    assert groups["materials"].value == pytest.approx(1.0) and groups["-"].value == 0.0
    assert greedy.systems["sys2"].value == pytest.approx((0.5 + 0.5) / 2)
    record = next(r for r in run.records if r["item_id"] == "e1" and r["response_id"] == "sys1")
    assert record["matching"]["hungarian"]["expected_true_positives"] == pytest.approx(0.7 + 0.8)
    assert record["matching"]["greedy_in_order"]["matches"] == 1  # the mode's own greedy count agrees
    # precision and recall of the same hits, from the same records
    items = {i.id: i for i in items_from_dicts(DR_ROWS)}
    precision = compute(get_metric("greedy_claims"), run.records, {"value": "precision"}, items=items, by="subset")
    recall = compute(get_metric("greedy_claims"), run.records, {"value": "recall"}, items=items, by="subset")
    assert precision.value == pytest.approx((1 / 2 + 1 / 1 + 0 + 1 / 2 + 1 + 0) / 6)
    assert recall.value == pytest.approx((1 / 3 + 1 / 3 + 0 + 1 / 2 + 1 + 0) / 6)
    assert precision.groups["flights"].value == pytest.approx((0 + 1 / 2) / 2)
    ungated = compute(get_metric("greedy_claims"), run.records, {"gated": []}, items=items)
    assert ungated.value == pytest.approx((sum(f1.values()) + 2 * 1 / (2 + 1)) / 6)  # f1/sys1 keeps its hit
    assert run.to_dict()["result"]["by"] == "subset"
    again = recipe_judge(recipe, MockBackend("livedr", _never), store=store)  # type: ignore[arg-type]
    rerun = run_recipe(recipe, items_from_dicts(DR_ROWS), again, bootstrap=200)
    assert again.stats.model_calls == 0 and rerun.result.value == pytest.approx(run.result.value)
    again.close()


def test_livedrbench_from_the_cli_prints_the_subsets(tmp_path: Path) -> None:
    items = str(write_jsonl(tmp_path / "items.jsonl", DR_ROWS))
    out = tmp_path / "result.json"
    args = ["run", "livedrbench", items, "-j", "mock/hash", "--store", str(tmp_path / "s.sqlite"), "--json",
            str(out), "--bootstrap", "20"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "By subset" in result.output and "flights" in result.output and "materials" in result.output
    data = json.loads(out.read_text())["result"]
    assert data["by"] == "subset" and set(data["groups"]) == {"entities", "flights", "materials", "-"}
    groups = data["groups"]  # the overall mean is the groups' means weighted by their responses
    assert data["value"] == pytest.approx(sum(g["value"] * g["n"] for g in groups.values()) / data["n"])
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0 and "model calls 0" in again.output


@pytest.mark.parametrize("edit, field, message", [
    ('templates = { match = "missing.txt" }', "options.templates.match", "not a file beside the recipe"),
    ('templates = { judge = "match.txt" }', None, "unknown claims stage"),
    ("", "metric.by", "must be an item field's name"),
    ("", "metric", "must be one of precision, recall, f1"),
])
def test_bad_livedrbench_recipes_are_refused(tmp_path: Path, edit: str, field: str | None, message: str) -> None:
    shipped = get_recipe("livedrbench").path
    assert shipped is not None
    text = shipped.read_text()
    for name in ("match.txt", "grade.txt"):
        (tmp_path / name).write_text((shipped.parent / name).read_text())
    if edit:
        text = text.replace('templates = { match = "match.txt" }', edit)
    elif field == "metric.by":
        text = text.replace('by = "subset"', 'by = "sub set"', 1)
    else:
        text = text.replace('value = "f1"', 'value = "auc"')
    (tmp_path / "recipe.toml").write_text(text)
    with pytest.raises(InputError, match=message) as caught:
        load_recipe(tmp_path / "recipe.toml")
    if field is not None:
        assert f"field '{field}" in str(caught.value)


def test_items_keep_their_other_scalar_fields() -> None:
    item = items_from_dicts([{**DR_ROWS[0], "year": 2025, "notes": {"nested": 1}, "long": "x" * 500}])[0]
    assert item.fields == {"subset": "entities", "year": 2025}  # nested and long values are not labels


# -- PuzzleWorld --------------------------------------------------------------------------------------------

PW_ROWS: list[dict[str, Any]] = [
    {"id": "p1", "question": "Decode the grid's hidden word.",
     "reference": "Read the first letters.\nShift each by three.\nThe word is CAT.",
     "responses": [{"id": "sysA", "text": "Take the first letters.\nShift them by three.\nAnswer: CAT."}]},
    {"id": "p2", "question": "Which animal links the four clues?",
     "reference": "Each clue names a breed.\nThe breeds are all dogs.",
     "responses": [{"id": "sysA", "text": "Clue 1 is a poodle.\nClue 2 is a beagle.\nAll are dogs.\nAnswer: DOG."}]},
    {"id": "p3", "question": "What is the meta answer?",  # no reference: unscored, never a silent 0
     "responses": [{"id": "sysA", "text": "Combine the answers.\nAnswer: TIGER."}]},
]
STEP = {"Take the first letters.": 0.9, "Shift them by three.": 0.8, "Answer: CAT.": 0.5,
        "Clue 1 is a poodle.": 0.9, "Clue 2 is a beagle.": 0.9, "All are dogs.": 0.9, "Answer: DOG.": 0.9,
        "Combine the answers.": 0.7, "Answer: TIGER.": 0.2}


def _pw_backend() -> MockBackend:
    def labels(req: LabelRequest) -> list[float]:
        judged = req.prompt.rsplit('<step n="', 1)[1].split(">\n", 1)[1].split("\n</step>", 1)[0]
        return _yes_no(STEP[judged], req.labels)

    return MockBackend("puzzle", labels)


def test_puzzleworld_expected_last_correct_share_by_hand_and_a_rerun_makes_no_call(tmp_path: Path) -> None:
    # the steps mode's reading (the recipe's before 2.0, which follows the benchmark's reference walk)
    (tmp_path / "r.toml").write_text('name = "pw-steps"\nversion = "1"\nbenchmark = "b"\nsource = "s"\nmode = "steps"\n'
                                     '[options]\nsplit = "lines"\n[metric]\nname = "last_correct_share"\n')
    recipe = load_recipe(tmp_path / "r.toml")
    store = tmp_path / "s.sqlite"
    judge = recipe_judge(recipe, _pw_backend(), store=store)  # type: ignore[arg-type]
    run = run_recipe(recipe, items_from_dicts(PW_ROWS), judge, bootstrap=200)
    assert judge.stats.label_calls == 3 + 4 + 2
    judge.close()
    # p1: 3 reference steps; P(L=k): L=0 0.1, L=1 0.9*0.2, L=2 0.9*0.8*0.5, L=3 0.9*0.8*0.5
    p1 = (1 * 0.9 * 0.2 + 2 * 0.9 * 0.8 * 0.5 + 3 * 0.9 * 0.8 * 0.5) / 3
    # p2: 2 reference steps, 4 response steps at 0.9: L >= 2 counts as 2 (the index cannot pass the reference)
    p2 = (1 * 0.9 * 0.1 + 2 * (0.9 ** 2)) / 2
    assert run.result.value == pytest.approx((p1 + p2) / 2)
    assert run.result.overall.n == 2 and run.result.overall.unscored == 1  # p3 has no reference solution
    by_response = compute(get_metric("last_correct_share"), run.records, {"normalize": "response"},
                          items={i.id: i for i in items_from_dicts(PW_ROWS)})
    e_l2 = 1 * 0.9 * 0.1 + 2 * 0.81 * 0.1 + 3 * 0.729 * 0.1 + 4 * 0.6561
    e_l3 = 1 * 0.7 * 0.8 + 2 * 0.7 * 0.2
    assert by_response.value == pytest.approx((p1 + e_l2 / 4 + e_l3 / 2) / 3)
    record = next(r for r in run.records if r["item_id"] == "p1")
    assert record["expected_last_correct"] == pytest.approx(p1 * 3)
    again = recipe_judge(recipe, MockBackend("puzzle", _never), store=store)  # type: ignore[arg-type]
    rerun = run_recipe(recipe, items_from_dicts(PW_ROWS), again, bootstrap=200)
    assert again.stats.model_calls == 0 and rerun.result.value == pytest.approx(run.result.value)
    again.close()


def test_puzzleworld_numbered_reference_steps() -> None:
    items = items_from_dicts([{**PW_ROWS[0], "reference": "1. Read the first letters.\nthen note them\n2) Shift."}])
    record = {"item_id": "p1", "response_id": "sysA", "last_correct": [0.0, 0.0, 0.0, 1.0]}
    numbered = compute(get_metric("last_correct_share"), [record], {"split": "numbered"},
                       items={"p1": items[0]})
    lines = compute(get_metric("last_correct_share"), [record], {}, items={"p1": items[0]})
    assert numbered.value == pytest.approx(1.0) and lines.value == pytest.approx(1.0)  # min(3, 2) / 2; 3 / 3
    one_short = {**record, "last_correct": [0.0, 0.0, 1.0, 0.0]}
    assert compute(get_metric("last_correct_share"), [one_short], {}, items={"p1": items[0]}).value == (
        pytest.approx(2 / 3))


# -- the real judge ------------------------------------------------------------------------------------------

@pytest.mark.model
@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed")
def test_livedrbench_end_to_end_on_the_small_judge(tmp_path: Path) -> None:
    """The real SmolLM2 judge on two items (entities, flights): every record scored, F1 in [0, 1], the
    subsets listed, a rerun makes no call."""
    rows = [DR_ROWS[0], DR_ROWS[1]]
    store = tmp_path / "s.sqlite"
    recipe = get_recipe("livedrbench")
    for expected in (3 * 2 + 3 * 1 + 2 * 1 + 2 * 2, 0):
        judge = recipe_judge(recipe, "llamacpp/smollm2-135m", store=store)
        try:
            run = run_recipe(recipe, items_from_dicts(rows), judge, bootstrap=100)
            calls = judge.stats.model_calls
        finally:
            judge.close()
        assert calls == expected
        assert run.result.overall.unscored == 0 and run.result.overall.n == 4
        assert 0.0 <= run.result.value <= 1.0 and set(run.result.groups) == {"entities", "flights"}
        for r in run.records:
            for row in r["matching"]["p_match"]:
                assert all(0.0 <= p <= 1.0 for p in row)
