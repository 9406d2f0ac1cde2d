"""Loaders: the documented schema, the flat pairwise form, CSV, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from trustjudge import InputError, iter_items, load_items

from .conftest import small_items, write_jsonl


def errors(path: Path, **kw: int) -> list[InputError]:
    return [v for v in iter_items(path, **kw) if isinstance(v, InputError)]


def test_nested_items(items_file: Path) -> None:
    items = load_items(items_file)
    assert [i.id for i in items] == ["q1", "q2"]
    assert items[0].responses[0].human_score == 5.0
    assert [(p.first, p.second) for p in items[0].all_pairs()] == [("r1", "r2"), ("r1", "r3"), ("r2", "r3")]


def test_flat_pairwise_form(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "flat.jsonl", [
        {"question": "Q1?", "response_a": "x", "response_b": "y", "label": "B"},
        {"id": "p2", "question": "Q2?", "input": "ctx", "response_a": "x", "response_b": "y", "label": 0},
    ])
    items = load_items(path)
    assert items[0].id == "line-1" and items[0].pairs and items[0].pairs[0].human == "second"
    assert items[1].context == "ctx" and items[1].pairs and items[1].pairs[0].human == "tie"


def test_explicit_pairs_with_annotators(tmp_path: Path) -> None:
    row = small_items()[0]
    row["pairs"] = [{"first": "r1", "second": "r3", "human": "first", "annotators": [1, "tie", "A"]}]
    items = load_items(write_jsonl(tmp_path / "p.jsonl", [row]))
    assert items[0].pairs and items[0].pairs[0].annotators == ("first", "tie", "first")


def test_csv_long_and_flat(tmp_path: Path) -> None:
    long = tmp_path / "long.csv"
    long.write_text("id,question,response_id,response,system,human_score\n"
                    "q1,What?,a,Alpha,m1,4\nq1,What?,b,Beta,m2,\nq2,Why?,a,\"Because, well\",m1,2\n")
    items = load_items(long)
    assert [len(i.responses) for i in items] == [2, 1]
    assert items[0].responses[1].human_score is None and items[1].responses[0].text == "Because, well"
    flat = tmp_path / "flat.csv"
    flat.write_text("question,response_a,response_b,label\nQ?,x,y,first\n")
    assert load_items(flat)[0].pairs[0].human == "first"  # type: ignore[index]


@pytest.mark.parametrize("line, field, message", [
    ('{"id": "a", "responses": [{"id": "x", "text": "t"}]}', "question", "is missing"),
    ('{"id": "a", "question": "", "responses": [{"id": "x", "text": "t"}]}', "question", "must not be empty"),
    ('{"id": "a", "question": "Q", "responses": "nope"}', "responses", "must be a list"),
    ('{"id": "a", "question": "Q", "responses": [{"id": "x", "text": 3.5j}]}', None, "invalid JSON"),
    ('{"id": "a", "question": "Q", "responses": [{"id": "x", "text": ["t"]}]}', "responses[0].text",
     "must be a string"),
    ('{"id": "a", "question": "Q", "responses": [{"id": "x", "text": "t"}, {"id": "x", "text": "u"}]}',
     "responses[1].id", "duplicate response id"),
    ('{"id": "a", "question": "Q", "responses": [{"id": "x", "text": "t", "human_score": "high"}]}',
     "responses[0].human_score", "must be a number"),
    ('{"id": "a", "question": "Q", "responses": [{"id": "x", "text": "t"}], "pairs": [{"first": "x", "second": "z"}]}',
     "pairs[0].second", "names no response"),
    ('[1, 2]', None, "expected a JSON object"),
])
def test_bad_lines_name_file_line_and_field(tmp_path: Path, line: str, field: str | None, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    good = '{"id": "ok", "question": "Q", "responses": [{"id": "x", "text": "t"}]}'
    path.write_text(good + "\n" + line + "\n" + good.replace('"ok"', '"ok2"') + "\n")
    values = list(iter_items(path))
    assert [type(v).__name__ for v in values] == ["Item", "InputError", "Item"]
    err = values[1]
    assert isinstance(err, InputError)
    assert err.line == 2 and err.field == field and message in str(err)
    assert str(err).startswith(f"{path}:2: ")


def test_invalid_utf8_and_duplicates_and_too_few_responses(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"id": "a", "question": "Q", "responses": [{"id": "x", "text": "\xff"}]}\n'
                     b'{"id": "b", "question": "Q", "responses": [{"id": "x", "text": "t"}]}\n'
                     b'{"id": "b", "question": "Q", "responses": [{"id": "x", "text": "t"}]}\n')
    errs = errors(path)
    assert "invalid UTF-8" in str(errs[0]) and errs[0].line == 1
    assert "duplicate item id" in str(errs[1]) and errs[1].line == 3
    few = errors(path, min_responses=2)
    assert any("at least 2 responses" in str(e) for e in few)


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_items(tmp_path / "nope.jsonl")
