"""Shared fixtures. Tests never read ../shared: they write their own small data."""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as _hyp_settings

# Keep converted models in one cache folder across the test session (conversion takes ~20 s).
os.environ.setdefault("TRUSTJUDGE_CACHE", str(Path.home() / ".cache" / "trustjudge-tests"))


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Raise TimeoutError in the test if it runs longer than ``seconds`` (SIGALRM), instead of hanging."""
    def expired(signum: int, frame: Any) -> None:
        raise TimeoutError(f"test ran longer than its {seconds} s bound")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str | Path,
            limit_s: int | None = None) -> tuple[int, str, str]:
    """Run the CLI's entry point in-process (bounded by ``limit_s`` where given); return (exit status, stdout,
    stderr)."""
    import sys

    from trustjudge import cli

    old = sys.argv
    sys.argv = ["trustjudge", *map(str, args)]
    code = 0
    try:
        if limit_s is None:
            cli.main()
        else:
            with time_limit(limit_s):
                cli.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old
    out, err = capsys.readouterr()
    return code, out, err


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def small_items() -> list[dict[str, Any]]:
    return [
        {"id": "q1", "question": "What is 2 + 2?",
         "responses": [{"id": "r1", "text": "4", "human_score": 5}, {"id": "r2", "text": "5", "human_score": 1},
                       {"id": "r3", "text": "It is four.", "human_score": 4}]},
        {"id": "q2", "question": "Name a primary colour.",
         "responses": [{"id": "r1", "text": "Red."}, {"id": "r2", "text": "Green is a colour of grass."}]},
    ]


@pytest.fixture
def items_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "items.jsonl", small_items())


@pytest.fixture(scope="session")
def smollm() -> Iterator[Any]:
    from trustjudge.backends import get_backend

    backend = get_backend("hf/smollm2-135m")
    yield backend


# CI replays a fixed set of generated examples (derandomized), so that a landing never depends on luck;
# local runs keep exploring new examples.

_hyp_settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    _hyp_settings.load_profile("ci")


RELEVANCE_PLUGIN = Path(__file__).parent / "fixtures" / "relevance_plugin"


def install_dist(site: Path, dist: str, group: str, entry_points: dict[str, str]) -> None:
    """A minimal installed distribution ``dist`` 1.0 on the folder ``site``: METADATA and the ``group``'s entry
    points (``{"name": "module:attr"}``) in ``<dist>-1.0.dist-info`` (its folder name escapes "-" as "_")."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}")


@pytest.fixture
def relevance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The fixture package, installed as a distribution on a temporary sys.path entry; forgotten afterwards."""
    from trustjudge.modes._registry import PLUGIN_GROUP, unregister_mode

    site = tmp_path / "site"
    install_dist(site, "tj-relevance", PLUGIN_GROUP, {"relevance": "tj_relevance:MODE"})
    monkeypatch.delenv("TRUSTJUDGE_MODE_PLUGINS", raising=False)
    with monkeypatch.context() as m:
        m.syspath_prepend(str(site))
        m.syspath_prepend(str(RELEVANCE_PLUGIN / "src"))
        yield
    unregister_mode("relevance")
    sys.modules.pop("tj_relevance", None)
    importlib.invalidate_caches()
