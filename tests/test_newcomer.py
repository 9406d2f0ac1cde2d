"""What a newcomer sees after a run: where the records went and how to look at the judgments behind them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trustjudge", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_score_says_where_its_records_went_and_how_to_look(tmp_path: Path, items_file: Path) -> None:
    store, out = tmp_path / "s.sqlite", tmp_path / "scores.jsonl"
    done = run("score", items_file, "--judge", "mock/hash", "--store", store, "--out", out)
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    err = " ".join(done.stderr.split())  # rich may wrap
    assert f"records: {len(lines)} written to {out}" in err
    assert f"trustjudge store show {items_file} ITEM_ID --judge mock/hash --store {store}" in err
    # The command it names works.
    item_id = lines[0].split('"item_id": "', 1)[1].split('"', 1)[0]
    shown = run("store", "show", items_file, item_id, "--judge", "mock/hash", "--store", store)
    assert shown.returncode == 0 and item_id in shown.stdout + shown.stderr


def test_records_on_standard_output_are_named_so(tmp_path: Path, items_file: Path) -> None:
    done = run("compare", items_file, "--judge", "mock/hash", "--store", tmp_path / "s.sqlite")
    assert done.returncode == 0, done.stderr
    n = len([line for line in done.stdout.splitlines() if line.startswith("{")])
    assert n > 0 and f"records: {n} written to standard output" in " ".join(done.stderr.split())


def test_a_mode_says_where_its_records_went(tmp_path: Path) -> None:
    out = tmp_path / "criteria.jsonl"
    done = run("criteria", EXAMPLES / "criteria.jsonl", "--suite", EXAMPLES / "suite.json", "--judge", "mock/hash",
               "--store", tmp_path / "s.sqlite", "--out", out)
    assert done.returncode == 0, done.stderr
    n = len(out.read_text().splitlines())
    assert f"records: {n} written to {out}" in " ".join(done.stderr.split())


def test_the_library_draws_a_progress_bar_on_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from trustjudge import Judge, MockBackend
    from trustjudge.io._items import parse_record

    items = [parse_record({"id": f"q{i}", "question": f"why {i}?", "responses": [{"id": "a", "text": "because"},
                                                                          {"id": "b", "text": "no"}]}, "t", i + 1)
             for i in range(3)]
    j = Judge(MockBackend("bar"), store=tmp_path / "s.sqlite")
    records = list(j.score(items, progress=True))
    assert len(records) == 6
    err = capsys.readouterr().err
    # Not a terminal here: one plain final line, no cursor movement or colour codes.
    assert "score (bar)" in err and "6/6" in err and "\x1b[" not in err
    assert list(j.score(items, progress=False)) == records  # False: no bar, same records
    assert capsys.readouterr().err == ""
    j.close()


def test_store_show_without_a_judge_builds_none(tmp_path: Path, items_file: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only command never builds a judge nobody asked for (issue 39): `store show` with no --judge lists
    the item's stored outputs of every judge, by the question's text; with --judge, by key as before."""
    from click.testing import CliRunner

    from trustjudge.cli import cli
    from trustjudge.cli._options import JudgeOptions

    store = tmp_path / "s.sqlite"
    assert run("score", items_file, "--judge", "mock/hash", "--store", store, "-q").returncode == 0
    monkeypatch.chdir(tmp_path)  # no pyproject.toml naming a judge
    monkeypatch.delenv("TRUSTJUDGE_JUDGE", raising=False)

    def refuse(self: JudgeOptions, **extra: object) -> None:
        raise AssertionError(f"store show built the judge {self.judge}")

    item_id = load_first_id(items_file)
    with monkeypatch.context() as m:
        m.setattr(JudgeOptions, "make", refuse)
        shown = CliRunner().invoke(cli, ["store", "show", str(items_file), item_id, "--store", str(store)])
    assert shown.exit_code == 0, shown.output + repr(shown.exception)
    responses = len(json.loads(items_file.read_text().splitlines()[0])["responses"])
    assert shown.output.count("backend mock:hash") == responses  # one score per response of the item
    assert f"{responses} stored output(s) whose prompt holds item {item_id!r}'s question" in " ".join(
        shown.output.split())
    keyed = CliRunner().invoke(cli, ["store", "show", str(items_file), item_id, "--store", str(store), "-j",
                                     "mock/hash", "--kind", "score"])
    assert keyed.exit_code == 0 and keyed.output.count(f"score {item_id} /") == responses


def load_first_id(path: Path) -> str:
    return str(json.loads(path.read_text().splitlines()[0])["id"])
