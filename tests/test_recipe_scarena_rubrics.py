"""SC-Arena's per-task rubrics read from the user's checkout (issue 35): one benchmark prompt per task, each
file's hash checked, its placeholders mapped, the right one per item's task; the benchmark's convention for an
unparsed answer (0) printed beside ours (unscored). The evaluator files here are project-written in the same
shape as the benchmark's (a class, a method, an f-string or a %-string with the same expressions), never the
benchmark's text."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from trustjudge import InputError, MockBackend, items_from_dicts
from trustjudge.backends import LabelRequest
from trustjudge.cli import cli
from trustjudge.recipes import get_recipe, load_recipe, recipe_judge, run_recipe
from trustjudge.recipes._prompt import load_benchmark_prompt
from trustjudge.recipes._recipe import with_benchmark_dir

SCIENCEQA = '''class ScienceqaEvaluator:
    def evaluate(self, answers):
        for question in []:
            model_answer = answers[0]
            message_template = f"""
                SQA stand-in. Type {question["type"]} Q {question["question"]}
                Truth {question["answer"]} Answer {model_answer} Title {paper_title}
                Abstract {paper_abstract} Passage {question["relevant_passage"]}
                """
'''
CAPTIONING = '''class CaptioningEvaluator:
    def evaluate(self, answers):
        for idx in []:
            message_template=f"""
                CAPTION stand-in, 0 to 5.
                Genes: {cell_sentence}
                Chain: {cell_path_chain}
                Described: {predicted_caption}
                """
'''
GENERATION = '''class GenerationEvaluator:
    def evaluate(self, answers):
        for idx in []:
            message_template=f"""
            GENERATION stand-in.
            Type `{celltype}` Desc `{caption}` Markers `{cell_markers}`
            Generated `{predicted_cell}` Reference `{sentence_str}` (100% plausible?)
            """
'''
CELLTYPE = '''class CellTypeEvaluator:
    def llm_eval(self, predicted_cell_type, true_cell_type):
        message_template="""
        CELLTYPE stand-in, 100%% sure.
        Exact:%s
        Chain:%s
        Predicted:%s
    """
        return message_template % (true_cell_type, "chain", predicted_cell_type)
'''
PERTURBATION = '''class PerturbationEvaluator:
    def evaluate(self, answers):
        for idx, data in []:
            message_template=f"""
                PERTURBATION stand-in, 0 to 5.
                Before {ctrl_sentence} by {perturbation_description}
                Measured {pert_sentence} up {up_genes_str} down {down_genes_str}
                Predicted {cell_sentence} up {up_genes} down {down_genes}
                Know {NCBI_gene_card_UniProt_summaries} C {GO_C_description} P {GO_P_description} F {GO_F_description}
                """
'''
FILES = {"scienceqa.py": SCIENCEQA, "captioning.py": CAPTIONING, "generation.py": GENERATION,
         "cell_type_annotation.py": CELLTYPE, "perturbation_prediction.py": PERTURBATION}


def _checkout(tmp_path: Path, files: dict[str, str] = FILES) -> Path:
    repo = tmp_path / "SC-Arena"
    (repo / "evaluators").mkdir(parents=True)
    for name, text in files.items():
        (repo / "evaluators" / name).write_text(text)
    return repo


ITEMS = [
    {"id": "cap", "question": "CD3E CD2 IL7R", "reference": "T cell", "context": "T cell < lymphocyte",
     "task": "captioning", "responses": [{"id": "m", "text": "a T cell"}]},
    {"id": "gen", "question": "B cell", "reference": "cell1: CD19 MS4A1", "context": "makes antibodies; CD19",
     "task": "generation", "responses": [{"id": "m", "text": "CD19 CD79A"}]},
    {"id": "ct", "question": "Which cell type is this?", "reference": "monocyte", "context": "monocyte < myeloid",
     "task": "celltype", "responses": [{"id": "m", "text": "macrophage"}]},
    {"id": "qa", "question": "Which marker?", "reference": "CD3", "context": "CD3 marks T cells.",
     "task": "scienceqa", "responses": [{"id": "m", "text": "CD4"}]},
]


def test_each_task_is_judged_on_its_benchmark_rubric_read_from_the_checkout(tmp_path: Path) -> None:
    recipe = get_recipe("sc-arena")
    assert set(recipe.rubric_benchmark) == {"captioning", "generation", "celltype", "perturbation"}
    used = with_benchmark_dir(recipe, _checkout(tmp_path), allow_changed=True)
    seen: dict[str, str] = {}

    def script(req: LabelRequest) -> list[float]:
        tag = next(t for t in ("CAPTION", "GENERATION", "CELLTYPE", "SQA") if t + " stand-in" in req.prompt)
        seen[tag] = req.prompt
        if tag == "GENERATION":
            return [0.0 for _ in req.labels]  # no score read: unscored here, 0 in SC-Arena's code
        return [1.0 if lab.startswith({"CAPTION": "5", "CELLTYPE": "3", "SQA": "1"}[tag]) else 0.0
                for lab in req.labels]

    judge = recipe_judge(used, MockBackend("sc", script), store=tmp_path / "s.sqlite")
    run = run_recipe(used, items_from_dicts(ITEMS), judge, bootstrap=0)
    judge.close()
    assert set(seen) == {"CAPTION", "GENERATION", "CELLTYPE", "SQA"}  # one benchmark prompt per task
    assert "Genes: CD3E CD2 IL7R\nChain: T cell < lymphocyte\nDescribed:" in seen["CAPTION"]
    assert "Type `B cell` Desc `makes antibodies; CD19` Markers `(given with the cell description in 2.)`" in \
        seen["GENERATION"] and "Reference `cell1: CD19 MS4A1` (100% plausible?)" in seen["GENERATION"]
    assert "100% sure.\nExact:monocyte\nChain:monocyte < myeloid\nPredicted:" in seen["CELLTYPE"]
    assert "The question the model answered: Which cell type is this?" in seen["CELLTYPE"]
    assert "Q Which marker?\nTruth CD3" in seen["SQA"]  # the scienceqa prompt ([benchmark_prompt])
    prompts = {r["item_id"]: r["prompt"] for r in run.records}
    assert prompts["cap"]["rubric"] == "task=captioning (the benchmark's captioning.py)"
    assert prompts["ct"]["file"].endswith("evaluators/cell_type_annotation.py")
    assert prompts["ct"]["matches_recipe"] is False and prompts["qa"]["file"].endswith("scienceqa.py")
    # by hand: ours leaves the generation reply unscored: (5 + 3 + 1) x 0.2 / 3; SC-Arena's code adds 0 for it
    assert run.result.value == pytest.approx((5 + 3 + 1) * 0.2 / 3) and run.result.overall.unscored == 1
    assert run.readings["convention (unparsed = 0)"].value == pytest.approx((5 + 3 + 1 + 0) * 0.2 / 4)


def test_each_rubric_file_hash_is_checked_and_named(tmp_path: Path) -> None:
    recipe = get_recipe("sc-arena")
    repo = _checkout(tmp_path)
    with pytest.raises(InputError, match="its rubric 'captioning'") as info:
        load_benchmark_prompt(recipe, repo, rubric="captioning")
    assert recipe.rubric_benchmark["captioning"]["sha256"] in str(info.value)
    assert info.value.file == str((repo / "evaluators" / "captioning.py").resolve())
    with pytest.raises(InputError, match="names no benchmark prompt for the rubric 'steps'"):
        load_benchmark_prompt(recipe, repo, rubric="steps")


def test_the_cli_judges_per_task_rubrics_and_warns_of_each_changed_file(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    out = tmp_path / "run.json"
    args = ["run", "sc-arena", str(path), "-j", "mock/hash", "--benchmark-dir", str(repo), "-q", "--json", str(out),
            "--store", str(tmp_path / "s.sqlite")]
    refused = CliRunner().invoke(cli, args)
    assert isinstance(refused.exception, InputError) and "scienceqa.py" in str(refused.exception)
    result = CliRunner().invoke(cli, [*args, "--allow-changed-prompt"])
    assert result.exit_code == 0, result.output
    warned = result.output.replace("\n", "")
    assert all(f"{name} has sha256" in warned for name in FILES), result.output  # each changed file said
    assert json.loads(out.read_text())["prompt"]["file"].endswith("scienceqa.py")


def test_a_rubric_checkout_matching_the_recipe_is_used_unmarked(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "own.txt").write_text("OWN ${question} ${response}")
    repo = _checkout(tmp_path, {"captioning.py": CAPTIONING})
    sha = hashlib.sha256(CAPTIONING.encode()).hexdigest()
    (folder / "recipe.toml").write_text(
        'name = "r"\nversion = "1"\nbenchmark = "b"\nsource = "s"\nmode = "score"\n[metric]\nname = "mean_score"\n'
        '[rubrics]\nby = "task"\nfiles = { captioning = "own.txt" }\n[rubrics.benchmark.captioning]\n'
        f'file = "evaluators/captioning.py"\nfunction = "CaptioningEvaluator.evaluate"\nsha256 = "{sha}"\n'
        'variable = "message_template"\nlayout = "${benchmark_prompt}"\n'
        'placeholders = { cell_sentence = "question", cell_path_chain = "context", predicted_caption = "response" }\n')
    used = with_benchmark_dir(load_recipe(folder), repo)
    assert used.rubric_prompts["captioning"]["matches_recipe"] is True and not used.prompt
    assert used.rubric_texts["captioning"].startswith("CAPTION stand-in, 0 to 5.\nGenes: ${question}")


@pytest.mark.parametrize("table, field, message", [
    ('[rubrics.benchmark.other]\nfile = "a.py"\nsha256 = "' + "0" * 64 + '"\nlayout = "${benchmark_prompt}"\n',
     "rubrics.benchmark.other", "names no rubric of rubrics.files"),
    ('[rubrics.benchmark.captioning]\nfile = "a.py"\nsha256 = "00"\nlayout = "${benchmark_prompt}"\n',
     "rubrics.benchmark.captioning.sha256", "sha256"),
    ('[rubrics.benchmark.captioning]\nkind = "pairwise"\nfile = "a.py"\nsha256 = "' + "0" * 64 + '"\n'
     'layout = "${benchmark_prompt}"\n', "rubrics.benchmark.captioning.kind", "must be pointwise"),
    ('[rubrics.benchmark.captioning]\nfile = "a.py"\nsha256 = "' + "0" * 64 + '"\npercent = ["nothing"]\n'
     'layout = "${benchmark_prompt}"\n', "rubrics.benchmark.captioning.percent", "each %s"),
])
def test_a_bad_rubric_benchmark_table_is_refused_naming_its_field(tmp_path: Path, table: str, field: str,
                                                                  message: str) -> None:
    (tmp_path / "own.txt").write_text("${question} ${response}")
    (tmp_path / "recipe.toml").write_text(
        'name = "r"\nversion = "1"\nbenchmark = "b"\nsource = "s"\nmode = "score"\n[metric]\nname = "mean_score"\n'
        '[rubrics]\nby = "task"\nfiles = { captioning = "own.txt" }\n' + table)
    with pytest.raises(InputError, match=message) as info:
        load_recipe(tmp_path)
    assert info.value.field == field and info.value.file == str(tmp_path / "recipe.toml")


def test_a_percent_string_with_another_count_of_fields_is_refused(tmp_path: Path) -> None:
    recipe = get_recipe("sc-arena")
    repo = _checkout(tmp_path, {"cell_type_annotation.py": CELLTYPE.replace("Predicted:%s", "")})
    with pytest.raises(InputError, match=r"has 2 %s in the benchmark's text, but benchmark_prompt\.percent names 3"):
        load_benchmark_prompt(recipe, repo, rubric="celltype", allow_changed=True)
