"""Inputs and the judge client, hardened (issue 23): each test failed before its fix.

The command line runs in-process through ``trustjudge.cli.main`` (its error handling included) on the
``mock/hash`` judge; the judge-server tests run a loopback socket that accepts and never answers (or
answers a byte at a time), so no test here needs a model.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from trustjudge import Judge, items_from_dicts
from trustjudge.errors import BackendUnavailable

from ._silent_server import SilentServer
from .conftest import small_items, time_limit


def main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """Run the CLI's entry point in-process; return (exit status, stdout, stderr)."""
    from trustjudge import cli

    old = sys.argv
    sys.argv = ["trustjudge", *map(str, args)]
    code = 0
    try:
        cli.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old
    out, err = capsys.readouterr()
    return code, out, err


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

    with SilentServer(trickle_s=0.2) as url:
        backend = OpenAICompatibleBackend("m", url, labels="top_k", context_length=4096, timeout_s=1.0)
        judge = Judge(backend, store=tmp_path / "s.sqlite", scale=5, retry_base_s=0.0)
        began = time.monotonic()
        try:
            # Before: httpx's read timeout restarts with each byte, so this never ended.
            with time_limit(30), pytest.raises(BackendUnavailable, match="not complete within the 1 s timeout"):
                list(judge.score(items_from_dicts(small_items())))
        finally:
            judge.close()
        assert time.monotonic() - began < 10


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
    # backend_error; now two requests' budgets (5 tries each) and the run stops.
    assert len(completions) == 10
