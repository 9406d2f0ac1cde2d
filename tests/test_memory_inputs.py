"""Data where users keep it: DataFrames, ``datasets.Dataset`` and lists of dicts judged as they are, the public
``read_items``, and ``--out x.csv``."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from click.testing import CliRunner

from trustjudge import InputError, Judge, items_from_dicts, read_items, to_pandas
from trustjudge.cli import cli

from .conftest import write_jsonl

ROWS = [{"prompt": "What is 2 + 2?", "output": "4", "model": "m1"},
        {"prompt": "Capital of France?", "output": "Paris", "model": "m2"},
        {"prompt": "Capital of France?", "output": "Lyon", "model": "m1"}]
MAP = "question=prompt,response=output,system=model"


@pytest.fixture
def judge(tmp_path: Path) -> Judge:
    return Judge("mock/hash", store=tmp_path / "s.sqlite")


def test_a_list_of_dicts_is_judged_and_each_record_names_its_row(judge: Judge) -> None:
    records = list(judge.score(ROWS, mapping=MAP))
    assert [(r.item_id, r.system) for r in records] == [("0", "m1"), ("1", "m2"), ("2", "m1")]
    assert all(r.scores["trustjudge"] is not None for r in records)


def test_a_dataframe_keeps_its_index_and_matches_the_items_it_maps_to(judge: Judge) -> None:
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(ROWS, index=["a", "b", "c"])
    records = list(judge.score(df, mapping=MAP))
    assert [r.item_id for r in records] == ["a", "b", "c"]
    items = items_from_dicts([{"id": k, "question": r["prompt"], "responses": [{"id": "0", "text": r["output"]}]}
                              for k, r in zip("abc", ROWS)])
    assert [r.scores for r in judge.score(items)] == [r.scores for r in records]  # the items the rows stand for
    # grouped by a question id, each response is named by its row's index
    df["qid"] = ["q1", "q2", "q2"]
    grouped = list(judge.score(df, mapping=MAP + ",id=qid"))
    assert [(r.item_id, r.response_id) for r in grouped] == [("q1", "a"), ("q2", "b"), ("q2", "c")]


def test_a_hugging_face_dataset_and_pairs(judge: Judge) -> None:
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_list([{"instruction": "Say hi", "a": "hi", "b": "hello"},
                                     {"instruction": "Say bye", "a": "bye", "b": "ciao"}])
    records = list(judge.compare(ds, mapping="question=instruction,response_a=a,response_b=b"))
    assert [r.item_id for r in records] == ["0", "1"]
    assert all(r.verdicts for r in records)
    with pytest.raises(TypeError, match="train"):
        judge.score(datasets.DatasetDict({"train": ds}))


def test_criteria_checklist_claims_and_run_take_dicts(judge: Judge) -> None:
    rows = [{"question": "2+2?", "response": "4", "criteria": [{"name": "accuracy", "description": "correct"}],
             "checklist": [{"id": "c1", "text": "Is it 4?"}]}]
    assert [r.item_id for r in judge.criteria(rows)] == ["0"]
    assert [r.item_id for r in judge.checklist(rows)] == ["0"]
    assert [r.item_id for r in judge.run(judge.score_task(), rows)] == ["0"]
    claims_rows = [{"question": "q", "response": "Paris is in France.", "reference": "Paris is in France."}]
    assert [r.item_id for r in judge.claims(claims_rows)] == ["0"]


@pytest.mark.parametrize("bad", [5, "items.jsonl", {"question": "q", "response": "r"}, [1, 2], [{"question": "q"}, 3]])
def test_anything_else_is_a_type_error_naming_what_is_accepted(judge: Judge, bad: object) -> None:
    with pytest.raises(TypeError, match=r"DataFrame.*datasets\.Dataset"):
        judge.score(bad)


def test_a_bad_row_names_the_row_and_field_before_anything_is_judged(judge: Judge) -> None:
    rows = [*ROWS, {"prompt": "q", "output": 3.5j}]
    with pytest.raises(InputError, match=r"<list>:4: field 'output'"):
        judge.score(rows, mapping=MAP)
    assert judge.stats.model_calls == 0
    with pytest.raises(InputError, match="has no response column"):
        judge.score([{"question": "q"}])


def test_a_generator_of_items_or_dicts_is_judged(judge: Judge) -> None:
    items = read_items(ROWS, mapping=MAP)
    assert [r.item_id for r in judge.score(i for i in items)] == ["0", "1", "2"]
    assert [r.item_id for r in judge.score((r for r in ROWS), mapping=MAP)] == ["0", "1", "2"]
    plain = ({"question": r["prompt"], "response": r["output"]} for r in ROWS)
    assert [r.item_id for r in judge.score(plain)] == ["0", "1", "2"]
    mixed = judge.score(x for x in [items[0], 7])
    with pytest.raises(TypeError, match="int among the items"):
        list(mixed)


def test_read_items_reads_files_tables_and_dicts(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    from_file = read_items(path, mapping=MAP)
    from_list = read_items(ROWS, mapping=MAP)
    assert [i.question for i in from_file] == [i.question for i in from_list]
    assert [i.id for i in from_file] == ["row-1", "row-2", "row-3"] and [i.id for i in from_list] == ["0", "1", "2"]
    assert read_items(from_list) == from_list
    with pytest.raises(InputError, match=r"bad.jsonl:2: field .output."):
        read_items(write_jsonl(tmp_path / "bad.jsonl", [ROWS[0], {"prompt": "q", "output": None}]), mapping=MAP)


def test_out_csv_writes_the_to_pandas_columns_and_unknown_extensions_are_refused(tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", [
        {"id": "q1", "question": "2+2?", "responses": [{"id": "a", "text": "4"}, {"id": "b", "text": "5"}]}])
    out = tmp_path / "scores.csv"
    args = ["score", str(items), "--judge", "mock/hash", "--store", str(tmp_path / "s.sqlite"), "-q"]
    result = CliRunner().invoke(cli, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    frame = to_pandas(judge.score(read_items(items)))
    assert list(rows[0]) == list(frame.columns)
    assert [float(r["scores.trustjudge"]) for r in rows] == pytest.approx(frame["scores.trustjudge"].tolist())
    refused = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "scores.xlsx")])
    said = refused.output + str(refused.exception)
    assert refused.exit_code != 0 and "'.xlsx'" in said and "model calls" not in said
    assert not (tmp_path / "scores.xlsx").exists()


def test_the_module_functions_take_tables_and_a_progress_bar(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    import trustjudge

    records = trustjudge.score(ROWS, "mock/hash", mapping=MAP, progress=True, store=tmp_path / "s.sqlite")
    assert [r.item_id for r in records] == ["0", "1", "2"]
    assert "3/3" in capsys.readouterr().err  # the bar's total is known for an in-memory table
    pairs = trustjudge.compare([{"question": "q", "response_a": "x", "response_b": "y"}], "mock/hash",
                               store=tmp_path / "s.sqlite")
    assert [p.item_id for p in pairs] == ["0"]


# -- audit, rank, calibrate and plan take the same sources ----------------------------------------------
TABLE = [{"qid": "q1", "prompt": "What is 2 + 2?", "output": "4", "model": "m1", "rating": 9},
         {"qid": "q1", "prompt": "What is 2 + 2?", "output": "5", "model": "m2", "rating": 2},
         {"qid": "q2", "prompt": "Capital of France?", "output": "Paris", "model": "m1", "rating": 10},
         {"qid": "q2", "prompt": "Capital of France?", "output": "Lyon", "model": "m2", "rating": 3},
         {"qid": "q3", "prompt": "Name a colour.", "output": "blue", "model": "m1", "rating": 8},
         {"qid": "q3", "prompt": "Name a colour.", "output": "seven", "model": "m2", "rating": 1}]
TABLE_MAP = "id=qid,question=prompt,response=output,system=model,human_score=rating"


def _source(kind: str) -> object:
    if kind == "dicts":
        return [dict(r) for r in TABLE]
    if kind == "dataframe":
        return pytest.importorskip("pandas").DataFrame(TABLE)
    return pytest.importorskip("datasets").Dataset.from_list(TABLE)


@pytest.mark.parametrize("kind", ["dicts", "dataframe", "dataset"])
def test_audit_rank_calibrate_and_plan_take_a_table_with_a_mapping(tmp_path: Path, kind: str) -> None:
    items = read_items(TABLE, mapping=TABLE_MAP)
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    want_plan = judge.plan(items, "score")
    got_plan = judge.plan(_source(kind), "score", mapping=TABLE_MAP)
    assert (got_plan.judgments, got_plan.model_calls) == (want_plan.judgments, want_plan.model_calls) == (6, 6)
    audit = judge.audit(_source(kind), scales=(5,), bootstrap=20, mapping=TABLE_MAP)
    want = judge.audit(items, scales=(5,), bootstrap=20)
    assert audit.compare_records == want.compare_records and len(audit.compare_records) == 3
    assert audit.score_records == want.score_records
    assert [r["item_id"] for r in audit.score_records[5]] == ["q1", "q1", "q2", "q2", "q3", "q3"]
    ranking = judge.rank(_source(kind), bootstrap=20, mapping=TABLE_MAP)
    assert ranking == judge.rank(items, bootstrap=20)
    calibration = judge.calibrate(_source(kind), "score", mapping=TABLE_MAP)
    assert calibration.to_dict() == judge.calibrate(items, "score").to_dict()
    assert [s.system for s in ranking.systems] and {s.system for s in ranking.systems} == {"m1", "m2"}


@pytest.mark.parametrize("method", ["audit", "rank", "calibrate", "plan"])
@pytest.mark.parametrize("bad", [5, "items.jsonl", {"question": "q", "response": "r"}])
def test_audit_rank_calibrate_and_plan_refuse_anything_else_naming_what_is_accepted(
        tmp_path: Path, method: str, bad: object) -> None:
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    call = {"audit": lambda: judge.audit(bad), "rank": lambda: judge.rank(bad),
            "calibrate": lambda: judge.calibrate(bad, "score"), "plan": lambda: judge.plan(bad, "score")}[method]
    with pytest.raises(TypeError, match=r"DataFrame.*datasets\.Dataset"):
        call()
    assert judge.stats.model_calls == 0


def test_select_and_cascade_take_a_table_with_a_mapping(tmp_path: Path) -> None:
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    rows = [{"q": f"Question {i}?", "a": f"answer {i}", "b": f"other {7 * i}"} for i in range(40)]
    pairs = "question=q,response_a=a,response_b=b"
    for row, rec in zip(rows, judge.compare(rows, mapping=pairs)):  # human labels the judge agrees with
        row["label"] = {"first": "A", "second": "B", "tie": "tie"}[str(rec.verdicts["likelihood"])]
    mapping = pairs + ",label=label"
    items = read_items(rows, mapping=mapping)
    calibration = judge.calibrate(rows, "compare", mapping=mapping)
    selected, _ = judge.select(rows, calibration, mapping=mapping)
    assert len(selected) == 40 and selected == judge.select(items, calibration)[0]
    cascaded, _ = judge.cascade(rows, [(judge, calibration)], target=0.8, mapping=mapping)
    assert cascaded == judge.cascade(items, [(judge, calibration)], target=0.8)[0]
    with pytest.raises(TypeError, match=r"DataFrame.*datasets\.Dataset"):
        judge.cascade(5, [(judge, calibration)], target=0.8)
