"""Recipes that reproduce their benchmark (issue 35): readers of the released formats, the benchmark's own prompt
from a checkout with its hash checked, the benchmarks' formulas by hand, hard and soft readings, provenance; and
the recipe's required fields (issue 39) and template paths kept inside the recipe's folder (issue 38 H4)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trustjudge import InputError, MockBackend, items_from_dicts
from trustjudge.backends import LabelRequest
from trustjudge.cli import cli
from trustjudge.recipes import builtin_recipes, compute, get_metric, get_recipe, load_recipe, recipe_judge, run_recipe
from trustjudge.recipes._prompt import load_benchmark_prompt
from trustjudge.recipes._readers import decrypt, detect, read
from trustjudge.recipes._recipe import with_benchmark_prompt
from trustjudge.recipes._run import prepare_items, readings

from .conftest import write_jsonl

ROOT = Path(__file__).resolve().parents[1]
HEAD = 'name = "r"\nversion = "1"\nbenchmark = "b"\nsource = "s"\nmode = "checklist"\n'
CHECK = "Judge.\n${question}\n${response}\n${check}\n${task}\n"


def _yes(p: float) -> MockBackend:
    return MockBackend("yes", lambda req: [p if lab.startswith(("YES", "TRUE")) else 1 - p for lab in req.labels])


# -- issue 38 H4: a template must resolve inside the recipe's folder ---------------------------------------

@pytest.mark.parametrize("where", ["templates", "stage"])
def test_recipe_templates_cannot_escape_the_recipe_folder(tmp_path: Path, where: str) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET ${question} ${response} ${check} ${gold} ${claim}\n")
    folder = tmp_path / "recipe"
    folder.mkdir()
    (folder / "link.txt").symlink_to(secret)
    for name in ("../secret.txt", str(secret), "link.txt"):
        if where == "templates":
            text = HEAD + f'[templates]\ncheck = "{name}"\n[options]\nchecklist = [{{id = "a", text = "ok?"}}]\n' \
                          '[metric]\nname = "accuracy"\n'
            field = "templates.check"
        else:
            text = ('name = "r"\nversion = "1"\nbenchmark = "b"\nsource = "s"\nmode = "claims"\n[options]\n'
                    f'match = true\ntemplates = {{ match = "{name}" }}\n[metric]\nname = "claims"\n')
            field = "options.templates.match"
        (folder / "recipe.toml").write_text(text)
        with pytest.raises(InputError) as info:
            load_recipe(folder)
        assert info.value.field == field
        assert "absolute" in info.value.reason or "outside the recipe's folder" in info.value.reason


def test_recipes_lists_each_recipes_template_files() -> None:
    result = CliRunner().invoke(cli, ["recipes"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "check=equivalence.txt" in result.output and "match=match.txt" in result.output
    assert "P.generation=generate_two_level.txt" in result.output  # pqr's criteria generation prompt
    assert "(package defaults)" in result.output  # trustjudge-study reads no file of its own


# -- issue 39: a recipe refuses items lacking a field it judges against, before any call ------------------

def test_run_dit_on_items_without_a_reference_fails_clearly_before_any_call(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    result = CliRunner().invoke(cli, ["run", "dit", str(ROOT / "examples" / "items.jsonl"), "-j", "mock/hash",
                                      "--store", str(store), "-q"])
    assert result.exit_code != 0
    message = str(result.exception or "") + result.output
    assert "items.jsonl:1: field 'reference': is missing" in message and "recipe 'dit'" in message
    assert not store.exists()  # nothing was judged (the store was never opened)


@pytest.mark.parametrize("name, field", [("omnispatial", "reference"), ("sc-arena", "reference"),
                                         ("datamind", "reference"), ("livedrbench", "gold_claims"),
                                         ("puzzleworld", "reference"), ("pqr", "profile")])
def test_each_recipe_names_the_field_an_item_lacks(name: str, field: str) -> None:
    items = items_from_dicts([{"id": "ok", "question": "q", "reference": "r", "gold_claims": ["g"], "profile": "p",
                               "responses": [{"id": "a", "text": "t", "claims": [{"text": "c"}]}]},
                              {"id": "bare", "question": "q", "responses": [{"id": "a", "text": "t"}]}],
                             source="mine.jsonl")
    calls: list[Any] = []
    recipe = get_recipe(name)
    judge = recipe_judge(recipe, MockBackend("m", lambda req: calls.append(req) or [1.0] * len(req.labels)),
                         store=":memory:")
    with pytest.raises(InputError) as info:
        run_recipe(recipe, items, judge)
    judge.close()
    assert info.value.field == field and info.value.line == 2 and not calls


# -- run --map ----------------------------------------------------------------------------------------------

def test_run_takes_a_column_mapping(tmp_path: Path) -> None:
    rows = [{"uid": "q1", "prompt": "2+2?", "gt": "4", "output": "4"}, {"uid": "q2", "prompt": "3+3?", "gt": "6",
                                                                          "output": "five"}]
    path = write_jsonl(tmp_path / "other.jsonl", rows)
    out = tmp_path / "m.json"
    result = CliRunner().invoke(cli, ["run", "omnispatial", str(path), "-j", "mock/hash", "--map",
                                      "id=uid,question=prompt,reference=gt,response=output", "--json", str(out),
                                      "--store", str(tmp_path / "s.sqlite"), "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["result"]["n"] == 2
    bad = CliRunner().invoke(cli, ["run", "omnispatial", str(path), "-j", "mock/hash", "--map", "nonsense"])
    assert bad.exit_code != 0
    both = CliRunner().invoke(cli, ["run", "omnispatial", str(path), "-j", "mock/hash", "--format", "omnispatial",
                                    "--map", "question=prompt"])
    assert both.exit_code != 0 and "benchmark's own format" in both.output
    unknown = CliRunner().invoke(cli, ["run", "omnispatial", str(path), "-j", "mock/hash", "--format", "nope"])
    assert unknown.exit_code != 0 and "livedrbench" in unknown.output


# -- the benchmark's own prompt from a checkout, its sha256 checked ----------------------------------------

def _checkout(tmp_path: Path, text: str) -> tuple[Path, str]:
    repo = tmp_path / "bench"
    (repo / "src").mkdir(parents=True)
    source = (f'import os\n\nJUDGE = (\n    "You grade answers. Say TRUE or FALSE. "\n    "{text}"\n)\n'
              'OTHER = {"EM": "x"}\n')
    (repo / "src" / "prompts.py").write_text(source)
    return repo, hashlib.sha256(source.encode()).hexdigest()


def _bench_recipe(tmp_path: Path, sha: str) -> Path:
    (tmp_path / "check.txt").write_text(CHECK)
    path = tmp_path / "recipe.toml"
    path.write_text(HEAD + '[templates]\ncheck = "check.txt"\n[options]\nlabels = "TRUE=1,FALSE=0"\n'
                    'checklist = [{id = "ok", text = "Right?"}]\n[metric]\nname = "accuracy"\n'
                    '[benchmark_prompt]\nkind = "check"\nfile = "src/prompts.py"\nconstant = "JUDGE"\n'
                    f'sha256 = "{sha}"\ncommit = "abc"\nplaceholders = {{ answer = "reference" }}\n'
                    'layout = "${benchmark_prompt}\\nQ: ${question}\\nPred: ${response}\\n${check}\\n${task}"\n')
    return path


def test_the_benchmarks_prompt_is_read_from_the_checkout_and_the_records_say_so(tmp_path: Path) -> None:
    repo, sha = _checkout(tmp_path, "The gold answer is {answer}; cost $5.")
    recipe = load_recipe(_bench_recipe(tmp_path, sha))
    prompt = load_benchmark_prompt(recipe, repo)
    assert not prompt.changed and prompt.text.startswith("You grade answers. Say TRUE or FALSE. The gold answer is "
                                                         "${reference}; cost $$5.")
    seen: list[str] = []
    used = with_benchmark_prompt(recipe, prompt)
    judge = recipe_judge(used, MockBackend("m", lambda req: seen.append(req.prompt) or [0.8, 0.2]),
                         store=tmp_path / "s.sqlite")
    items = items_from_dicts([{"id": "q", "question": "2+2?", "reference": "4", "responses": [{"id": "a",
                                                                                                "text": "4"}]}])
    run = run_recipe(used, items, judge)
    judge.close()
    assert "The gold answer is 4; cost $5." in seen[0] and "Pred: 4" in seen[0]
    assert run.records[0]["prompt"]["source"] == "benchmark" and run.records[0]["prompt"]["matches_recipe"] is True
    assert run.to_dict()["prompt"]["sha256"] == sha


def test_a_changed_benchmark_prompt_file_is_said_not_silently_used(tmp_path: Path) -> None:
    repo, sha = _checkout(tmp_path, "Original.")
    recipe = load_recipe(_bench_recipe(tmp_path, sha))
    (repo / "src" / "prompts.py").write_text((repo / "src" / "prompts.py").read_text().replace("Original", "Edited"))
    with pytest.raises(InputError, match="not the one recipe 'r' was written for at commit abc"):
        load_benchmark_prompt(recipe, repo)
    changed = load_benchmark_prompt(recipe, repo, allow_changed=True)
    assert changed.changed and with_benchmark_prompt(recipe, changed).prompt_used()["matches_recipe"] is False
    items = write_jsonl(tmp_path / "i.jsonl", [{"id": "q", "question": "?", "reference": "r",
                                                 "responses": [{"id": "a", "text": "t"}]}])
    args = ["run", str(tmp_path / "recipe.toml"), str(items), "-j", "mock/hash", "--benchmark-dir", str(repo),
            "--store", str(tmp_path / "s.sqlite")]
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code != 0 and "sha256" in str(refused.exception or refused.output)
    used = CliRunner().invoke(cli, [*args, "--allow-changed-prompt"])
    assert used.exit_code == 0, used.output
    assert "CHANGED from the recipe" in used.output


def test_shipped_recipes_name_their_benchmark_prompt_files() -> None:
    for name, file, constant in [("omnispatial", "system_prompts.py", "LLM_JUDGE_SYSTEM_PROMPT"),
                                 ("livedrbench", "src/evals/scifacts.py", "prompts.EM"),
                                 ("puzzleworld", "src/scorers.py", "GRADE_INSTRUCTION"),
                                 ("geoprivacy", "src/prompts.py", "GRANULARITY_JUDGE")]:
        spec = get_recipe(name).benchmark_prompt
        assert spec["file"] == file and spec["constant"] == constant and len(spec["sha256"]) == 64
    with pytest.raises(InputError, match="names no benchmark prompt"):
        load_benchmark_prompt(get_recipe("dit"), ROOT)


def test_a_shipped_recipe_refuses_a_project_written_file_of_the_same_name(tmp_path: Path) -> None:
    (tmp_path / "system_prompts.py").write_text('LLM_JUDGE_SYSTEM_PROMPT = "Say True or False."\n')
    with pytest.raises(InputError, match="a67f96e6"):
        load_benchmark_prompt(get_recipe("omnispatial"), tmp_path)
    prompt = load_benchmark_prompt(get_recipe("omnispatial"), tmp_path, allow_changed=True)
    assert prompt.text.startswith("Say True or False.\n\nQuestion: ${question}\nPred: ${response}\nGT: ${reference}")
    with_benchmark_prompt(get_recipe("omnispatial"), prompt)  # a valid check template


# -- the benchmarks' formulas, by hand -----------------------------------------------------------------------

def _checks(*ps: float) -> dict[str, Any]:
    return {"item_id": "p", "response_id": "a", "checks": [{"id": f"step{i}", "p_pass": p} for i, p in
                                                          enumerate(ps, 1)]}


def test_puzzleworld_last_true_reference_step_over_n() -> None:
    metric = get_metric("last_true_share")
    # verdicts T F T F: the last True is step 3 of 4, wherever the first False is
    assert metric.value(_checks(0.9, 0.1, 0.8, 0.2), {"hard": True}) == pytest.approx(3 / 4)
    assert metric.value(_checks(0.2, 0.3), {"hard": True}) == 0.0
    # soft: P(last = 2) = 0.5, P(last = 1) = 0.8 x 0.5 = 0.4 -> E = (2 x 0.5 + 1 x 0.4) / 2
    assert metric.value(_checks(0.8, 0.5), {"hard": False}) == pytest.approx((2 * 0.5 + 0.4) / 2)
    items = prepare_items(get_recipe("puzzleworld"), items_from_dicts([{
        "id": "p", "question": "?", "reference": "Read the clue.\nShift by 3.\nAnswer CAT.",
        "responses": [{"id": "a", "text": "..."}]}]))
    assert [c.id for c in items[0].checklist] == ["step1", "step2", "step3"]
    assert "Shift by 3." in items[0].checklist[1].text


def test_puzzleworld_recipe_end_to_end_hard_first_then_soft(tmp_path: Path) -> None:
    def script(req: LabelRequest) -> list[float]:
        p = 0.9 if "Step 1:" in req.prompt else 0.4 if "Step 2:" in req.prompt else 0.7
        return [p if lab.startswith("TRUE") else 1 - p for lab in req.labels]

    recipe = get_recipe("puzzleworld")
    judge = recipe_judge(recipe, MockBackend("pw", script), store=tmp_path / "s.sqlite")
    items = items_from_dicts([{"id": "p", "question": "?", "reference": "a\nb\nc",
                               "responses": [{"id": "m", "text": "my reasoning"}]}])
    run = run_recipe(recipe, items, judge, bootstrap=0)
    judge.close()
    assert list(run.readings) == ["hard", "soft"]
    assert run.result.value == pytest.approx(3 / 3)  # T F T: the last True is step 3
    e = 3 * 0.7 + 2 * 0.4 * 0.3 + 1 * 0.9 * 0.6 * 0.3
    assert run.readings["soft"].value == pytest.approx(e / 3)


def _dr(gold: list[str], claims: list[str], matrix: list[list[float]], **fields: Any) -> tuple[dict[str, Any], Any]:
    item = items_from_dicts([{"id": "k", "question": "?", "gold_claims": gold, **fields,
                              "responses": [{"id": "s", "text": "x", "claims": [{"text": c} for c in claims]}]}])[0]
    record = {"item_id": "k", "response_id": "s", "claims": [{"text": c} for c in claims],
              "matching": {"gold": len(gold), "predicted": len(claims), "p_match": matrix}, "item": item}
    return record, item


def test_livedrbench_scifacts_any_match_over_equivalence_classes() -> None:
    metric = get_metric("livedr")
    # two classes: {A, A'} and {B}; predictions: p1 matches A' (0.9), p2 matches nothing, p3 matches A (0.8)
    record, _ = _dr(["A", "A'", "B"], ["p1", "p2", "p3"], [[0.1, 0.2, 0.8], [0.9, 0.1, 0.3], [0.2, 0.3, 0.1]],
                    subset="scifacts-geo", gold_class="0,0,1")
    params = {**metric.params, "hard": True}
    # precision: p1 and p3 each match some gold text -> 2/3 (any-match: both count, unlike one-to-one);
    # recall: class 0 found, class 1 not -> 1/2; F1 = 2 x (2/3 x 1/2) / (2/3 + 1/2)
    assert metric.value(record, {**params, "value": "precision"}) == pytest.approx(2 / 3)
    assert metric.value(record, {**params, "value": "recall"}) == pytest.approx(1 / 2)
    assert metric.value(record, params) == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    # soft: P(p2 matches any) = 1 - 0.9 x 0.9 x 0.7
    soft = {**params, "hard": False, "value": "precision"}
    p1, p2, p3 = 1 - 0.9 * 0.1 * 0.8, 1 - 0.8 * 0.9 * 0.7, 1 - 0.2 * 0.7 * 0.9
    assert metric.value(record, soft) == pytest.approx((p1 + p2 + p3) / 3)
    # identical texts match without the judge, as the benchmark's code has it
    same, _ = _dr(["Exact Title"], ["exact title "], [[0.0]], subset="scifacts-geo")
    assert metric.value(same, params) == pytest.approx(1.0)


def test_livedrbench_materials_is_f1_material_times_f1_title() -> None:
    metric = get_metric("livedr")
    gold = ["material: NaXO2", "paper_title: Paper One", "material: LiCoO2", "paper_title: Paper Two"]
    claims = ["material: NaXO2", "paper_title: Wrong Paper"]
    matrix = [[0.0, 0.0], [0.0, 0.2], [0.0, 0.0], [0.0, 0.1]]
    record, _ = _dr(gold, claims, matrix, subset="scifacts-materials", gold_class="0,1,2,3")
    # materials: P 1/1, R 1/2 -> F1 2/3; titles: nothing matched -> F1 0; product 0
    assert metric.value(record, {**metric.params}) == 0.0
    matrix[1][1] = 0.9  # now the title matches Paper One: titles P 1, R 1/2, F1 2/3 -> product 4/9
    assert metric.value(record, {**metric.params}) == pytest.approx((2 / 3) * (2 / 3))
    assert metric.value(record, {**metric.params, "value": "recall"}) == pytest.approx(0.25)


def test_livedrbench_flights_binarised_behind_the_main_claim_gate() -> None:
    metric = get_metric("livedr")
    gold = ["flight: XY123", "date: 4 June 2023", "airport: LHR"]
    claims = ["flight: XY123", "date: 4 June 2023", "airport: CDG", "cause: bird"]
    matrix = [[0.9, 0, 0, 0], [0, 0.8, 0, 0], [0, 0, 0.3, 0]]
    record, _ = _dr(gold, claims, matrix, subset="flights", main_claims="flight")
    # flight and date count, airport not (grade <= 1): precision 2/4, recall 2/3
    assert metric.value(record, {**metric.params, "value": "precision"}) == pytest.approx(2 / 4)
    assert metric.value(record, {**metric.params, "value": "recall"}) == pytest.approx(2 / 3)
    matrix[0][0] = 0.4  # the identification (main) claim fails: everything is zero
    assert metric.value(record, {**metric.params, "value": "recall"}) == 0.0
    # soft: P(gate) x (1 + 0.8 + 0.3) over the 3 gold keys
    assert metric.value(record, {**metric.params, "value": "recall", "hard": False}) == pytest.approx(
        0.4 * (1 + 0.8 + 0.3) / 3)


@pytest.mark.parametrize("recipe_name, fill", [("dit", 1.0), ("sc-arena", 0.0)])
def test_unparsed_answers_the_benchmarks_convention_beside_ours(recipe_name: str, fill: float) -> None:
    recipe = get_recipe(recipe_name)
    assert recipe.metric_params["unparsed"] == fill
    records = [{"item_id": "a", "response_id": "x", "scores": {"discrete": 4.0, "expected": 3.5}},
               {"item_id": "b", "response_id": "x", "scores": {"discrete": 2.0, "expected": 2.5}},
               {"item_id": "c", "response_id": "x", "unscored": "no_label_mass"}]
    result = compute(get_metric("mean_score"), records, recipe.metric_params, bootstrap=0)
    out = readings("mean_score", recipe.metric_params, records, result, {}, bootstrap=0, seed=0)
    factor = recipe.metric_params["factor"]
    assert list(out) == ["hard", "soft", f"convention (unparsed = {fill:g})"]
    assert out["hard"].value == pytest.approx(3.0 * factor) and out["hard"].overall.unscored == 1  # ours
    assert out["soft"].value == pytest.approx(3.0 * factor)
    conv = out[f"convention (unparsed = {fill:g})"]
    assert conv.value == pytest.approx((4.0 + 2.0 + fill) * factor / 3) and conv.overall.unscored == 0


# -- readers of the released formats, on files written in their published schemas --------------------------

def test_omnispatial_data_json_is_read_and_detected(tmp_path: Path) -> None:
    rows = [{"id": "0_0", "question": "How long?", "options": ["2.7s", "14.7s"], "answer": 1,
             "task_type": "Dynamic_Reasoning", "sub_task_type": "Motion_Analysis", "response": "B"},
            {"id": "0_1", "question": "Which side?", "options": ["left", "right"], "answer": 0,
             "task_type": "Complex_Logic", "sub_task_type": "Pattern_Recognition",
             "responses": {"gpt": "A", "llava": "right"}}]
    path = tmp_path / "data.json"
    path.write_text(json.dumps(rows))
    assert detect(path, "omnispatial") and not detect(path, "puzzleworld")
    items = read(path, "omnispatial")
    assert items[0].reference == "B. 14.7s" and "A. 2.7s\nB. 14.7s" in items[0].question
    assert items[0].fields["subset"] == "Dynamic_Reasoning" and [r.id for r in items[1].responses] == ["gpt", "llava"]
    out = tmp_path / "m.json"
    result = CliRunner().invoke(cli, ["run", "omnispatial", str(path), "-j", "mock/hash", "--json", str(out), "-q",
                                      "--store", str(tmp_path / "s.sqlite")])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["result"]["n"] == 3
    path.write_text(json.dumps([{**rows[0], "answer": 5}]))
    with pytest.raises(InputError) as info:
        read(path, "omnispatial")
    assert info.value.field == "answer" and info.value.line == 1


def test_sc_arena_scienceqa_file_is_read(tmp_path: Path) -> None:
    papers = [{"PMID": "p1", "title": "T", "abstract": "Abs.", "response": [
        {"type": "Pathway Logic", "question": "Why?", "answer": "Because.", "relevant_passage": "Fig. 2 shows it.",
         "model_answer": "I reason at length. [Answer: Because] Done."}]}]
    path = tmp_path / "ScientificQA_final.json"
    path.write_text(json.dumps(papers))
    assert detect(path, "sc-arena-scienceqa")
    item = read(path, "sc-arena-scienceqa")[0]
    assert item.reference == "Because." and item.fields["subset"] == "Pathway Logic"
    assert item.context == ("Question type: Pathway Logic\n\nReference paper title: T\n\nReference paper abstract: "
                            "Abs.\n\nRelevant passage: Fig. 2 shows it.")
    assert item.responses[0].text.startswith("I reason at length.")  # read as released; the recipe extracts:
    judge = recipe_judge(get_recipe("sc-arena"), "mock/hash", store=":memory:")
    run = run_recipe(get_recipe("sc-arena"), [item], judge, bootstrap=0)
    judge.close()
    assert run.records[0]["answer"] == {"sent": "Because", "found": "marker", "by": "task=scienceqa"}


def test_livedrbench_rows_and_predictions_are_read(tmp_path: Path) -> None:
    canary = "canary-xyz"
    truth = json.dumps([[{"paper_title": ["Paper A", "A paper"]}, {"paper_title": ["Paper B"]}]])
    key = (hashlib.sha256(canary.encode()).digest() * 10)[:len(truth.encode())]
    cipher = base64.b64encode(bytes(a ^ b for a, b in zip(truth.encode(), key))).decode()
    assert decrypt(cipher, canary) == truth
    misc = json.dumps({"eval_info": {}})
    mkey = (hashlib.sha256(canary.encode()).digest() * 10)[:len(misc.encode())]
    misc_cipher = base64.b64encode(bytes(a ^ b for a, b in zip(misc.encode(), mkey))).decode()
    data = {"rows": [{"key": "g1", "category": "scifacts-geo", "question": "Find papers.",  # as released
                      "ground_truths": cipher, "misc": misc_cipher, "canary": canary},
                     {"key": "f1", "category": "flights", "question": "Which flight?",
                      "ground_truths": [{"flight": "XY123", "date": "4 June 2023"}],
                      "eval_info": {"main_claims": ["flight"]}}],
            "preds": [{"key": "g1", "preds": [[{"paper_title": "Paper A"}]]},
                      {"key": "f1", "preds": [{"flight": "XY123", "date": "5 June"}]}]}
    path = tmp_path / "livedr.json"
    path.write_text(json.dumps(data))
    assert detect(path, "livedrbench")
    geo, flight = read(path, "livedrbench")
    assert geo.gold_claims == ("Paper A", "A paper", "Paper B") and geo.fields["gold_class"] == "0,0,1"
    assert [c.text for c in geo.responses[0].claims or ()] == ["Paper A"]
    assert flight.gold_claims == ("flight: XY123", "date: 4 June 2023") and flight.fields["main_claims"] == "flight"


def test_puzzleworld_annotations_are_read_one_check_per_reference_step(tmp_path: Path) -> None:
    rows = [{"title": "Cats", "flavor_text": "Meow.", "reasoning": ["Read the clue.", "Shift by 3."],
             "solution": "CAT", "raw_output": "I shifted and got CAT."}]
    path = write_jsonl(tmp_path / "pw.jsonl", rows)
    assert detect(path, "puzzleworld")
    items = prepare_items(get_recipe("puzzleworld"), read(path, "puzzleworld"))
    assert items[0].context == "CAT" and len(items[0].checklist) == 2 and "Cats" in items[0].question


def test_puzzleworld_released_steps_are_objects_with_an_explanation(tmp_path: Path) -> None:
    """The released puzzles' reasoning is a list of Step objects (src/data_loading.py: explanation, figure): the
    explanation is the step, never the object's printed form; a step without one is refused naming it."""
    rows = [{"title": "Cats", "flavor_text": "Meow.", "solution": "CAT", "raw_output": "I got CAT.",
             "reasoning": [{"explanation": "Read the\nclue.", "figure": None},
                           {"explanation": "Shift by 3.", "figure": "step2.png"}]}]
    items = prepare_items(get_recipe("puzzleworld"), read(write_jsonl(tmp_path / "pw.jsonl", rows), "puzzleworld"))
    assert items[0].reference == "Read the clue.\nShift by 3."
    assert "Read the clue." in items[0].checklist[0].text and "explanation" not in items[0].checklist[0].text
    bad = write_jsonl(tmp_path / "bad.jsonl", [{**rows[0], "reasoning": [{"figure": "x.png"}]}])
    with pytest.raises(InputError, match=r"reasoning\[0\]"):
        read(bad, "puzzleworld")


def test_puzzleworld_the_last_reference_step_asks_for_the_final_answer(tmp_path: Path) -> None:
    """As PuzzleWorld's scorer asks each step in its own call (src/scorers.py check_answer_async: one
    parse_stepwise_completion per step), the last one asking whether the candidate gives the reference's final
    answer (judge_utils.py make_step_prompt), not whether it includes the step."""
    rows = [{"title": "Cats", "flavor_text": "Meow.", "solution": "CAT", "raw_output": "I got DOG.",
             "reasoning": ["Read the clue.", "Shift by 3.", "The answer is CAT."]}]
    (item,) = prepare_items(get_recipe("puzzleworld"), read(write_jsonl(tmp_path / "pw.jsonl", rows),
                                                           "puzzleworld"))
    first, second, last = (c.text for c in item.checklist)
    assert "include reference step 1" in first and "include reference step 2" in second
    assert "final answer" in last and '"CAT"' in last and "The answer is CAT." in last
    assert "include reference step" not in last
    seen: list[str] = []
    recipe = get_recipe("puzzleworld")
    judge = recipe_judge(recipe, MockBackend("pw", lambda req: seen.append(req.prompt) or [0.9, 0.1]),
                         store=tmp_path / "s.sqlite")
    run = run_recipe(recipe, [item], judge, bootstrap=0)
    judge.close()
    assert len(seen) == 3 and sum("final answer" in s for s in seen) == 1  # one call per step, as the scorer
    assert run.result.value == 1.0


# -- provenance ----------------------------------------------------------------------------------------------

def test_every_recipe_cites_its_sources_not_an_issue() -> None:
    for name, path in builtin_recipes().items():
        text = path.read_text()
        assert "issue 24" not in text, name
        recipe = get_recipe(name)
        if name != "trustjudge-study":
            assert recipe.provenance, name
            assert "commit" in recipe.provenance or "notes" in recipe.provenance, name
        if recipe.benchmark_prompt:
            assert recipe.benchmark_prompt["commit"] == recipe.provenance["commit"], name


def test_sc_arena_judges_each_task_on_its_own_rubric(tmp_path: Path) -> None:
    seen: dict[str, str] = {}

    def script(req: LabelRequest) -> list[float]:
        body = req.prompt[req.prompt.rfind("<response>"):]
        seen[body.split("\n")[1]] = req.prompt
        return [1.0 if lab.startswith("3") else 0.0 for lab in req.labels]

    recipe = get_recipe("sc-arena")
    items = items_from_dicts([
        {"id": "c", "question": "Which cell type?", "reference": "CD4+ T cell", "task": "celltype",
         "responses": [{"id": "m", "text": "I think [Predicted_Cell_Type: a T cell]"}]},
        {"id": "q", "question": "Why?", "reference": "Because.", "task": "scienceqa",
         "responses": [{"id": "m", "text": "No idea"}]}])
    judge = recipe_judge(recipe, MockBackend("sc", script), store=tmp_path / "s.sqlite")
    run = run_recipe(recipe, items, judge, bootstrap=0)
    judge.close()
    assert "Cell Ontology" in seen["a T cell"] and "Cell Ontology" not in seen["No idea"]
    assert "the reference answer and the context" in seen["No idea"]  # grounded.txt, the scienceqa rubric
    by_item = {r["item_id"]: r["prompt"] for r in run.records}
    assert by_item["c"]["rubric"] == "task=celltype (celltype.txt)" and "rubric" not in by_item["q"]
    assert run.result.value == pytest.approx(0.2 * 3)


def test_a_rubric_file_must_stay_in_the_recipe_folder(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "out.txt").write_text("${question} ${response}")
    (tmp_path / "r" / "recipe.toml").write_text(
        'name = "r"\nversion = "1"\nbenchmark = "b"\nsource = "s"\nmode = "score"\n[metric]\nname = "mean_score"\n'
        '[rubrics]\nby = "task"\nfiles = { a = "../out.txt" }\n')
    with pytest.raises(InputError) as info:
        load_recipe(tmp_path / "r")
    assert info.value.field == "rubrics.files.a"


def test_a_required_response_field_is_named_with_the_response(tmp_path: Path) -> None:
    (tmp_path / "recipe.toml").write_text(
        'name = "r"\nversion = "1"\nbenchmark = "b"\nsource = "s"\nmode = "claims"\nrequires = ["responses.claims"]\n'
        '[metric]\nname = "claims"\n')
    recipe = load_recipe(tmp_path)
    items = items_from_dicts([{"id": "q", "question": "?", "responses": [
        {"id": "a", "text": "t", "claims": [{"text": "c"}]}, {"id": "b", "text": "u"}]}], source="x.jsonl")
    with pytest.raises(InputError) as info:
        recipe.check_items(items, "x.jsonl")
    assert info.value.field == "responses[1].claims" and info.value.line == 1
    (tmp_path / "recipe.toml").write_text((tmp_path / "recipe.toml").read_text().replace(
        '"responses.claims"', '"responses.nonsense"'))
    with pytest.raises(InputError, match="names no response field"):
        load_recipe(tmp_path)


def test_geoprivacy_labels_and_responses_are_joined_by_image(tmp_path: Path) -> None:
    (tmp_path / "annotation_labels.csv").write_text("id,Q1,Q7\n101,C,B\n102,A,A\n")
    (tmp_path / "gpt.json").write_text(json.dumps([{"id": "101", "Q7-gen": "Paris, France.", "Q7-label": "B"},
                                                   {"id": "102", "Q7-gen": "Sorry, I cannot tell."}]))
    manifest = tmp_path / "run.json"
    manifest.write_text(json.dumps({"labels": "annotation_labels.csv",
                                    "responses": {"gpt": "gpt.json", "llama": [{"id": 101, "Q7-gen": "Europe"}]}}))
    assert detect(manifest, "geoprivacy")
    items = {i.id: i for i in read(manifest, "geoprivacy")}
    assert [r.system for r in items["101"].responses] == ["gpt", "llama"]
    assert items["101"].responses[1].human_criteria == {"disclosure": 1}
    assert items["102"].responses[0].human_criteria == {"disclosure": 0}
    (tmp_path / "annotation_labels.csv").write_text("id,Q7\n101,Z\n")
    with pytest.raises(InputError) as info:
        read(manifest, "geoprivacy")
    assert info.value.field == "Q7" and info.value.line == 2
