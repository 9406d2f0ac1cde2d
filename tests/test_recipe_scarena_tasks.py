"""SC-Arena's tasks as its evaluators have them (issue 35): what each sends its judge of a model's output
([answers]), the cell-type shortcut on that task only (a rule's ``when``), ours beside; the readers of the
benchmark's released data files for every task, on small files written here in their schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from trustjudge import InputError, items_from_dicts
from trustjudge.io._rules import Rule, parse_rules
from trustjudge.recipes import load_recipe
from trustjudge.recipes._answers import extract_answers, parse_answers


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
