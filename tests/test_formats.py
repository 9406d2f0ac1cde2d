"""Other formats in and out: tables in another schema (Parquet, datasets, JSON, CSV) through a column
mapping, Parquet outputs, ``to_pandas``, and the read-only ``trustjudge store`` commands.

Every file is written here by the test, with the real pyarrow / pandas / datasets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import small_items, write_jsonl
from trustjudge import (
    Check,
    ConfigError,
    Criterion,
    InputError,
    Item,
    Judge,
    PrerequisiteError,
    items_from_dicts,
    to_pandas,
)
from trustjudge.io._adapters import detect_format, iter_dataset
from trustjudge.io._frames import parse_mapping
from trustjudge.io._outputs import record_output
from trustjudge.io._tables import flatten

MAPPING = "question=prompt,response=output,id=uid,system=model,human_score=rating"


def _invoke(*args: str | Path) -> Any:
    from click.testing import CliRunner

    from trustjudge.cli import cli

    return CliRunner().invoke(cli, [str(a) for a in args])


def _split(values: Any) -> tuple[list[Item], list[InputError]]:
    values = list(values)
    return ([v for v in values if isinstance(v, Item)], [v for v in values if isinstance(v, InputError)])


def _frame() -> pd.DataFrame:
    """Someone else's schema: one response per row, rows of a question sharing a uid (not adjacent)."""
    return pd.DataFrame({"uid": [7, 8, 7, 9],
                         "prompt": ["What is 2 + 2?", "Capital of France?", "What is 2 + 2?", "Hi"],
                         "output": ["4", "Paris.", "5", "Hello!"], "model": ["m1", "m1", "m2", "m2"],
                         "rating": [5.0, 4.0, 1.0, None]})


@pytest.fixture
def theirs(tmp_path: Path) -> Path:
    path = tmp_path / "theirs.parquet"
    _frame().to_parquet(path)
    return path


# -- input: Parquet --------------------------------------------------------------------------------------


def test_parquet_rows_grouped_into_items_by_the_mapped_id(theirs: Path) -> None:
    assert detect_format(theirs) == "parquet"
    items, errors = _split(iter_dataset(theirs, mapping=MAPPING))
    assert errors == []
    assert [(i.id, i.line, [r.text for r in i.responses]) for i in items] == [
        ("7", 1, ["4", "5"]), ("8", 2, ["Paris."]), ("9", 4, ["Hello!"])]
    first = items[0]
    assert first.question == "What is 2 + 2?"
    assert [(r.id, r.system, r.human_score) for r in first.responses] == [("0", "m1", 5.0), ("1", "m2", 1.0)]
    assert items[2].responses[0].human_score is None  # pandas' NaN is a missing value
    # The same mapping as a dict, with the response ids taken from a column.
    df = _frame().assign(rid=["a", "a", "b", "a"])
    df.to_parquet(theirs)
    items, _ = _split(iter_dataset(theirs, mapping={"question": "prompt", "response": "output", "id": "uid",
                                                    "response_id": "rid"}))
    assert [r.id for r in items[0].responses] == ["a", "b"]


def test_parquet_without_an_id_is_one_item_per_row(theirs: Path) -> None:
    items, errors = _split(iter_dataset(theirs, mapping="question=prompt,response=output"))
    assert errors == [] and [i.id for i in items] == ["row-1", "row-2", "row-3", "row-4"]
    assert all(len(i.responses) == 1 for i in items)


def test_parquet_in_trustjudge_fields_needs_no_mapping(tmp_path: Path) -> None:
    nested = tmp_path / "nested.parquet"
    pq.write_table(pa.Table.from_pylist(small_items()), nested)  # responses: a list of structs
    items, errors = _split(iter_dataset(nested))
    assert errors == [] and [(i.id, len(i.responses)) for i in items] == [("q1", 3), ("q2", 2)]
    assert items[0].responses[0].human_score == 5.0
    flat = tmp_path / "flat.parquet"
    pd.DataFrame({"question": ["Q1", "Q2"], "response_a": ["x", "y"], "response_b": ["z", "w"],
                  "label": ["A", "tie"]}).to_parquet(flat)
    items, errors = _split(iter_dataset(flat))
    assert errors == [] and [i.pairs[0].human for i in items if i.pairs] == ["first", "tie"]
    # A same-named column can be ignored by mapping its field to nothing.
    items, _ = _split(iter_dataset(flat, mapping="label="))
    assert [i.pairs[0].human for i in items if i.pairs] == [None, None]


def test_unknown_column_names_the_file_and_the_column(theirs: Path) -> None:
    with pytest.raises(InputError) as info:
        iter_dataset(theirs, mapping="question=promt,response=output")
    assert info.value.file == str(theirs) and info.value.field == "promt"
    assert "no such column" in str(info.value) and "prompt" in str(info.value)
    with pytest.raises(InputError) as info:
        iter_dataset(theirs, mapping="response=output")
    assert "no question column" in str(info.value)
    with pytest.raises(ConfigError):
        parse_mapping("answer=output")
    with pytest.raises(ConfigError):
        parse_mapping("question")
    with pytest.raises(ConfigError):
        iter_dataset(theirs, "pandalm", mapping=MAPPING)


def test_bad_values_name_the_row_and_the_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    _frame().assign(rating=["5", "x", "1", None], output=["4", "Paris.", "5", None]).to_parquet(path)
    items, errors = _split(iter_dataset(path, mapping=MAPPING))
    assert [(e.file, e.line, e.field) for e in errors] == [(str(path), 2, "rating"), (str(path), 4, "output")]
    assert "must be a number" in str(errors[0]) and "is missing" in str(errors[1])
    assert [i.id for i in items] == ["7"]
    # A row of a group that disagrees with the group's first row on an item field.
    other = tmp_path / "other.parquet"
    _frame().assign(prompt=["What is 2 + 2?", "Capital of France?", "What is 3 + 3?", "Hi"]).to_parquet(other)
    _, errors = _split(iter_dataset(other, mapping=MAPPING))
    assert [(e.line, e.field) for e in errors] == [(3, "prompt")]  # the row that differs
    assert "differs from row 1's" in str(errors[0])
    # A bad value in a later response of a group names that response's row.
    later = tmp_path / "later.parquet"
    _frame().assign(rating=[5.0, 4.0, -float("inf"), None]).to_parquet(later)
    _, errors = _split(iter_dataset(later, mapping=MAPPING))
    assert [(e.line, e.field) for e in errors] == [(3, "rating")]


# -- input: JSON lines, JSON arrays, CSV in another schema --------------------------------------------------


def test_jsonl_flat_pairs_with_a_mapping(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "pairs.jsonl", [
        {"q": {"text": "Which is better?"}, "a": "x", "b": "y", "win": "A", "key": "p1"},
        {"q": {"text": "And now?"}, "a": "x", "b": "z", "win": "Z", "key": "p2"},
        {"q": {"text": "Last?"}, "a": "u", "b": "v", "key": "p3"},
    ])
    mapping = "question=q.text,response_a=a,response_b=b,label=win,id=key"
    items, errors = _split(iter_dataset(path, mapping=mapping))
    assert [(i.id, i.question, i.pairs[0].human if i.pairs else None) for i in items] == [
        ("p1", "Which is better?", "first"), ("p3", "Last?", None)]
    assert [(e.line, e.field) for e in errors] == [(2, "win")]
    with pytest.raises(InputError) as info:
        list(iter_dataset(path, mapping="question=q.text,response_a=a,response_b=bb"))
    assert info.value.field == "bb" and info.value.file == str(path)


def test_json_array_and_csv_with_a_mapping(tmp_path: Path) -> None:
    rows = [{"instruction": "Say hi", "output": "hi", "group": "g1"},
            {"instruction": "Say hi", "output": "hello", "group": "g1"}]
    array = tmp_path / "rows.json"
    array.write_text(json.dumps(rows), encoding="utf-8")
    items, errors = _split(iter_dataset(array, mapping="question=instruction,response=output,id=group"))
    assert errors == [] and [(i.id, len(i.responses)) for i in items] == [("g1", 2)]
    csv_path = tmp_path / "rows.csv"
    pd.DataFrame(rows).assign(score=["4", "oops"]).to_csv(csv_path, index=False)
    _, errors = _split(iter_dataset(csv_path, mapping="question=instruction,response=output,id=group,"
                                                      "human_score=score"))
    assert [(e.line, e.field) for e in errors] == [(3, "score")]  # the CSV line of the second row


# -- input: Hugging Face datasets ----------------------------------------------------------------------


def test_datasets_saved_on_disk_and_local_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")  # load_dataset's cache

    folder = tmp_path / "saved"
    datasets.Dataset.from_dict({"prompt": ["2+2?", "2+2?", "Hi"], "output": ["4", "5", "Hello"],
                                "uid": ["a", "a", "b"]}).save_to_disk(str(folder))
    assert detect_format(folder) == "datasets"
    items, errors = _split(iter_dataset(folder, mapping="question=prompt,response=output,id=uid"))
    assert errors == [] and [(i.id, len(i.responses)) for i in items] == [("a", 2), ("b", 1)]
    # A dataset dict with one split is read; with several, the error names them.
    one = tmp_path / "one"
    datasets.DatasetDict({"test": datasets.load_from_disk(str(folder))}).save_to_disk(str(one))
    assert len(_split(iter_dataset(one, mapping="question=prompt,response=output,id=uid"))[0]) == 2
    two = tmp_path / "two"
    ds = datasets.load_from_disk(str(folder))
    datasets.DatasetDict({"train": ds, "test": ds}).save_to_disk(str(two))
    with pytest.raises(InputError) as info:
        iter_dataset(two, mapping="question=prompt,response=output")
    assert "train, test" in str(info.value) and info.value.file == str(two)
    assert len(_split(iter_dataset(two / "test", mapping="question=prompt,response=output,id=uid"))[0]) == 2
    # Any local file datasets reads.
    jsonl = write_jsonl(tmp_path / "d.jsonl", [{"p": "Q?", "o": "A."}])
    items, _ = _split(iter_dataset(jsonl, "datasets", mapping="question=p,response=o"))
    assert [(i.id, i.responses[0].text) for i in items] == [("row-1", "A.")]
    with pytest.raises(InputError):
        iter_dataset(tmp_path / "items.txt", "datasets")


def test_datasets_is_imported_offline(tmp_path: Path) -> None:
    """Before importing datasets, trustjudge tells it and the hub client never to go online."""
    code = ("import os, sys; from trustjudge.io._adapters import iter_dataset\n"
            "assert len(list(iter_dataset(sys.argv[1], 'datasets', mapping='question=p,response=o'))) == 1\n"
            "import datasets\n"
            "print(os.environ['HF_DATASETS_OFFLINE'], os.environ['HF_HUB_OFFLINE'], datasets.config.HF_HUB_OFFLINE)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env["HF_DATASETS_CACHE"] = str(tmp_path / "hf-cache")
    data = write_jsonl(tmp_path / "d.jsonl", [{"p": "Q?", "o": "A."}])
    result = subprocess.run([sys.executable, "-c", code, str(data)], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "1", "True"]


def test_a_missing_extra_names_it(tmp_path: Path, theirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from trustjudge.io import _frames

    real = importlib.import_module

    def missing(name: str, *args: Any) -> Any:
        if name.split(".", maxsplit=1)[0] in ("datasets", "pyarrow", "pandas"):
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(_frames.importlib, "import_module", missing)
    with pytest.raises(PrerequisiteError, match=r"trustjudge\[datasets\]"):
        iter_dataset(tmp_path, "datasets")
    with pytest.raises(PrerequisiteError, match=r"trustjudge\[data\]"):
        iter_dataset(theirs, mapping=MAPPING)
    with pytest.raises(PrerequisiteError, match=r"trustjudge\[data\]"):
        to_pandas([])
    with pytest.raises(PrerequisiteError, match=r"trustjudge\[data\]"), record_output(tmp_path / "x.parquet"):
        pass
    assert not (tmp_path / "x.parquet").exists()


# -- the CLI reads them, and writes Parquet ------------------------------------------------------------------


def test_cli_judges_a_mapped_parquet_file_and_writes_parquet(tmp_path: Path, theirs: Path) -> None:
    store = tmp_path / "s.sqlite"
    jsonl, parquet = tmp_path / "scores.jsonl", tmp_path / "scores.parquet"
    for out in (jsonl, parquet):
        result = _invoke("score", theirs, "--map", "question=prompt,response=output", "--map", "id=uid",
                         "-j", "mock/hash", "--store", store, "-q", "--out", out)
        assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    frame = pd.read_parquet(parquet)
    assert len(frame) == len(rows) == 4
    assert {"item_id", "response_id", "scores.trustjudge", "scores.discrete", "label_mass"} <= set(frame.columns)
    assert frame["scores.trustjudge"].tolist() == pytest.approx([r["scores"]["trustjudge"] for r in rows])
    compare = tmp_path / "pairs.parquet"
    result = _invoke("compare", theirs, "--map", MAPPING, "-j", "mock/hash", "--store", store, "-q", "--out", compare,
                     "--skip-invalid")
    assert result.exit_code == 0, result.output
    pairs = pd.read_parquet(compare)
    assert pairs[["item_id", "first_id", "second_id"]].values.tolist() == [["7", "0", "1"]]
    assert {"verdicts.likelihood", "probabilities.first", "orders.1.A", "orders.2.C"} <= set(pairs.columns)


def test_cli_map_errors(tmp_path: Path, theirs: Path) -> None:
    result = _invoke("score", theirs, "--map", "question=promt,response=output", "-j", "mock/hash",
                     "--store", tmp_path / "s.sqlite", "-q")
    assert result.exit_code != 0 and "promt" in str(result.exception) and str(theirs) in str(result.exception)
    result = _invoke("score", theirs, "--map", "quest=prompt", "-j", "mock/hash", "--store", tmp_path / "s.sqlite")
    assert result.exit_code == 2 and "cannot map a column to 'quest'" in result.output


def test_cli_reads_a_datasets_folder(tmp_path: Path) -> None:
    import datasets

    folder = tmp_path / "saved"
    datasets.Dataset.from_dict({"prompt": ["2+2?", "Hi"], "output": ["4", "Hello"]}).save_to_disk(str(folder))
    out = tmp_path / "o.jsonl"
    result = _invoke("score", folder, "--map", "question=prompt,response=output", "-j", "mock/hash",
                     "--store", tmp_path / "s.sqlite", "-q", "--out", out)
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["item_id"] for line in out.read_text().splitlines()] == ["row-1", "row-2"]


def test_criteria_and_checklist_write_parquet(tmp_path: Path, items_file: Path) -> None:
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"criteria": [{"name": "accuracy", "description": "Is it right?"},
                                              {"name": "clarity", "description": "Is it clear?"}],
                                 "checklist": [{"id": "c1", "text": "Does it answer?"}]}), encoding="utf-8")
    for command, columns in (("criteria", {"criteria.accuracy.expected", "criteria.clarity.trustjudge",
                                           "aggregate.expected", "spread"}),
                             ("checklist", {"checks.c1.p_pass", "checks.c1.probabilities.YES", "satisfaction"})):
        out = tmp_path / f"{command}.parquet"
        result = _invoke(command, items_file, "--suite", suite, "-j", "mock/hash", "--store", tmp_path / "s.sqlite",
                         "-q", "--out", out)
        assert result.exit_code == 0, result.output
        frame = pd.read_parquet(out)
        assert len(frame) == 5 and columns <= set(frame.columns)


def test_parquet_output_appears_only_complete(tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    with record_output(out) as fh:
        fh.write(json.dumps({"item_id": "q", "scores": {"trustjudge": 7.5}}) + "\n")
    assert pd.read_parquet(out)["scores.trustjudge"].tolist() == [7.5]
    before = out.read_bytes()
    with pytest.raises(RuntimeError), record_output(out) as fh:
        fh.write(json.dumps({"item_id": "other"}) + "\n")
        raise RuntimeError("judging failed half way")
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.parquet"]  # no temporary file left behind


# -- to_pandas -------------------------------------------------------------------------------------------------


def test_to_pandas_has_one_column_per_method_and_criterion(tmp_path: Path) -> None:
    items = items_from_dicts(small_items())
    criteria = [Criterion("accuracy", "Is it right?"), Criterion("clarity", "Is it clear?", weight=2)]
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    try:
        kinds = {
            "score": (list(judge.score(items)), {"scores.trustjudge", "scores.geval", "entropy"}),
            "compare": (list(judge.compare(items)), {"verdicts.likelihood", "probabilities.tie", "orders.1.A"}),
            "criteria": (list(judge.criteria(items, criteria)),
                         {"criteria.accuracy.expected", "criteria.clarity.trustjudge", "criteria.clarity.weight",
                          "aggregate.trustjudge"}),
            "checklist": (list(judge.checklist(items, [Check("c1", "Does it answer?")])),
                          {"checks.c1.p_pass", "checks.c1.value", "p_all"}),
            "criteria-compare": (list(judge.compare_criteria(items, criteria)),
                                 {"criteria.accuracy.verdict", "criteria.clarity.probabilities.first",
                                  "aggregate.first", "margin"}),
        }
    finally:
        judge.close()
    for kind, (records, columns) in kinds.items():
        frame = to_pandas(records)
        assert len(frame) == len(records) and columns <= set(frame.columns), kind
        from_dicts = to_pandas(r.to_dict() for r in records)
        pd.testing.assert_frame_equal(frame, from_dicts)
    scores = to_pandas(kinds["score"][0])
    assert scores["scores.trustjudge"].tolist() == [r.scores["trustjudge"] for r in kinds["score"][0]]
    # A null nested field beside others' columns leaves no column of its own.
    rows = [{"id": 1, "probabilities": None}, {"id": 2, "probabilities": {"first": 0.5}}]
    assert to_pandas(rows).columns.tolist() == ["id", "probabilities.first"]
    assert flatten({"orders": [{"A": 0.1}, {"A": 0.2}]}) == {"orders.1.A": 0.1, "orders.2.A": 0.2}
    with pytest.raises(ConfigError):
        to_pandas([42])


# -- the store, read-only ------------------------------------------------------------------------------------


@pytest.fixture
def judged(tmp_path: Path, items_file: Path) -> Path:
    store = tmp_path / "judged.sqlite"
    judge = Judge("mock/hash", store=store)
    try:
        items = items_from_dicts(small_items())
        list(judge.score(items))
        list(judge.compare(items))
    finally:
        judge.close()
    cot = Judge("mock/hash", store=store, protocol="cot", scale=5)
    try:
        list(cot.score(items_from_dicts(small_items()[:1])))
    finally:
        cot.close()
    return store


def _snapshot(store: Path) -> tuple[bytes, int]:
    """The store's bytes and time; a read-only reader of a WAL store may leave an empty -wal file, never data."""
    wal = Path(f"{store}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    return store.read_bytes(), store.stat().st_mtime_ns


def test_store_stats_and_export(tmp_path: Path, judged: Path) -> None:
    before = _snapshot(judged)
    stats = _invoke("store", "stats", "--store", judged, "--json")
    assert stats.exit_code == 0, stats.output
    data = json.loads(stats.stdout)
    groups = {(g["backend"], g["kind"]): g for g in data["groups"]}
    # 5 responses scored on 10 points, 4 pairs in both orders; the cot run: 3 critiques and their 3 labels.
    assert {k: g["outputs"] for k, g in groups.items()} == {("mock:hash", "labels"): 5 + 8 + 3,
                                                            ("mock:hash", "generate"): 3}
    assert data["outputs"] == 19 and groups[("mock:hash", "labels")]["prompt_tokens"] > 0
    assert groups[("mock:hash", "generate")]["first"] <= groups[("mock:hash", "generate")]["last"]
    table = _invoke("store", "stats", "--store", judged)
    assert "mock:hash" in table.stdout and "19 outputs" in table.stdout

    export = _invoke("store", "export", "--store", judged)
    rows = [json.loads(line) for line in export.stdout.splitlines()]
    assert len(rows) == 19
    assert set(rows[0]) == {"key", "kind", "backend", "request", "result", "prompt_tokens", "completion_tokens",
                            "latency_s", "created", "created_at"}
    labels = [r for r in rows if r["kind"] == "labels"]
    assert all(len(r["request"]["labels"]) == len(r["result"]["logprobs"]) for r in labels)
    out = tmp_path / "store.parquet"
    assert _invoke("store", "export", "--store", judged, "--out", out, "--kind", "generate").exit_code == 0
    frame = pd.read_parquet(out)
    assert len(frame) == 3 and {"key", "request.prompt", "result.text", "result.finish_reason"} <= set(frame.columns)
    by_judge = _invoke("store", "export", "--store", judged, "--judge", "mock/hash")
    assert len(by_judge.stdout.splitlines()) == 19
    other = _invoke("store", "export", "--store", judged, "--backend", "mock:other")
    assert other.exit_code == 0 and other.stdout == ""
    # It refuses to overwrite the store, and it never writes it.
    refused = _invoke("store", "export", "--store", judged, "--out", judged)
    assert refused.exit_code != 0 and "would overwrite" in str(refused.exception)
    assert _snapshot(judged) == before
    missing = _invoke("store", "stats", "--store", tmp_path / "none.sqlite")
    assert missing.exit_code != 0 and "no judgment store" in str(missing.exception)
    assert not (tmp_path / "none.sqlite").exists()


def test_store_show_an_items_judgments(tmp_path: Path, judged: Path, items_file: Path) -> None:
    judge = Judge("mock/hash", store=judged)
    try:
        record = next(r for r in judge.score(items_from_dicts(small_items())) if r.item_id == "q2")
    finally:
        judge.close()
    before = _snapshot(judged)
    shown = _invoke("store", "show", items_file, "q2", "-j", "mock/hash", "--store", judged, "--json")
    assert shown.exit_code == 0, shown.output
    entries = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [(e["judgment"], e.get("response_id"), e.get("order")) for e in entries] == [
        ("score", "r1", None), ("score", "r2", None), ("compare", None, 1), ("compare", None, 2)]
    assert all(o.get("stored", True) and o["kind"] == "labels" for e in entries for o in e["outputs"])
    # The stored distribution is the one the score record was computed from.
    output = entries[0]["outputs"][0]
    assert output["request"]["labels"][:2] == ["1]", "2]"] and record.label_mass == pytest.approx(
        sum(2.718281828459045 ** lp for lp in output["result"]["logprobs"]))
    # Another scale was never judged; the cot protocol shows the critique, then the labels read after it.
    other = _invoke("store", "show", items_file, "q2", "-j", "mock/hash", "--store", judged, "--scale", "100",
                    "--kind", "score")
    assert other.exit_code == 0 and other.stdout.count("not in the store") == 2
    cot = _invoke("store", "show", items_file, "q1", "-j", "mock/hash", "--store", judged, "--scale", "5",
                  "--protocol", "cot", "--kind", "score", "--prompt")
    assert cot.exit_code == 0, cot.output
    assert cot.stdout.count("generate s256:") == 3 and cot.stdout.count("labels s256:") == 3
    assert "not in the store" not in cot.stdout and "critique" in cot.stdout and "prompt:" in cot.stdout
    absent = _invoke("store", "show", items_file, "q9", "-j", "mock/hash", "--store", judged)
    assert absent.exit_code != 0 and "no valid item with id 'q9'" in str(absent.exception)
    assert _snapshot(judged) == before


def test_store_show_criteria_and_checklist_judgments(tmp_path: Path) -> None:
    # A criteria run from a suite and a checklist run with its own labels: `store show` rebuilds every prompt
    # from the same options and finds each stored distribution; with other options it finds none.
    items = tmp_path / "items.jsonl"
    write_jsonl(items, [{"id": "t", "question": "How do I brew tea?",
                         "responses": [{"id": "a", "text": "Steep two minutes at 80 C."},
                                       {"id": "b", "text": "Boil it for ten minutes.",
                                        "checklist": [{"id": "own", "text": "Is it short?"}]}],
                         "checklist": [{"id": "temp", "text": "Does it give a temperature?"},
                                       {"id": "time", "text": "Does it give a time?"}]}])
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"criteria": [{"name": "accuracy", "description": "Correct?", "weight": 2},
                                              {"name": "fit", "description": "Suits them?",
                                               "levels": ["no", "partly", "yes"]}], "scale": 10}))
    store = tmp_path / "s.sqlite"
    common = ("-j", "mock/hash", "--store", store)
    assert _invoke("criteria", items, "--suite", suite, *common).exit_code == 0
    assert _invoke("checklist", items, "--labels", "Y=1,N=0", *common).exit_code == 0
    before = _snapshot(store)
    shown = _invoke("store", "show", items, "t", *common, "--suite", suite, "--labels", "Y=1,N=0", "--json")
    assert shown.exit_code == 0, shown.output
    entries = [json.loads(line) for line in shown.stdout.splitlines()]
    crit = [(e["response_id"], e["criterion"], e["scale"]) for e in entries if e["judgment"] == "criteria"]
    assert crit == [("a", "accuracy", 10), ("a", "fit", 3), ("b", "accuracy", 10), ("b", "fit", 3)]
    checks = [(e["response_id"], e["check"]) for e in entries if e["judgment"] == "checklist"]
    assert checks == [("a", "temp"), ("a", "time"), ("b", "temp"), ("b", "time"), ("b", "own")]
    modes = [e for e in entries if e["judgment"] in ("criteria", "checklist")]
    assert all(o.get("stored", True) and o["kind"] == "labels" for e in modes for o in e["outputs"])
    assert [e["outputs"][0]["request"]["labels"] for e in modes if e["judgment"] == "checklist"] == [["Y]", "N]"]] * 5
    # Another criteria scale or label set was never judged; the text form names the criterion and the check.
    other = _invoke("store", "show", items, "t", *common, "--suite", suite, "--criteria-scale", "5", "--kind",
                    "criteria")
    assert other.exit_code == 0 and other.stdout.count("not in the store") == 2  # accuracy of a and b (fit: levels)
    text = _invoke("store", "show", items, "t", *common, "--kind", "checklist")
    assert "check temp (YES/NO, direct)" in text.stdout and text.stdout.count("not in the store") == 5
    # Asked for criteria by name, an item with none (and no suite) is refused by name.
    refused = _invoke("store", "show", items, "t", *common, "--kind", "criteria")
    assert refused.exit_code != 0 and "criteria" in str(refused.exception)
    assert _snapshot(store) == before


def test_store_search(judged: Path) -> None:
    found = _invoke("store", "search", "Name a primary colour.", "--store", judged, "--json")
    rows = [json.loads(line) for line in found.stdout.splitlines()]
    # q2's 2 scores and its pair in both orders.
    assert len(rows) == 4 and all("Name a primary colour." in r["request"]["prompt"] for r in rows)
    key = rows[0]["key"]
    by_key = _invoke("store", "search", key[:16], "--store", judged)
    assert by_key.exit_code == 0 and key in by_key.stdout
    limited = _invoke("store", "search", "[user]", "--store", judged, "--limit", "2", "--json")
    assert len(limited.stdout.splitlines()) == 2
