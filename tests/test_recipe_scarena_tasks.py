"""SC-Arena's tasks as its evaluators have them (issue 35): what each sends its judge of a model's output
([answers]), the cell-type shortcut on that task only (a rule's ``when``), ours beside; the readers of the
benchmark's released data files for every task, on small files written here in their schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trustjudge import InputError, MockBackend, items_from_dicts
from trustjudge.backends import LabelRequest
from trustjudge.cli import cli
from trustjudge.io._rules import Rule, parse_rules
from trustjudge.recipes import get_recipe, load_recipe, recipe_judge, run_recipe
from trustjudge.recipes._answers import extract_answers, parse_answers
from trustjudge.recipes._readers import detect, read
from trustjudge.recipes._recipe import with_benchmark_dir


def test_a_rule_with_when_fires_only_on_items_with_those_fields() -> None:
    rule = parse_rules([{"kind": "lower", "label": "5", "when": {"task": "celltype"}}], "r.toml")[0]
    items = items_from_dicts([{"id": "a", "question": "q", "reference": "T cell", "task": "celltype",
                               "responses": [{"id": "m", "text": "t CELL"}]},
                              {"id": "b", "question": "q", "reference": "T cell", "task": "captioning",
                               "responses": [{"id": "m", "text": "t CELL"}]},
                              {"id": "c", "question": "q", "reference": "T cell",
                               "responses": [{"id": "m", "text": "t CELL"}]}])
    assert [rule.fires(i, i.responses[0]) for i in items] == [True, False, False]
    assert rule.to_dict()["when"] == {"task": "celltype"}
    with pytest.raises(InputError) as info:
        parse_rules([{"kind": "lower", "label": "5", "when": "celltype"}], "r.toml")
    assert info.value.field == "rules[0].when" and info.value.file == "r.toml"
    assert Rule("empty", "0").when == ()


def test_answers_are_extracted_as_each_evaluator_does() -> None:
    spec = parse_answers({"by": "task", "ct": {"pattern": r"\[T:\s*([^\]]+?)\]", "missing": "Unknown"},
                          "cap": {"pattern": r"\[C:\s*([^\]]+?)\]"},
                          "pert": {"patterns": {"up": r"\[Up:\s*([^\]]+?)\]", "cs": r"\[CS:\s*([^\]]+?)\]"},
                                   "append": "]", "missing": "Unknown", "layout": "up={up} cs={cs}"}}, "r.toml")
    items = items_from_dicts([
        {"id": "1", "question": "q", "task": "ct", "responses": [{"id": "a", "text": "x [T: B cell ] y"},
                                                                 {"id": "b", "text": "B cell"}]},
        {"id": "2", "question": "q", "task": "cap", "responses": [{"id": "a", "text": "no marker"}]},
        {"id": "3", "question": "q", "task": "pert", "responses": [{"id": "a", "text": "[Up: A, B] [CS: G1 G2"}]},
        {"id": "4", "question": "q", "responses": [{"id": "a", "text": "[T: kept whole]"}]}])
    out, said = extract_answers(spec, items)
    assert [r.text for i in out for r in i.responses] == ["B cell", "Unknown", "no marker", "up=A, B cs=G1 G2",
                                                          "[T: kept whole]"]
    assert said[("1", "b")]["found"] == "no marker: the benchmark's fallback"
    assert said[("2", "a")]["found"] == "no marker: the whole output" and ("4", "a") not in said
    _, said = extract_answers(spec, items_from_dicts([{"id": "5", "question": "q", "task": "pert",
                                                       "responses": [{"id": "a", "text": "[Up: A]"}]}]))
    assert said[("5", "a")] == {"sent": "up=A cs=Unknown", "found": "no marker for cs: the benchmark's fallback "
                                "'Unknown'", "by": "task=pert"}


@pytest.mark.parametrize("table, field", [
    ('by = "task"\nct = { pattern = "[" }\n', "answers.ct.pattern"),
    ('by = "task"\nct = { pattern = "x", patterns = { a = "y" } }\n', "answers.ct"),
    ('by = "task"\nct = { patterns = { a = "y" }, missing = "U", layout = "no slot" }\n', "answers.ct.layout"),
    ('by = "task"\nct = { pattern = "x", other = 1 }\n', "answers.ct.other"),
    ('ct = { pattern = "x" }\n', "answers.by"),
])
def test_a_bad_answers_table_is_refused_naming_its_field(tmp_path: Path, table: str, field: str) -> None:
    (tmp_path / "recipe.toml").write_text('name = "r"\nversion = "1"\nbenchmark = "b"\nsource = "s"\nmode = "score"\n'
                                          '[metric]\nname = "mean_score"\n[answers]\n' + table)
    with pytest.raises(InputError) as info:
        load_recipe(tmp_path)
    assert info.value.field == field and info.value.file == str(tmp_path / "recipe.toml")


def test_an_ours_rule_with_a_label_off_the_scale_is_refused(tmp_path: Path) -> None:
    (tmp_path / "recipe.toml").write_text(
        'name = "r"\nversion = "1"\nbenchmark = "b"\nsource = "s"\nmode = "score"\n[options]\nscale = "0-5"\n'
        '[metric]\nname = "mean_score"\n[[ours_rules]]\nkind = "exact"\nlabel = "9"\n')
    with pytest.raises(InputError) as info:
        load_recipe(tmp_path)
    assert info.value.field == "ours_rules[0].label"


# -- readers of the released data files (written here in SC-Arena's schema) --------------------------------

OBO = """format-version: 1.2

[Term]
id: CL:0000000
name: cell
def: "A material entity." [GO:x]

[Term]
id: CL:0000084
name: T cell
def: "A \\"type\\" of lymphocyte." [CL:y]
is_a: CL:0000542 ! lymphocyte

[Term]
id: CL:0000542
name: lymphocyte
def: "A leukocyte." []
is_a: CL:0000000 ! cell
is_a: UBERON:1 ! not a cell type

[Typedef]
id: part_of
name: part of
"""
CELLS = [{"tissue": "blood", "cell_type": "T cell", "cell_ontology_id": "CL:0000084", "cell_sentence": "CD3E CD2"},
         {"tissue": "lung", "cell_type": "lymphocyte", "cell_ontology_id": "CL:0000542", "cell_sentence": "PTPRC"},
         {"tissue": "blood", "cell_type": "T cell", "cell_ontology_id": "CL:0000084", "cell_sentence": "CD3D IL7R"}]


def _jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _checkout(tmp_path: Path) -> Path:
    ev = tmp_path / "SC-Arena" / "evaluators"
    ev.mkdir(parents=True)
    (ev / "cl_nl6.obo").write_text(OBO)
    (ev / "cell_marker.txt").write_text("Specific_Cell_Ontology_ID\tCell_Marker\nCL:0000084\tCD3E\nCL:0000084\tCD2\n")
    (ev / "gene_ontology_C.csv").write_text("gene,direct_class_label\nAHR,nucleus\nAHR,nucleus\nAHR,cytosol\n")
    (ev / "NCBI_summary_of_genes.json").write_text(json.dumps({"AHR": "A ligand-activated factor."}))
    return ev


def test_celltype_rows_and_outputs_are_joined_in_order_with_the_ontology_chain(tmp_path: Path) -> None:
    _checkout(tmp_path)
    _jsonl(tmp_path / "cell_sentences_fixed.jsonl", CELLS)
    _jsonl(tmp_path / "out_a.jsonl",
           [{"prompt": f"p{i}", "response": f"[Predicted_Cell_Type: x{i}]"} for i in range(3)])
    spec = tmp_path / "celltype.json"
    spec.write_text(json.dumps({"task": "celltype", "data": "cell_sentences_fixed.jsonl",
                                "outputs": {"model_a": "out_a.jsonl"}, "evaluators": "SC-Arena/evaluators"}))
    assert detect(spec, "sc-arena-celltype") and not detect(spec, "sc-arena-captioning")
    items = read(spec, "sc-arena-celltype")
    assert [i.reference for i in items] == ["T cell", "lymphocyte", "T cell"]
    assert [i.responses[0].text for i in items] == ["[Predicted_Cell_Type: x0]", "[Predicted_Cell_Type: x1]",
                                                    "[Predicted_Cell_Type: x2]"]
    assert items[0].fields["task"] == "celltype" and "CD3E CD2" in items[0].question
    # the chain from the root down, CL terms only (the UBERON parent is not a CL term): by hand
    assert items[0].context == ("Term 1: CL:0000084 T cell\nPath 1:\nCL:0000000 cell\n  CL:0000542 lymphocyte\n"
                                "    CL:0000084 T cell")
    with pytest.raises(InputError, match="names the task 'celltype', but the file is read as captioning") as info:
        read(spec, "sc-arena-captioning")
    assert info.value.field == "task"
    spec.write_text(json.dumps({"data": "cell_sentences_fixed.jsonl", "outputs": {"model_a": "out_a.jsonl"},
                                "evaluators": "SC-Arena/evaluators"}))  # no task named: read as --format says
    caption = read(spec, "sc-arena-captioning")[0]
    assert caption.question == "CD3E CD2" and caption.context is not None
    assert 'T cell: A "type" of lymphocyte.' in caption.context and "cell: A material entity." in caption.context
    _jsonl(tmp_path / "out_a.jsonl", [{"prompt": "p", "response": "x"}])
    with pytest.raises(InputError, match="has 1 responses for the 3 rows") as info:
        read(spec, "sc-arena-celltype")
    assert info.value.file == str(tmp_path / "out_a.jsonl")


def test_cell_rows_with_answers_added_and_their_errors(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "cells.jsonl", [{**CELLS[0], "model_answer": "[Predicted_Cell_Type: T cell]"}])
    item = read(path, "sc-arena-celltype")[0]
    assert item.context is None and item.responses[0].text == "[Predicted_Cell_Type: T cell]"
    _jsonl(path, [{**CELLS[0], "model_answer": "a"}, {"tissue": "blood", "cell_sentence": "x", "model_answer": "b"}])
    with pytest.raises(InputError) as info:
        read(path, "sc-arena-captioning")
    assert (info.value.file, info.value.line, info.value.field) == (str(path), 2, "cell_type")
    _jsonl(path, [CELLS[0]])
    with pytest.raises(InputError) as info:
        read(path, "sc-arena-celltype")
    assert (info.value.line, info.value.field) == (1, "model_answer")


def test_generation_is_one_item_per_type_its_answer_found_by_the_prompt(tmp_path: Path) -> None:
    _checkout(tmp_path)
    _jsonl(tmp_path / "cells.jsonl", CELLS)
    _jsonl(tmp_path / "gen.jsonl", [
        {"prompt": "Cell Type: lymphocyte\nDescription: ...", "response": "[Cell_Sentence: PTPRC]"},
        {"prompt": "Cell Type: T cell\nDescription: ...", "response": "CD3E"}])
    spec = tmp_path / "gen.json"
    spec.write_text(json.dumps({"task": "generation", "data": "cells.jsonl", "outputs": {"m": "gen.jsonl"},
                                "evaluators": "SC-Arena/evaluators"}))
    assert detect(spec, "sc-arena-generation")
    t_cell, lymph = read(spec, "sc-arena-generation")
    assert (t_cell.question, t_cell.responses[0].text) == ("T cell", "CD3E")
    assert t_cell.reference == "cell1: CD3E CD2, cell2: CD3D IL7R"
    assert t_cell.context == 'Description: A "type" of lymphocyte.\nKnown marker genes: CD3E,CD2'
    assert lymph.context == "Description: A leukocyte.\nKnown marker genes: (none found)"
    _jsonl(tmp_path / "gen.jsonl", [{"prompt": "Cell Type: neuron", "response": "x"}])
    with pytest.raises(InputError) as info:
        read(spec, "sc-arena-generation")
    assert (info.value.file, info.value.line, info.value.field) == (str(tmp_path / "gen.jsonl"), 1, "prompt")


def test_perturbation_rows_are_read_with_the_genes_reference_knowledge(tmp_path: Path) -> None:
    _checkout(tmp_path)
    rows = [{"perturbation": "A549_AHR+ctrl_1+1", "cell_type": "A549", "condition": "AHR+ctrl", "up_genes": ["HBZ"],
             "down_genes": ["SDC2", "LMNA"], "ctrl_sentence": "MT-CO3 FTL", "pert_sentence": "FTL MT-CO3",
             "model_answer": "[Up: HBZ][Down: SDC2][Cell_Sentence: FTL MT-CO3"}]
    path = tmp_path / "test_perturbation.json"
    path.write_text(json.dumps(rows))
    assert detect(path, "sc-arena-perturbation")
    item = read(path, "sc-arena-perturbation")[0]
    assert item.id == "A549_AHR+ctrl_1+1" and "knockdown of AHR (with a non-targeting control guide)" in item.question
    assert item.reference == ("perturbed cell sentence: FTL MT-CO3\nup-regulated genes: HBZ\ndown-regulated genes: "
                              "SDC2, LMNA")
    assert item.context is None  # no checkout named: no reference knowledge
    spec = tmp_path / "p.json"
    _jsonl(tmp_path / "out.jsonl", [{"prompt": "p", "response": rows[0]["model_answer"]}])
    spec.write_text(json.dumps({"data": "test_perturbation.json", "outputs": {"m": "out.jsonl"},
                                "evaluators": "SC-Arena/evaluators"}))
    item = read(spec, "sc-arena-perturbation")[0]
    assert item.context is not None and "NCBI summary: A ligand-activated factor." in item.context
    assert "GO cellular component: nucleus, cytosol" in item.context
    assert "GO biological process: (none found)" in item.context
    path.write_text(json.dumps([{**rows[0], "up_genes": "HBZ"}]))
    with pytest.raises(InputError) as info:
        read(path, "sc-arena-perturbation")
    assert (info.value.line, info.value.field) == (1, "up_genes")


def test_the_cli_detects_a_task_file_and_judges_what_the_evaluator_sends(tmp_path: Path) -> None:
    _jsonl(tmp_path / "cells.jsonl", CELLS[:2])
    _jsonl(tmp_path / "out.jsonl", [{"prompt": "p", "response": "so [Predicted_Cell_Type: t CELL]"},
                                    {"prompt": "p", "response": "no marker here"}])
    spec = tmp_path / "run.json"
    spec.write_text(json.dumps({"task": "celltype", "data": "cells.jsonl", "outputs": {"m": "out.jsonl"}}))
    records, out = tmp_path / "records.jsonl", tmp_path / "result.json"
    result = CliRunner().invoke(cli, ["run", "sc-arena", str(spec), "-j", "mock/hash", "-q", "--out", str(records),
                                      "--json", str(out), "--store", str(tmp_path / "s.sqlite")])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert rows[0]["rule"] == "celltype-match" and rows[0]["answer"]["sent"] == "t CELL"
    assert "rule" not in rows[1] and rows[1]["answer"]["sent"] == "Unknown"
    assert rows[1]["prompt"]["rubric"] == "task=celltype (celltype.txt)"
    assert "ours (exact-match)" in json.loads(out.read_text())["readings"]


def test_perturbation_is_judged_on_its_evaluator_s_rubric_with_the_three_markers(tmp_path: Path) -> None:
    """perturbation_prediction.py: [Up: ...], [Down: ...], [Cell_Sentence: ...] searched in the answer with "]"
    appended ("Unknown" where one is missing), judged on its f-string read from the checkout (a stand-in here),
    0.2 x score; by hand."""
    from .test_recipe_scarena_rubrics import _checkout as rubric_checkout

    repo = rubric_checkout(tmp_path)
    rows = [{"perturbation": "p1", "condition": "AHR+KLF1", "up_genes": ["HBZ"], "down_genes": ["SDC2"],
             "ctrl_sentence": "MT-CO3 FTL", "pert_sentence": "FTL MT-CO3",
             "model_answer": "Because... [Up: HBZ][Down: SDC2][Cell_Sentence: FTL MT-CO3"},
            {"perturbation": "p2", "condition": "ZC3HAV1+ctrl", "up_genes": [], "down_genes": ["A"],
             "ctrl_sentence": "A B", "pert_sentence": "B A", "model_answer": "[Up: B]"}]
    path = tmp_path / "test_perturbation.json"
    path.write_text(json.dumps(rows))
    recipe = with_benchmark_dir(get_recipe("sc-arena"), repo, allow_changed=True)
    seen: list[str] = []

    def script(req: LabelRequest) -> list[float]:
        seen.append(req.prompt)
        grade = "4" if "Predicted predicted perturbed cell sentence: FTL MT-CO3" in req.prompt else "1"
        return [1.0 if lab.startswith(grade) else 0.0 for lab in req.labels]

    judge = recipe_judge(recipe, MockBackend("p", script), store=tmp_path / "s.sqlite")
    run = run_recipe(recipe, read(path, "sc-arena-perturbation"), judge, bootstrap=0)
    judge.close()
    assert len(seen) == 2 and all("PERTURBATION stand-in" in p for p in seen)
    first = next(p for p in seen if "AHR" in p)
    assert "Before Unperturbed cell sentence: MT-CO3 FTL\nPerturbation: simultaneous CRISPRi knockdown of AHR and " \
           "KLF1 by (given with the unperturbed cell sentence in 1.)" in first
    assert "predicted up-regulated genes: HBZ\npredicted down-regulated genes: SDC2 up (given with" in first
    answers = {r["item_id"]: r["answer"] for r in run.records}
    assert answers["p1"]["found"] == "marker"
    assert answers["p2"]["sent"].startswith("predicted perturbed cell sentence: Unknown\npredicted up-regulated "
                                            "genes: B\npredicted down-regulated genes: Unknown")
    assert {r["item_id"]: r["prompt"]["rubric"] for r in run.records}["p1"] == \
        "task=perturbation (the benchmark's perturbation_prediction.py)"
    assert run.result.value == pytest.approx((0.2 * 4 + 0.2 * 1) / 2)
