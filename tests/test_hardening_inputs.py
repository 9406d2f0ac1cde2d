"""Inputs and the judge client, hardened (issue 23): each test failed before its fix.

The command line runs in-process through ``trustjudge.cli.main`` (its error handling included) on the
``mock/hash`` judge; the judge-server tests run a loopback socket that accepts and never answers (or
answers a byte at a time), so no test here needs a model.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from trustjudge import Check, Criterion, InputError, Item, Judge, items_from_dicts, iter_items, load_items
from trustjudge.errors import BackendUnavailable

from ._silent_server import SilentServer
from .conftest import run_cli, small_items, time_limit, write_jsonl


def main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """Run the CLI's entry point in-process; return (exit status, stdout, stderr)."""
    return run_cli(capsys, *args)


def records(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# -- a judge server that accepts connections and never answers -----------------------------------------


def test_a_server_that_never_answers_stops_the_run_fast_with_the_cause(tmp_path: Path, items_file: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("httpx")
    server = SilentServer()
    with server as url:
        began = time.monotonic()
        with time_limit(60):
            code, _, err = main(capsys, "score", items_file, "-j", f"http/judge@{url}?timeout=1", "-q",
                                "--store", tmp_path / "s.sqlite", "--out", tmp_path / "o.jsonl")
        took = time.monotonic() - began
    # Before: every token count and every judgment waited out the whole retry budget (minutes in all).
    assert code == 2 and "has not answered any request" in err and "1 s timeout" in err, err
    assert took < 15, took
    assert server.accepted <= 3  # one request and its one retry, not one per judgment
    assert "Traceback" not in err and not (tmp_path / "o.jsonl").exists()


def test_an_answer_that_trickles_in_is_cut_at_the_requests_deadline(tmp_path: Path) -> None:
    pytest.importorskip("httpx")
    from trustjudge.backends._openai import OpenAICompatibleBackend

    outcome: list[BaseException | None] = []
    with SilentServer(trickle_s=0.2) as url:
        backend = OpenAICompatibleBackend("m", url, labels="top_k", context_length=4096, timeout_s=1.0)
        judge = Judge(backend, store=tmp_path / "s.sqlite", scale=5, retry_base_s=0.0)

        def run() -> None:
            try:
                list(judge.score(items_from_dicts(small_items())))
                outcome.append(None)
            except BaseException as exc:  # the outcome is checked below, in the test's thread
                outcome.append(exc)

        worker = threading.Thread(target=run, daemon=True)  # a hang fails the test instead of hanging it
        began = time.monotonic()
        worker.start()
        worker.join(20)
        took = time.monotonic() - began
        # Before: httpx's read timeout restarts with each byte, so this never ended.
        assert not worker.is_alive(), "the trickled answer was never cut"
        judge.close()
    assert isinstance(outcome[0], BackendUnavailable), outcome
    assert "not complete within the 1 s timeout" in str(outcome[0]) and took < 10


def test_a_server_that_stops_answering_stops_the_run_after_two_unanswered_requests(tmp_path: Path) -> None:
    httpx = pytest.importorskip("httpx")
    from trustjudge.backends._openai import OpenAICompatibleBackend

    completions: list[str] = []

    def handler(request: Any) -> Any:
        if request.url.path == "/tokenize":  # it answered once: the server is known to work
            return httpx.Response(200, json={"tokens": [1, 2, 3]})
        completions.append(request.url.path)
        raise httpx.ReadTimeout("no answer", request=request)

    backend = OpenAICompatibleBackend("m", "http://judge.invalid", labels="top_k", context_length=4096,
                                      transport=httpx.MockTransport(handler))
    judge = Judge(backend, store=tmp_path / "s.sqlite", scale=5, retry_base_s=0.0)
    try:
        with time_limit(30), pytest.raises(BackendUnavailable, match="2 requests in a row unanswered"):
            list(judge.score(items_from_dicts(small_items())))
    finally:
        judge.close()
    # Before: each of the 5 judgments spent the whole budget (5 tries) and the run ended "scored" as
    # backend_error; now two requests' budgets (5 tries each) and the run stops. The one request before them
    # is the API detection (a one-token completion, tried once: chat or completions?).
    assert len(completions) == 1 + 10


# -- G11: huge numbers and deep nesting -------------------------------------------------------------------


def test_a_huge_weight_is_refused_naming_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"criteria": [{"name": "a", "description": "A?", "weight": 1e308},
                                              {"name": "b", "description": "B?", "weight": 1e308}]}))
    items = write_jsonl(tmp_path / "items.jsonl", small_items())
    code, _, err = main(capsys, "criteria", items, "--suite", suite, "-j", "mock/hash", "-q",
                        "--store", tmp_path / "s.sqlite")
    # Before: OverflowError in the weighted sum (a traceback; a 500 in the service).
    assert code == 2 and f"{suite}:1: field 'criteria[0].weight': must be at most" in err, err
    line = {"id": "q", "question": "Q?", "responses": [{"text": "a"}],
            "checklist": [{"text": "ok?", "weight": 10 ** 400}]}
    (tmp_path / "w.jsonl").write_text(json.dumps(line) + "\n")
    errors = [str(v) for v in iter_items(tmp_path / "w.jsonl") if isinstance(v, InputError)]
    # Before: OverflowError (int too large to convert to float).
    assert len(errors) == 1 and errors[0].startswith(f"{tmp_path / 'w.jsonl'}:1: field 'checklist[0].weight': "
                                                     "must be a finite number"), errors


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_a_deeply_nested_suite_is_a_clear_error(tmp_path: Path, suffix: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / f"suite{suffix}"
    deep = "[" * 100_000 + "]" * 100_000
    suite.write_text(f'{{"criteria": {deep}}}' if suffix == ".json" else f"criteria = {deep}\n")
    items = write_jsonl(tmp_path / "items.jsonl", small_items())
    code, _, err = main(capsys, "criteria", items, "--suite", suite, "-j", "mock/hash", "-q",
                        "--store", tmp_path / "s.sqlite")
    # Before: RecursionError (a traceback).
    assert code == 2 and f"{suite}" in err and "nested too deeply" in err, err
    assert "Traceback" not in err


# -- G12: a JSON array of items ---------------------------------------------------------------------------


def test_a_json_array_of_items_is_read_as_items(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "items.json"
    path.write_text(json.dumps(small_items(), indent=2))
    code, out, err = main(capsys, "score", path, "-j", "mock/hash", "-q", "--store", tmp_path / "s.sqlite")
    # Before: "cannot tell the dataset format of this JSON array" unless a dummy --map was given.
    assert code == 0, err
    assert [(r["item_id"], r["response_id"]) for r in records(out)] == [
        ("q1", "r1"), ("q1", "r2"), ("q1", "r3"), ("q2", "r1"), ("q2", "r2")]
    assert [it.id for it in load_items(path)] == ["q1", "q2"]
    # A bad element is named by the line it starts on; the others are read.
    bad = [*small_items(), {"id": "q3", "responses": [{"text": "x"}]}]
    path.write_text(json.dumps(bad, indent=1))
    starts = [n for n, text in enumerate(path.read_text().splitlines(), start=1) if text == " {"]
    values = list(iter_items(path))
    assert [v.id for v in values if isinstance(v, Item)] == ["q1", "q2"]
    errors = [str(v) for v in values if isinstance(v, InputError)]
    assert errors == [f"{path}:{starts[2]}: field 'question': is missing"]


# -- G13: the pytest helpers and criteria built in code ---------------------------------------------------


@pytest.mark.parametrize(("response", "message"), [
    (None, "field 'response': must be a string, got NoneType"),
    (7, "field 'response': must be a string, got int"),
    ("fine \ud800", "field 'response': contains a lone surrogate (U+D800"),
])
def test_the_pytest_helpers_refuse_a_response_that_is_not_text(tmp_path: Path, response: Any, message: str) -> None:
    from trustjudge.pytest_plugin import assert_beats, assert_scores_at_least

    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    try:
        # Before: AttributeError / UnicodeEncodeError from deep inside the judging.
        with pytest.raises(InputError, match=re.escape(message)):
            assert_scores_at_least(judge, "Q?", response, 1)
        with pytest.raises(InputError, match="field 'response B'"):
            assert_beats(judge, "Q?", "fine", response)
    finally:
        judge.close()


@pytest.mark.parametrize(("make", "field"), [
    (lambda: Criterion("a", "", weight=1), "description"),
    (lambda: Criterion("", "d"), "name"),
    (lambda: Criterion("a", "d", weight=-1), "weight"),
    (lambda: Criterion("a", "d", weight=float("nan")), "weight"),
    (lambda: Criterion("a", "d", weight=1e308), "weight"),
    (lambda: Criterion("a", "d", levels=("only one",)), "levels"),
    (lambda: Check("c", "Is it?", weight=float("inf")), "weight"),
    (lambda: Check("", "Is it?"), "id"),
])
def test_criteria_and_checks_built_in_code_are_validated(make: Any, field: str) -> None:
    # Before: Criterion("a", "", weight=-1) was accepted (and a negative weight flipped the aggregate).
    with pytest.raises(InputError, match=f"field '{field}'"):
        make()
    assert Criterion("a", "d", weight=2).weight == 2.0 and Criterion("a", "d", levels=["x", "y"]).levels == ("x", "y")


# -- G15: --skip-invalid says what it left out ------------------------------------------------------------


def test_skip_invalid_reports_every_row_an_item_of_several_rows_loses(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "items.csv"
    path.write_text("id,question,response_id,response,human_score\n"
                    "q1,Q1?,a,one,1\nq1,Q1?,b,two,x\nq1,Q1?,c,three,3\nq2,Q2?,a,fine,2\n")
    code, out, err = main(capsys, "score", path, "-j", "mock/hash", "--skip-invalid", "--store", tmp_path / "s.sqlite")
    assert code == 0, err
    assert {r["item_id"] for r in records(out)} == {"q2"}
    # Before: "1 invalid line(s) skipped", while three rows (all of q1) were left out.
    assert f"{path}:3: field 'human_score': must be a number" in err, err  # the bad row and its column
    assert "item 'q1' is left out whole: all its 3 rows, lines 2-4" in err, err
    assert "3 line(s) of 1 invalid item(s)" in err and "skipped" in err
    assert "1 invalid line(s) skipped" not in err


# -- G16: store export to Parquet streams -----------------------------------------------------------------


def test_parquet_export_is_written_in_row_groups_with_every_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    from trustjudge import Store
    from trustjudge.engine import _store_io

    store = tmp_path / "s.sqlite"
    with Store(store) as s:
        s.put_many([(f"k{i}", "labels", "mock:hash", {"kind": "labels", "prompt": f"p{i}", "labels": ["1]", "2]"]},
                     {"logprobs": [-0.5, None if i % 2 else -1.0], "method": "exact"}, 3, 0, 0.1)
                    for i in range(25)]
                   + [("g", "generate", "mock:hash", {"kind": "generate", "prompt": "p", "stop": []},
                       {"text": "t", "token_logprobs": [-0.1], "finish_reason": "stop"}, 3, 1, 0.2)])
    monkeypatch.setattr(_store_io, "PARQUET_BATCH", 10)
    out = tmp_path / "x.parquet"
    code, _, err = main(capsys, "store", "export", "--store", store, "--out", out)
    assert code == 0, err
    meta = pq.ParquetFile(out).metadata
    # Before: one table built from every row held in memory (986 MB for a 192 MB store), one row group.
    assert meta.num_rows == 26 and meta.num_row_groups == 3
    table = pq.read_table(out)
    rows = {r["key"]: r for r in table.to_pylist()}
    assert rows["k1"]["result.logprobs"] == [-0.5, None] and rows["k0"]["request.labels"] == ["1]", "2]"]
    assert rows["g"]["result.text"] == "t" and rows["g"]["result.logprobs"] is None
    assert {"key", "kind", "request.prompt", "result.method", "created_at"} <= set(table.column_names)


# -- F31, F37: NaN ids, numbers as strings, odd shapes ----------------------------------------------------


@pytest.mark.parametrize(("record", "message"), [
    ({"id": float("nan"), "question": "Q", "responses": [{"text": "a"}]},
     "field 'id': must be a string, got the number nan"),
    ({"id": "q", "question": "Q", "responses": [{"text": "a", "id": float("inf")}]},
     "field 'responses[0].id': must be a string, got the number inf"),
    ({"id": "q", "question": "Q", "responses": [{"text": "a", "human_score": "4 stars"}]},
     "field 'responses[0].human_score': must be a number (a string must hold one"),
    ({"id": "q", "question": "Q", "responses": [{"text": "a", "human_score": "1_000"}]},
     "field 'responses[0].human_score': must be a number"),
    ({"id": "q", "question": "Q", "responses": [{"text": "a", "human_score": "nan"}]},
     "field 'responses[0].human_score': must be a number"),
    ({"id": "q", "question": "Q", "responses": [{"text": "a", "human_score": 10 ** 400}]},
     "field 'responses[0].human_score': must be a finite number"),
])
def test_nan_ids_and_numbers_that_are_not_numbers_are_refused(record: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        items_from_dicts([record])


def test_numbers_in_decimal_strings_are_read_as_documented() -> None:
    item = items_from_dicts([{"id": 3, "question": "Q", "responses": [{"text": "a", "human_score": " 4.5 "},
                                                                      {"text": "b", "human_score": "1e1"}]}])[0]
    assert item.id == "3" and [r.human_score for r in item.responses] == [4.5, 10.0]


def test_two_items_with_one_id_are_refused_not_merged(tmp_path: Path) -> None:
    twice = [{"id": "q", "question": "First?", "responses": [{"text": "a"}]},
             {"id": "q", "question": "Second?", "responses": [{"text": "b"}]}]
    # Before: items_from_dicts (the library and the service) kept both, and audits merged them under one id.
    with pytest.raises(InputError, match="duplicate item id 'q' \\(also record 1\\)"):
        items_from_dicts(twice)
    path = write_jsonl(tmp_path / "items.jsonl", twice)
    errors = [str(v) for v in iter_items(path) if isinstance(v, InputError)]
    assert errors == [f"{path}:2: field 'id': duplicate item id 'q' (first on line 1): items are not merged"]
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("id,question,response,response_a,response_b\nq,Q?,x,a,b\n")
    errors = [str(v) for v in iter_items(mixed) if isinstance(v, InputError)]
    # Before: the response column was ignored without a word (the pair columns won).
    assert len(errors) == 1 and "both a response column and response_a/response_b" in errors[0]


# -- F10: pairwise work is bounded and shown ----------------------------------------------------------------


def _wide_item(n: int) -> dict[str, Any]:
    return {"id": "wide", "question": "Q?", "responses": [{"id": f"r{i}", "text": f"answer {i}"} for i in range(n)]}


def test_an_item_with_too_many_pairs_is_refused_before_any_judging(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "items.jsonl", [*small_items(), _wide_item(60)])
    store = tmp_path / "s.sqlite"
    code, _, err = main(capsys, "compare", path, "-j", "mock/hash", "-q", "--store", store)
    # Before: 1,770 pairs (3,540 judgments) from a 1.5 KB line, with no bound and no warning.
    assert code == 2 and f"{path}:3: field 'responses': item 'wide' has 1,770 pairs" in err, err
    assert "--max-pairs 1,225" in err
    assert not store.exists() or _stored_count(store) == 0
    code, out, err = main(capsys, "compare", path, "-j", "mock/hash", "-q", "--store", store, "--max-pairs", "2000")
    assert code == 0 and sum(r["item_id"] == "wide" for r in records(out)) == 1770


def _stored_count(path: Path) -> int:
    from trustjudge import Store

    with Store(path) as s:
        return s.count()


def test_dry_run_says_how_many_pairs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "items.jsonl", [*small_items(), _wide_item(12)])
    code, out, err = main(capsys, "compare", path, "-j", "mock/hash", "--dry-run", "--store", tmp_path / "s.sqlite")
    assert code == 0, err
    assert "pairs (each judged in both orders)" in out and "70" in out  # 3 + 1 + 66
    assert "most pairs in one item" in out and "66 (wide, 12 responses)" in out



def test_criteria_pairwise_is_bounded_by_max_pairs_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wide = {**_wide_item(60), "criteria": [{"name": "accuracy", "description": "Is it right?"}]}
    path = write_jsonl(tmp_path / "items.jsonl", [wide])
    store = tmp_path / "s.sqlite"
    code, _, err = main(capsys, "criteria", path, "--pairwise", "-j", "mock/hash", "-q", "--store", store)
    assert code == 2 and "item 'wide' has 1,770 pairs" in err, err
    # Scoring each response on the criterion judges no pair: no bound applies.
    code, out, err = main(capsys, "criteria", path, "-j", "mock/hash", "-q", "--store", store)
    assert code == 0 and len(records(out)) == 60, err
