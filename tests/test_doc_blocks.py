"""The calibrate -> select -> cascade blocks of README.md, docs/trust.md and examples/README.md run as pasted
from a clone (issue 39): every file they name ships under examples/, and they keep some verdicts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_docs_blocks import blocks as marked_blocks

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(page: Path, language: str) -> list[str]:
    """The fenced blocks of ``language`` in ``page``, in order."""
    return [m.group(2) for m in _BLOCK.finditer(page.read_text(encoding="utf-8")) if m.group(1) == language]


def guarantee_blocks(page: Path) -> list[str]:
    """The bash blocks of ``page`` that judge the labelled example (calibrate, select, a calibrated mode), less
    those the page marks as not runnable here (``<!-- docs-test: skip: ... -->``, tests/test_docs_blocks.py)."""
    return [b.code for b in marked_blocks(page) if b.language == "shell" and b.skip is None
            and ("examples/labelled.jsonl" in b.code or "--calibration" in b.code)]


def run_bash(text: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a block as pasted, up to a step a person does (a `# label ...` line: what follows needs their labels)."""
    text = re.split(r"^# label\b", text, maxsplit=1, flags=re.M)[0]
    env = {**os.environ, "XDG_DATA_HOME": str(cwd / "data"), "PY": sys.executable}  # the default store in cwd
    script = 'set -eu\ntrustjudge() { "$PY" -m trustjudge "$@"; }\n' + text
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    return tmp_path


def test_every_page_has_a_block_to_run() -> None:
    for page in ("README.md", "docs/trust.md", "examples/README.md"):
        assert guarantee_blocks(ROOT / page), page
    for page in (ROOT / "README.md", ROOT / "docs" / "trust.md"):
        text = page.read_text(encoding="utf-8")
        for name in ("labelled.jsonl", "new.jsonl", "qags.jsonl"):  # the files that never shipped
            assert not re.search(rf"(?<![/\w]){re.escape(name)}", text.replace("examples/" + name, "")), (page, name)


@pytest.mark.slow
@pytest.mark.parametrize("page", ["README.md", "examples/README.md"])
def test_the_readme_blocks_run_and_the_cascade_keeps_verdicts(clone: Path, page: str) -> None:
    for text in guarantee_blocks(ROOT / page):
        done = run_bash(text, clone)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    decided = re.search(r"decided by a model: (\d+)", " ".join(done.stderr.split()))
    assert decided and int(decided.group(1)) > 0, done.stderr[-2000:]
    assert (clone / "to_label.jsonl").exists() or (clone / "for_people.jsonl").exists()


@pytest.mark.slow
def test_the_trust_page_blocks_run_in_order(clone: Path) -> None:
    page = ROOT / "docs" / "trust.md"
    for text in guarantee_blocks(page):
        done = run_bash(text, clone)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (text, done.stderr[-3000:])
    summary = json.loads((clone / "summary.json").read_text())
    assert summary["verdicts"] > 0
    kept = [json.loads(line) for line in (clone / "verdicts.jsonl").read_text().splitlines()]
    assert kept
    python = [b for b in blocks(page, "python") if "examples/labelled.jsonl" in b]
    assert python
    code = python[0] + "\nassert summary['kept'] > 0, summary\n"
    done = subprocess.run([sys.executable, "-c", code], cwd=clone, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "XDG_DATA_HOME": str(clone / "data")})
    assert done.returncode == 0, done.stderr[-3000:]
