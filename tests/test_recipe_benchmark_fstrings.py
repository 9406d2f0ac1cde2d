"""A benchmark prompt that is an f-string inside a function (issue 35): DataMind's (DSGym's equivalence metric)
and SC-Arena's scienceqa rubric. The files here are project-written in the same shape (a class, a method, an
f-string with the benchmark's expressions), never the benchmarks' text."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from trustjudge import InputError, MockBackend, items_from_dicts
from trustjudge.recipes import get_recipe, load_recipe, recipe_judge, run_recipe
from trustjudge.recipes._prompt import load_benchmark_prompt
from trustjudge.recipes._recipe import with_benchmark_prompt

HEAD = 'name = "r"\nversion = "1"\nbenchmark = "b"\nsource = "s"\nmode = "checklist"\n'

GRADER = '''class Grader:
    def __init__(self, tolerance=0.05):
        self.tolerance = tolerance

    def prompt(self, query, pred, gold):
        note = "unused"
        return f"""Grade it.
            Q: {query}
            A: {pred} (costs $3)
            Gold: {gold}
            Tolerance {self.tolerance * 100}%, braces {{kept}}."""
'''


def _recipe(tmp_path: Path, sha: str, values: str = '{ "self.tolerance * 100" = "5.0" }') -> Path:
    (tmp_path / "check.txt").write_text("${question}\n${response}\n${check}\n${task}\n")
    path = tmp_path / "recipe.toml"
    path.write_text(HEAD + '[templates]\ncheck = "check.txt"\n[options]\nlabels = "YES=1,NO=0"\n'
                    'checklist = [{id = "ok", text = "Right?"}]\n[metric]\nname = "accuracy"\n'
                    '[benchmark_prompt]\nkind = "check"\nfile = "grade.py"\nfunction = "Grader.prompt"\n'
                    f'sha256 = "{sha}"\ncommit = "abc"\n'
                    'placeholders = { query = "question", pred = "response", gold = "reference" }\n'
                    f'values = {values}\nlayout = "${{benchmark_prompt}}\\n${{check}}\\n${{task}}"\n')
    return path


def _checkout(tmp_path: Path, source: str = GRADER) -> tuple[Path, str]:
    repo = tmp_path / "bench"
    repo.mkdir()
    (repo / "grade.py").write_text(source)
    return repo, hashlib.sha256(source.encode()).hexdigest()


def test_an_fstring_in_a_method_is_read_its_expressions_mapped_and_valued(tmp_path: Path) -> None:
    repo, sha = _checkout(tmp_path)
    recipe = load_recipe(_recipe(tmp_path, sha))
    prompt = load_benchmark_prompt(recipe, repo)
    assert prompt.text.startswith("Grade it.\nQ: ${question}\nA: ${response} (costs $$3)\nGold: ${reference}\n"
                                  "Tolerance 5.0%, braces {kept}.\n")  # dedented, $ escaped, {{ }} as written
    seen: list[str] = []
    used = with_benchmark_prompt(recipe, prompt)
    judge = recipe_judge(used, MockBackend("m", lambda req: seen.append(req.prompt) or [0.9, 0.1]),
                         store=tmp_path / "s.sqlite")
    items = items_from_dicts([{"id": "q", "question": "2+2?", "reference": "4",
                               "responses": [{"id": "a", "text": "four"}]}])
    run = run_recipe(used, items, judge, bootstrap=0)
    judge.close()
    assert "Q: 2+2?\nA: four (costs $3)\nGold: 4\nTolerance 5.0%" in seen[0]
    assert run.records[0]["prompt"]["source"] == "benchmark" and run.result.value == pytest.approx(0.9)  # soft: P(YES)


def test_an_expression_neither_mapped_nor_valued_is_refused_by_name(tmp_path: Path) -> None:
    repo, sha = _checkout(tmp_path)
    recipe = load_recipe(_recipe(tmp_path, sha, values="{}"))
    with pytest.raises(InputError, match=r"\{self.tolerance \* 100\} are neither mapped"):
        load_benchmark_prompt(recipe, repo)


def test_a_missing_function_or_variable_is_said(tmp_path: Path) -> None:
    repo, sha = _checkout(tmp_path, GRADER.replace("def prompt", "def other"))
    with pytest.raises(InputError, match=r"has no function Grader.prompt \(no 'prompt'\)"):
        load_benchmark_prompt(load_recipe(_recipe(tmp_path, sha)), repo)
    (tmp_path / "x").mkdir()
    text = (tmp_path / "recipe.toml").read_text().replace('function = "Grader.prompt"',
                                                          'function = "Grader.other"\nvariable = "message"')
    (tmp_path / "x" / "recipe.toml").write_text(text)
    (tmp_path / "x" / "check.txt").write_text((tmp_path / "check.txt").read_text())
    with pytest.raises(InputError, match=r"function Grader\.other assigns to message no string"):
        load_benchmark_prompt(load_recipe(tmp_path / "x" / "recipe.toml"), repo)
    bad = (tmp_path / "recipe.toml").read_text().replace('function = "Grader.prompt"',
                                                         'function = "Grader.prompt"\nconstant = "X"')
    (tmp_path / "x" / "recipe.toml").write_text(bad)
    with pytest.raises(InputError, match="exclude each other"):
        load_recipe(tmp_path / "x" / "recipe.toml")


# -- the shipped recipes, on project-written files of the same shape ------------------------------------------

DSGYM_LIKE = '''class EquivalenceByLLMMetric:
    def _create_judgment_prompt(self, query, prediction, ground_truth):
        return f"""Project-written stand-in. Query: {query}
Predicted: {prediction}
Truth: {ground_truth}
Tolerance: {self.numeric_tolerance * 100}%"""
'''

SC_ARENA_LIKE = '''class ScienceqaEvaluator:
    def evaluate(self, answers):
        for question in []:
            model_answer = answers[0]
            message_template = f"""
                Project-written stand-in, scored 0 to 5.
                Type: {question["type"]}
                Question: {question["question"]}
                Truth: {question["answer"]}
                Answer: {model_answer}
                Title: {paper_title}
                Abstract: {paper_abstract}
                Passage: {question["relevant_passage"]}
                """
'''


@pytest.mark.parametrize("name, file, source, expected", [
    ("datamind", "datacope/reason_task/eval/DSGym/dsgym/eval/metrics/equivalence_by_llm.py", DSGYM_LIKE,
     "Query: ${question}\nPredicted: ${response}\nTruth: ${reference}\nTolerance: 1.0%"),
    ("sc-arena", "evaluators/scienceqa.py", SC_ARENA_LIKE,
     "Type: (given in 5. below)\nQuestion: ${question}\nTruth: ${reference}\nAnswer: ${response}\n"
     "Title: ${context}\nAbstract: (given in 5. above)\nPassage: (given in 5. above)")])
def test_shipped_recipes_read_their_fstring_prompt_and_check_its_hash(tmp_path: Path, name: str, file: str,
                                                                     source: str, expected: str) -> None:
    recipe = get_recipe(name)
    assert recipe.benchmark_prompt["file"] == file and recipe.published_judge
    (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / file).write_text(source)
    with pytest.raises(InputError, match=recipe.benchmark_prompt["sha256"][:8]):
        load_benchmark_prompt(recipe, tmp_path)
    prompt = load_benchmark_prompt(recipe, tmp_path, allow_changed=True)
    assert expected in prompt.text and prompt.changed
    with_benchmark_prompt(recipe, prompt)  # a valid template of its kind


def test_sc_arena_benchmark_prompt_judges_the_released_file_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "evaluators").mkdir()
    (tmp_path / "evaluators" / "scienceqa.py").write_text(SC_ARENA_LIKE)
    recipe = get_recipe("sc-arena")
    used = with_benchmark_prompt(recipe, load_benchmark_prompt(recipe, tmp_path, allow_changed=True))
    seen: list[str] = []

    def script(req: object) -> list[float]:
        seen.append(req.prompt)  # type: ignore[attr-defined]
        return [1.0 if lab.startswith("4") else 0.0 for lab in req.labels]  # type: ignore[attr-defined]

    papers = [{"PMID": "1", "title": "Paper T", "abstract": "Abs.", "response": [
        {"type": "Marker", "question": "Which marker?", "answer": "CD3", "relevant_passage": "CD3 marks T cells.",
         "model_answer": "Thinking... [Answer: CD3E]"}]}]
    path = tmp_path / "ScientificQA_final.json"
    path.write_text(json.dumps(papers))
    from trustjudge.recipes._readers import read

    judge = recipe_judge(used, MockBackend("sc", script), store=tmp_path / "s.sqlite")
    run = run_recipe(used, read(path, "sc-arena-scienceqa"), judge, bootstrap=0)
    judge.close()
    assert "Answer: CD3E\nTitle: Question type: Marker" in seen[0] and "Relevant passage: CD3 marks" in seen[0]
    assert run.result.value == pytest.approx(0.2 * 4) and run.records[0]["prompt"]["matches_recipe"] is False


# -- OmniSpatial's repeats (api_eval.py --repeat 5: one flag per question and repeat, pooled) ----------------

def test_omnispatial_repeats_are_responses_of_one_question_and_pooled_as_published(tmp_path: Path) -> None:
    from trustjudge.recipes._readers import read

    base = {"id": "15_1", "question": "How long?", "options": ["2.7s", "14.7s"], "answer": 1,
            "task_type": "Dynamic_Reasoning", "sub_task_type": "Motion_Analysis"}
    rows = [{**base, "repeat": k, "response": text} for k, text in enumerate(["B", "A", "B", "B", "B"])]
    rows.append({**base, "task_type": "Spatial_Interaction", "response": ["A", "A"]})  # same id, other task type
    path = tmp_path / "data.json"
    path.write_text(json.dumps(rows))
    dynamic, spatial = read(path, "omnispatial")
    assert dynamic.id == "Dynamic_Reasoning_15_1" and spatial.id == "Spatial_Interaction_15_1"
    assert [r.id for r in dynamic.responses] == [f"model#{k}" for k in range(5)]
    assert {r.system for r in dynamic.responses + spatial.responses} == {"model"}
    recipe = get_recipe("omnispatial")

    def script(req: object) -> list[float]:
        right = "Pred: B" in req.prompt or "<response>\nB\n</response>" in req.prompt  # type: ignore[attr-defined]
        return [(0.9 if right else 0.3) if lab.startswith("TRUE") else (0.1 if right else 0.7)
                for lab in req.labels]  # type: ignore[attr-defined]

    judge = recipe_judge(recipe, MockBackend("o", script), store=tmp_path / "s.sqlite")
    run = run_recipe(recipe, [dynamic, spatial], judge, bootstrap=0)
    judge.close()
    assert run.result.value == pytest.approx(4 / 7)  # the pooled share of True flags over question x repeat
    assert run.result.overall.n == 7 and run.result.overall.items == 2  # the bootstrap resamples the 2 questions
    assert run.readings["soft"].value == pytest.approx((4 * 0.9 + 3 * 0.3) / 7)
    rows.append({**base, "repeat": 0, "response": "B"})
    path.write_text(json.dumps(rows))
    with pytest.raises(InputError, match="repeats question Dynamic_Reasoning_15_1's answer 'model#0'"):
        read(path, "omnispatial")
