"""Consistent output (issue 39): `rank` and `report` say what each ranking ranks on (so their Kendall taus can be
compared), and progress bars end on real totals (no `8/136`, no `24/?`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trustjudge", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={"COLUMNS": "200", **os.environ})


def _taus(text: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+ vs \w+) (-?\d\.\d\d)", text))


@pytest.mark.slow
def test_rank_and_report_say_what_they_rank_on_and_agree_on_the_same_basis(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    html = tmp_path / "r.html"
    report = run("report", EXAMPLES / "items.jsonl", "-j", "mock/hash", "--store", store, "--html", html, "-q")
    assert report.returncode == 0, report.stderr
    page = " ".join(html.read_text().split()).replace("&#x27;", "'")
    said = re.search(r"Kendall tau-b between rankings \(ranked on: (.*?)\): (.*?)</p>", page)
    assert said is not None
    assert "mean_score: the mean trustjudge score on the 100-point scale" in said.group(1)  # the audit's largest
    ranked = run("rank", EXAMPLES / "items.jsonl", "-j", "mock/hash", "--store", store, "--scale", "100")
    assert ranked.returncode == 0, ranked.stderr
    out = " ".join(ranked.stdout.split())
    assert f"ranked on: {said.group(1)}" in out
    rank_taus = {f"{a} vs {b}": t for a, b, t in re.findall(r"│ (\w+) +│ (\w+) +│ (-?\d\.\d\d) +│", ranked.stdout)}
    assert rank_taus and rank_taus == _taus(said.group(2))  # one definition: the same numbers on the same basis
    ten = run("rank", EXAMPLES / "items.jsonl", "-j", "mock/hash", "--store", store)
    assert "mean_score: the mean trustjudge score on the 10-point scale" in " ".join(ten.stdout.split())


def _bars(stderr: str) -> list[tuple[int, str]]:
    return [(int(done), total) for done, total in re.findall(r"(\d+)/(\d+|\?) ", stderr.replace("\r", "\n"))]


@pytest.mark.slow
def test_bars_end_on_real_totals(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    claims = run("claims", EXAMPLES / "claims.jsonl", "--match", "--k", "3", "-j", "mock/hash", "--store", store,
                 "--out", tmp_path / "c.jsonl")
    assert claims.returncode == 0, claims.stderr
    bars = _bars(claims.stderr)
    assert bars and all(total == str(done) for done, total in bars), bars
    cal = run("calibrate", EXAMPLES / "labelled.jsonl", "-j", "mock/hash", "--store", store, "--out",
              tmp_path / "cal.json")
    assert cal.returncode == 0, cal.stderr
    pairs = sum(len(json.loads(line)["pairs"]) for line in (EXAMPLES / "labelled.jsonl").read_text().splitlines())
    assert _bars(cal.stderr)[-1] == (2 * pairs, str(2 * pairs))  # both orders of every pair
