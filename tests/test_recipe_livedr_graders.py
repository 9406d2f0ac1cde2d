"""LiveDRBench's prior-art and entities graders and its list-of-dicts row matching (issue 35), as
src/evals/priorart.py, entities.py and datasets_flights.py compute them: each number by hand from a P(match)
matrix, and the reader giving the items those graders need, on rows written here in the dataset's schema."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trustjudge import InputError, MockBackend, items_from_dicts
from trustjudge.backends import LabelRequest
from trustjudge.cli import cli
from trustjudge.recipes import get_metric, get_recipe, load_recipe, recipe_judge, run_recipe
from trustjudge.recipes._readers import read
from trustjudge.recipes._recipe import with_benchmark_dir


def _record(gold: list[str], claims: list[str], matrix: list[list[float]], **fields: Any) -> dict[str, Any]:
    item = items_from_dicts([{"id": "k", "question": "?", "gold_claims": gold, **fields,
                              "responses": [{"id": "s", "text": "x", "claims": [{"text": c} for c in claims]}]}])[0]
    return {"item_id": "k", "response_id": "s", "claims": [{"text": c} for c in claims],
            "matching": {"gold": len(gold), "predicted": len(claims), "p_match": matrix}, "item": item}


MATRIX = [[0.9, 0.8, 0.1],   # gold 0: matched by predictions 0 and 1
          [0.2, 0.3, 0.1],   # gold 1: by none
          [0.1, 0.2, 0.7]]   # gold 2: by prediction 2


@pytest.mark.parametrize("category", ["prior-art", "entities"])
def test_prior_art_and_entities_remove_each_gold_text_once_found(category: str) -> None:
    metric = get_metric("livedr")
    record = _record(["G0", "G1", "G2"], ["p0", "p1", "p2"], MATRIX, subset=category)
    hard = {**metric.params, "hard": True}
    # p0 takes G0 (removed); p1 finds G1 0.3 and G2 0.2 left: no match; p2 takes G2 -> 2 of 3 each way
    assert metric.value(record, {**hard, "value": "precision"}) == pytest.approx(2 / 3)
    assert metric.value(record, {**hard, "value": "recall"}) == pytest.approx(2 / 3)
    # (any-match would count p1 too: it matches G0 at 0.8, precision 3/3)
    assert get_metric("livedr").value(_record(["G0", "G1", "G2"], ["p0", "p1", "p2"], MATRIX, subset="scifacts-x"),
                                      {**hard, "value": "precision"}) == pytest.approx(1.0)
    # soft: 0.9 + max(0.3, 0.2) + max(0.1, 0.7), the hard pass's removals kept
    assert metric.value(record, {**hard, "hard": False, "value": "recall"}) == pytest.approx((0.9 + 0.3 + 0.7) / 3)
    assert metric.value(_record(["G0"], [], [[]], subset=category), hard) == 0.0


def test_novel_datasets_rows_are_matched_on_primary_keys_ignored_keys_left_out() -> None:
    metric = get_metric("livedr")
    gold = ["name: D1", "size: 10k", "lang: cy", "name: D2", "size: 5k", "lang: en"]
    claims = ["name: D2", "size: 5k", "name: D1", "size: 9k", "name: D3", "size: 1k"]
    matrix = [[0.0] * 6 for _ in gold]
    matrix[3][0], matrix[4][1], matrix[0][2], matrix[1][3], matrix[0][4] = 0.9, 0.8, 0.7, 0.4, 0.2
    fields = {"subset": "novel-datasets-x", "gold_row": "r0.0,r0.0,r0.0,r0.1,r0.1,r0.1",
              "claim_row": "r0.0,r0.0,r0.1,r0.1,r0.2,r0.2", "primary_keys": "name", "ignore_keys": "lang",
              "main_claims": "name"}
    record = _record(gold, claims, matrix, **fields)
    hard = {**metric.params, "hard": True}
    # predicted row 0 (D2) corresponds to gold row 1 by its name (0.9): name and size count (lang ignored);
    # predicted row 1 (D1) to gold row 0 (0.7): its name counts, its size not (0.4); row 2 (D3): no row left
    # counted 3, of 6 predicted keys and 4 gold keys (lang ignored)
    assert metric.value(record, {**hard, "value": "precision"}) == pytest.approx(3 / 6)
    assert metric.value(record, {**hard, "value": "recall"}) == pytest.approx(3 / 4)
    # soft: 0.9 x (1 + 0.8) + 0.7 x (1 + 0.4): each row's main key gates its row
    assert metric.value(record, {**hard, "hard": False, "value": "recall"}) == pytest.approx(
        (0.9 * 1.8 + 0.7 * 1.4) / 4)
    matrix[3][0] = 0.3  # D2's name no longer matches: predicted row 0 corresponds to no row; row 1 to gold row 0
    assert metric.value(_record(gold, claims, matrix, **fields), {**hard, "value": "recall"}) == pytest.approx(1 / 4)
    assert metric.value(_record(gold, claims, matrix, **{**fields, "claim_row": "r0.0"}), hard) is None


def _row(key: str, category: str, gts: Any, info: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "category": category, "question": "?", "ground_truths": gts, "eval_info": info}


def test_the_reader_gives_titles_strings_and_rows(tmp_path: Path) -> None:
    data = {"rows": [_row("p", "prior-art", [[{"title": "Patent A", "year": 2001}, {"title": "Paper B"}]], {}),
                     _row("e", "entities", [["Ada Lovelace", "Alan Turing"]], {}),
                     _row("d", "novel-datasets-x", [[{"name": "D1", "size": "10k"}, {"name": "D2", "size": "5k"}]],
                          {"primary_keys": ["name"], "ignore_keys": ["url"], "main_claims": ["name"]})],
            "preds": [{"key": "p", "preds": [[{"title": "Patent A"}]]}, {"key": "e", "preds": [["A. Turing"]]},
                      {"key": "d", "preds": [[{"name": "D2", "size": "5k"}]]}]}
    path = tmp_path / "livedr.json"
    path.write_text(json.dumps(data))
    prior, entities, datasets = read(path, "livedrbench")
    assert prior.gold_claims == ("Patent A", "Paper B") and [c.text for c in prior.responses[0].claims or ()] == [
        "Patent A"]
    assert entities.gold_claims == ("Ada Lovelace", "Alan Turing")
    assert datasets.gold_claims == ("name: D1", "size: 10k", "name: D2", "size: 5k")
    assert datasets.fields["gold_row"] == "r0.0,r0.0,r0.1,r0.1" and datasets.fields["claim_row"] == "r0.0,r0.0"
    assert datasets.fields["primary_keys"] == "name" and datasets.fields["ignore_keys"] == "url"
    data["rows"][0]["ground_truths"] = [["Patent A"]]
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as info:
        read(path, "livedrbench")
    assert (info.value.file, info.value.line, info.value.field) == (str(path), 1, "ground_truths")


# -- flights and novel datasets graded 0-3 per key, binarised as datasets_flights.py does ------------------

FLIGHTS = '''prompts = {
    'dict': """
STAND-IN dict grader: {dict_gt} against {dict_pred}, each key 0 to 3, as JSON.
""",
}
'''
SCIFACTS = '''prompts = {
    "EM": """STAND-IN equivalence: are the two the same?""",
}
'''
GRADES = {("flight: XY123", "flight: XY123"): {"3": 0.6, "2": 0.1, "1": 0.3},
          ("date: 4 June 2023", "date: 5 June"): {"3": 0.3, "2": 0.3, "1": 0.4}}  # argmax 1, though P(>= 2) 0.6
ITEMS = [{"id": "f", "question": "Which flight?", "subset": "flights", "main_claims": "flight",
          "gold_claims": ["flight: XY123", "date: 4 June 2023"],
          "responses": [{"id": "s", "text": "x", "claims": [{"text": "flight: XY123"}, {"text": "date: 5 June"}]}]},
         {"id": "g", "question": "Which paper?", "subset": "scifacts-geo", "gold_claims": ["Paper A"],
          "responses": [{"id": "s", "text": "x", "claims": [{"text": "Title A"}]}]}]


def _checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "livedrbench"
    (repo / "src" / "evals").mkdir(parents=True, exist_ok=True)
    (repo / "src" / "evals" / "datasets_flights.py").write_text(FLIGHTS)
    (repo / "src" / "evals" / "scifacts.py").write_text(SCIFACTS)
    return repo


def _graded(seen: list[str]) -> MockBackend:
    def script(req: LabelRequest) -> list[float]:
        seen.append(req.prompt)
        names = [lab.rstrip("]").strip() for lab in req.labels]
        if "YES" in names:
            return [0.8 if n == "YES" else 0.2 for n in names]
        found = re.search(r"grader: (.*) against (.*), each key", req.prompt) or re.search(
            r"<golden_claim>\n(.*)\n</golden_claim>\n\n<predicted_claim>\n(.*)\n</predicted_claim>", req.prompt)
        assert found is not None, req.prompt
        grades = GRADES.get((found.group(1), found.group(2)), {"0": 1.0})
        return [grades.get(n, 0.0) for n in names]
    return MockBackend("graded", script)


def test_flights_keys_are_graded_0_to_3_on_the_benchmark_prompt_binarised_by_the_most_probable_grade(
        tmp_path: Path) -> None:
    recipe = get_recipe("livedrbench")
    assert recipe.groups["keyed"]["options"]["match_labels"] == "3=1,2=1,1=0,0=0"
    with pytest.raises(InputError, match="its group 'keyed'") as info:
        with_benchmark_dir(recipe, _checkout(tmp_path))
    assert recipe.groups["keyed"]["benchmark"]["sha256"] in str(info.value)
    used = with_benchmark_dir(recipe, _checkout(tmp_path), allow_changed=True)
    seen: list[str] = []
    judge = recipe_judge(used, _graded(seen), store=tmp_path / "s.sqlite")
    run = run_recipe(used, items_from_dicts(ITEMS), judge, bootstrap=0)
    judge.close()
    graded = [p for p in seen if "STAND-IN dict grader" in p]
    assert len(graded) == 4 and all('"Answer: [3]" or "Answer: [2]"' in p for p in graded)  # 2 gold x 2 claims
    assert "STAND-IN dict grader: <golden_claim>" not in graded[0] and "flight: XY123 against" in "".join(graded)
    assert sum("STAND-IN equivalence" in p for p in seen) == 1  # scifacts: the EM prompt, YES/NO
    by_item = {r["item_id"]: r for r in run.records}
    assert by_item["f"]["prompt"]["group"] == "keyed" and by_item["f"]["prompt"]["matches_recipe"] is False
    assert by_item["f"]["matching"]["hard_match"] == [[1.0, 0.0], [0.0, 0.0]]
    assert by_item["f"]["matching"]["p_match"][1][1] == pytest.approx(0.6)
    # hard (published): the flight counts (argmax 3), the date not (argmax 1): P = R = 1/2 -> F1 1/2; the
    # scifacts item: its one prediction matches (0.8): F1 1. Mean over the two responses
    assert run.result.value == pytest.approx((0.5 + 1.0) / 2)
    # soft: the gate P(flight >= 2) = 0.7, x (1 + P(date >= 2) = 0.6), over 2 keys each way: 0.56; scifacts 0.8
    assert run.readings["soft"].value == pytest.approx((0.7 * 1.6 / 2 + 0.8) / 2)
    assert run.result.groups["flights"].value == pytest.approx(0.5)


def test_a_group_prompt_with_the_recipe_s_hash_is_used_as_it_is(tmp_path: Path) -> None:
    shipped = get_recipe("livedrbench").path
    assert shipped is not None
    folder = tmp_path / "recipe"
    folder.mkdir()
    for name in ("match.txt", "grade.txt"):
        (folder / name).write_text((shipped.parent / name).read_text())
    text = shipped.read_text()
    for original, mine in (("eb9b52c3c8d3de544b04c1dc173eb7f078b72abe8f3bbe17924cd211e013aa5e", FLIGHTS),
                           ("ee88d2c1b8378d46a4b6035c69bf0c089b8d0d12f4778282240b6a836bcda610", SCIFACTS)):
        text = text.replace(original, hashlib.sha256(mine.encode()).hexdigest())
    (folder / "recipe.toml").write_text(text)
    used = with_benchmark_dir(load_recipe(folder), _checkout(tmp_path))
    assert used.group_prompts["keyed"]["matches_recipe"] is True
    assert used.groups["keyed"]["options"]["templates"]["match"].startswith(
        "STAND-IN dict grader: ${gold} against ${claim}")


def test_without_a_checkout_the_keys_are_graded_on_our_own_prompt(tmp_path: Path) -> None:
    recipe = get_recipe("livedrbench")
    seen: list[str] = []
    judge = recipe_judge(recipe, _graded(seen), store=tmp_path / "s.sqlite")
    run = run_recipe(recipe, items_from_dicts(ITEMS[:1]), judge, bootstrap=0)
    judge.close()
    assert all("Give the grade of the predicted value" in p for p in seen) and len(seen) == 4
    assert run.records[0]["prompt"] == {"source": "recipe", "files": {"match": "grade.txt"}, "group": "keyed"}
    assert run.result.value == pytest.approx(0.5)


def test_match_labels_without_values_are_refused(tmp_path: Path) -> None:
    (tmp_path / "recipe.toml").write_text(
        'name = "r"\nversion = "1"\nbenchmark = "b"\nsource = "s"\nmode = "claims"\n'
        '[options]\nmatch = true\nverify = false\nmatch_labels = "3,2,1,0"\n[metric]\nname = "livedr"\n')
    with pytest.raises(InputError, match="match_labels must give each label its value") as info:
        load_recipe(tmp_path)
    assert info.value.file == str(tmp_path / "recipe.toml")


def test_the_recipes_listing_names_the_group_s_template() -> None:
    result = CliRunner().invoke(cli, ["recipes"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "subset=keyed.match=grade.txt" in result.output


@pytest.mark.parametrize("table, field", [
    ('[groups]\nby = "subset"\n[groups.k]\nvalues = []\n', "groups.k.values"),
    ('[groups]\nby = "subset"\n[groups.k]\nvalues = ["x"]\nother = 1\n', "groups.k.other"),
    ('[groups]\nby = "subset"\n[groups.k]\nvalues = ["x"]\noptions = { nothing = 1 }\n', "groups.k.options.nothing"),
    ('[groups]\nby = "subset"\n[groups.k]\nvalues = ["x"]\n[groups.k.benchmark]\nkind = "match"\nfile = "a.py"\n'
     'sha256 = "00"\nlayout = "${benchmark_prompt}"\n', "groups.k.benchmark.sha256"),
    ('[groups]\nby = "sub set"\n', "groups.by"),
])
def test_a_bad_groups_table_is_refused_naming_its_field(tmp_path: Path, table: str, field: str) -> None:
    (tmp_path / "recipe.toml").write_text(
        'name = "r"\nversion = "1"\nbenchmark = "b"\nsource = "s"\nmode = "claims"\n'
        '[options]\nmatch = true\nverify = false\n[metric]\nname = "livedr"\n' + table)
    with pytest.raises(InputError) as info:
        load_recipe(tmp_path)
    assert info.value.field == field and info.value.file == str(tmp_path / "recipe.toml")
