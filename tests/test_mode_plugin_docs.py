"""docs/modes.md's plug-in example works pasted as a package (its command found), and a plug-in that
``TRUSTJUDGE_MODE_PLUGINS`` leaves out is said to be disabled, not missing (issue 39)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _example() -> str:
    text = (ROOT / "docs" / "modes.md").read_text(encoding="utf-8")
    found = [b for b in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M) if "class VerdictTask" in b]
    assert len(found) == 1
    return found[0]


def _entry_point() -> str:
    text = (ROOT / "docs" / "modes.md").read_text(encoding="utf-8")
    block = re.search(r'^```toml\n(\[project\.entry-points\."trustjudge\.modes"\]\n.*?)^```', text, re.S | re.M)
    assert block is not None
    return block.group(1)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """The docs' example saved as my_package/verdict.py, installed with the docs' entry point."""
    site = tmp_path / "site"
    (site / "my_package").mkdir(parents=True)
    (site / "my_package" / "__init__.py").write_text("")
    (site / "my_package" / "verdict.py").write_text(_example())
    info = site / "my_package-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-package\nVersion: 1.0\n")
    # pyproject.toml's table, as the installed distribution's entry_points.txt writes it
    entry = re.sub(r'= "(.*)"', r"= \1", _entry_point().replace('[project.entry-points."trustjudge.modes"]',
                                                               "[trustjudge.modes]"))
    (info / "entry_points.txt").write_text(entry)
    return site


def _run(site: Path, tmp_path: Path, *args: str, plugins: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRUSTJUDGE_MODE_PLUGINS"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    if plugins is not None:
        env["TRUSTJUDGE_MODE_PLUGINS"] = plugins
    return subprocess.run([sys.executable, "-m", "trustjudge", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)


@pytest.mark.slow
def test_the_docs_plugin_pasted_as_a_package_has_its_command(site: Path, tmp_path: Path) -> None:
    out = tmp_path / "v.jsonl"
    done = _run(site, tmp_path, "verdict", "examples/items.jsonl", "-j", "mock/hash", "--store",
                str(tmp_path / "s.sqlite"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) == 12  # one record per response of the example


@pytest.mark.slow
def test_a_disabled_plugin_says_so(site: Path, tmp_path: Path) -> None:
    done = _run(site, tmp_path, "verdict", "examples/items.jsonl", "-j", "mock/hash", plugins="other")
    assert done.returncode == 2
    err = " ".join(done.stderr.split())
    assert "No such command" not in err
    assert "mode plug-in 'verdict' (my_package.verdict:MODE from my-package 1.0) is installed but disabled" in err
    assert "TRUSTJUDGE_MODE_PLUGINS='other'" in err
    mode = _run(site, tmp_path, "calibrate", "examples/items.jsonl", "--mode", "verdict", "--out",
                str(tmp_path / "c.json"), plugins="")
    assert mode.returncode == 2 and "is installed but disabled" in " ".join(mode.stderr.split())


def test_the_example_runs_as_a_script(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _example()], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("probabilities") == 12
