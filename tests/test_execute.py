"""The sandboxed executor: what a model's script may not do is stopped and reported, the caller's files
stay as they were, a real matplotlib plot comes back, and a rerun reads the store instead of executing."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from trustjudge.engine._store import Store
from trustjudge.execute import ExecutionLimits, LocalExecutor, StoredExecutor, namespaces_work

pytestmark = pytest.mark.slow
ISOLATIONS = [pytest.param("namespace", marks=pytest.mark.skipif(not namespaces_work(),
                                                                 reason="needs root and unshare")), "hooks"]
PLOT = """
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(3, 2))
ax.bar(["a", "b", "c"], [3, 1, 2])
ax.set_title("counts")
fig.savefig("plot.png")
print("saved")
"""


@pytest.fixture()
def caller_file(tmp_path: Path) -> Path:
    path = tmp_path / "precious.txt"
    path.write_text("keep me", encoding="utf-8")
    return path


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_real_matplotlib_code_runs_and_its_png_comes_back(isolation: str) -> None:
    result = LocalExecutor(isolation=isolation).run(PLOT)  # type: ignore[arg-type]
    assert result.status == "ok", result.stderr
    assert result.stdout.strip() == "saved"
    png = result.file(".png")
    assert png is not None and png.path == "plot.png"
    assert png.data[:8] == b"\x89PNG\r\n\x1a\n" and len(png.data) > 1000
    assert all(not f.path.startswith("main.py") for f in result.files)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_writing_outside_its_folder_is_stopped_and_the_callers_files_are_untouched(
        isolation: str, caller_file: Path) -> None:
    new = caller_file.with_name("new.txt")
    code = (f"open({str(caller_file)!r}, 'w').write('overwritten')\n")
    result = LocalExecutor(isolation=isolation).run(code)  # type: ignore[arg-type]
    assert result.status == "write_refused", result.stderr
    assert caller_file.read_text(encoding="utf-8") == "keep me"
    result = LocalExecutor(isolation=isolation).run(  # type: ignore[arg-type]
        f"import os\nos.remove({str(caller_file)!r})\n")
    assert result.status == "write_refused", result.stderr
    result = LocalExecutor(isolation=isolation).run(  # type: ignore[arg-type]
        f"open({str(new)!r}, 'x').write('x')\n")
    assert not result.ok and not new.exists()
    assert caller_file.read_text(encoding="utf-8") == "keep me"


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_opening_a_socket_is_stopped(isolation: str) -> None:
    code = "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=2)\n"
    result = LocalExecutor(isolation=isolation).run(code)  # type: ignore[arg-type]
    assert result.status == "network", result.stderr


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_forking_without_end_is_stopped(isolation: str) -> None:
    code = "import os\nwhile True:\n    os.fork()\n"
    limits = ExecutionLimits(wall_s=15, processes=32)
    result = LocalExecutor(limits, isolation=isolation).run(code)  # type: ignore[arg-type]
    assert not result.ok
    assert result.status == "processes", result.stderr
    assert result.wall_s < 15 + 5


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_allocating_without_end_is_stopped(isolation: str) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 1024 * 1024))\n"
    result = LocalExecutor(ExecutionLimits(memory_mb=512), isolation=isolation).run(code)  # type: ignore[arg-type]
    assert result.status == "memory", result.stderr


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_script_that_never_ends_is_stopped_by_the_clock_or_the_cpu_limit(isolation: str) -> None:
    sleeper = LocalExecutor(ExecutionLimits(wall_s=2), isolation=isolation)  # type: ignore[arg-type]
    result = sleeper.run("import time\nwhile True:\n    time.sleep(0.1)\n")
    assert result.status == "timeout" and 2 <= result.wall_s < 6
    spinner = LocalExecutor(ExecutionLimits(wall_s=30, cpu_s=1), isolation=isolation)  # type: ignore[arg-type]
    result = spinner.run("while True:\n    pass\n")
    assert result.status == "cpu" and result.wall_s < 10


def test_the_temporary_folder_is_gone_and_input_files_are_given_but_not_returned(tmp_path: Path) -> None:
    code = "import os\nprint(os.getcwd())\nprint(open('data.csv').read())\nopen('out.txt', 'w').write('2')\n"
    result = LocalExecutor().run(code, files={"data.csv": b"x,y\n1,2\n"})
    assert result.ok, result.stderr
    folder, data = result.stdout.split("\n", 1)
    assert data.startswith("x,y") and not os.path.exists(folder)
    assert [f.path for f in result.files] == ["out.txt"]
    with pytest.raises(ValueError, match="leaves the script's folder"):
        LocalExecutor().run("pass", files={"../escape.txt": b""})


def test_a_rerun_reads_the_store_and_other_limits_or_code_run_again(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    runner = StoredExecutor(LocalExecutor(), store)
    first = runner.run(PLOT)
    second = runner.run(PLOT)
    assert runner.executed == 1 and not first.cached and second.cached
    assert second.file(".png") == first.file(".png") and second.stdout == first.stdout
    runner.run(PLOT + "\n# changed\n")
    assert runner.executed == 2
    other = StoredExecutor(LocalExecutor(ExecutionLimits(wall_s=5)), store)
    other.run(PLOT)
    assert other.executed == 1
    store.close()
    rows = sqlite3.connect(tmp_path / "s.sqlite").execute("SELECT COUNT(*) FROM executions").fetchone()
    assert rows == (3,)
