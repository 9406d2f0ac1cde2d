"""``trustjudge serve``: run the HTTP API (see :mod:`trustjudge.serve`) with uvicorn.

Importing this module needs only click: fastapi and uvicorn (the ``server`` extra) are imported when
the command runs, so the rest of the CLI works without them.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from .._net import is_loopback
from ..errors import TrustJudgeError, pip_dependency_error
from ._options import BATCH_SIZE, JUDGE, STORE

KEYS_ENV = "TRUSTJUDGE_API_KEYS"
# Equal to trustjudge.serve's defaults (a test checks), kept here so that --help needs no fastapi.
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_ITEMS = 1000
DEFAULT_MAX_JUDGMENTS = 10_000
DEFAULT_MAX_PROMPT_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_LABELS = 1_000_000
DEFAULT_BODY_TIMEOUT_S = 30.0
DEFAULT_REQUEST_DEADLINE_S = 60.0
DEFAULT_MAX_CONNECTIONS = 64
DEFAULT_MAX_PER_ADDRESS = 16


class ServeError(click.ClickException):
    """A reason not to start the server (exit status 2, like the other trustjudge commands)."""

    exit_code = 2


def api_keys(cli_keys: tuple[str, ...], environ: dict[str, str] | None = None) -> list[str]:
    """The API keys from ``--api-key`` and ``TRUSTJUDGE_API_KEYS`` (comma-separated), without blanks."""
    env = (environ if environ is not None else dict(os.environ)).get(KEYS_ENV, "")
    keys = [k.strip() for k in (*cli_keys, *env.split(",")) if k.strip()]
    return list(dict.fromkeys(keys))


def calibration_paths(given: tuple[str, ...]) -> dict[str, Path]:
    """``--calibration NAME=PATH`` options as names and paths (a ServeError for a bad or repeated one)."""
    out: dict[str, Path] = {}
    for entry in given:
        name, sep, path = entry.partition("=")
        name = name.strip()
        if not sep or not name or not path:
            raise ServeError(f"--calibration {entry!r}: give NAME=PATH (the name requests use, then the file)")
        if name in out:
            raise ServeError(f"--calibration: the name {name!r} is given twice")
        if not Path(path).is_file():
            raise ServeError(f"--calibration {name}: no file {path}")
        out[name] = Path(path)
    return out


@click.command("serve")
@JUDGE
@STORE
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback needs an API key.")
@click.option("--port", default=8321, show_default=True, type=click.IntRange(0, 65535), help="Port to bind.")
@click.option("--api-key", "api_key", multiple=True,
              help=f"Accepted API key (repeatable); also ${KEYS_ENV} (comma-separated), which keeps keys "
                   "out of the process list.")
@click.option("--max-body-mb", default=DEFAULT_MAX_BODY_BYTES / 2**20, show_default=True,
              type=click.FloatRange(min=0.001), help="Largest request body (MiB); larger ones get 413.")
@click.option("--max-items", default=DEFAULT_MAX_ITEMS, show_default=True, type=click.IntRange(min=1),
              help="Most items per request; more get 413.")
@click.option("--max-judgments", default=DEFAULT_MAX_JUDGMENTS, show_default=True, type=click.IntRange(min=1),
              help="Most judgments (prompts) per request, a pair counting two; more get 413.")
@click.option("--max-request-prompt-bytes", "max_prompt_bytes", default=DEFAULT_MAX_PROMPT_BYTES,
              show_default=True, type=click.IntRange(min=1),
              help="Most bytes of text one request may quote into the judge's prompts, summed over its "
                   "judgments (a passage quoted into 300 prompts counts 300 times); more get 413.")
@click.option("--max-request-labels", "max_labels", default=DEFAULT_MAX_LABELS, show_default=True,
              type=click.IntRange(min=1),
              help="Most labels one request's judgments may read in total (a 1-100 score reads 100, a pair "
                   "6); more get 413.")
@click.option("--max-connections", default=DEFAULT_MAX_CONNECTIONS, show_default=True, type=click.IntRange(min=1),
              help="Most requests in progress at once (receiving, waiting or judged); more get 503 at once. "
                   "Connections still sending their request head, or idle, do not count (--timeout closes them).")
@click.option("--max-requests-per-address", default=DEFAULT_MAX_PER_ADDRESS, show_default=True,
              type=click.IntRange(min=1), help="Most requests in progress from one client address; more get 429.")
@click.option("--timeout", "timeout_s", default=DEFAULT_BODY_TIMEOUT_S, show_default=True,
              type=click.FloatRange(min=0.1),
              help="Seconds a client may take to send its request head, or stay silent while sending its body "
                   "(408), and to keep an idle connection open.")
@click.option("--request-deadline", "request_deadline_s", default=DEFAULT_REQUEST_DEADLINE_S, show_default=True,
              type=click.FloatRange(min=0.1),
              help="Seconds a client may take to send its whole request body, however steadily it trickles "
                   "(408 after).")
@click.option("--protocol", type=click.Choice(["direct", "cot"]), default="direct", show_default=True,
              help="Default protocol (a request may ask for the other).")
@click.option("--batch-wait-ms", default=0.0, show_default=True, type=click.FloatRange(min=0.0),
              help="Wait this long after a request arrives to merge more requests into one judge call.")
@click.option("--calibration", "calibrations", multiple=True, metavar="NAME=PATH",
              help="A calibration file (`trustjudge calibrate`) requests may apply by name (\"calibration_name\": "
                   "NAME), so that clients need not send its JSON and never name a file (repeatable). Checked "
                   "against the judge at start.")
@BATCH_SIZE
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info", "debug"]), default="info",
              show_default=True)
def serve(judge: str, store: Path | None, host: str, port: int, api_key: tuple[str, ...], max_body_mb: float,
          max_items: int, max_judgments: int, max_prompt_bytes: int, max_labels: int, max_connections: int,
          max_requests_per_address: int, timeout_s: float, request_deadline_s: float, protocol: str,
          batch_wait_ms: float, calibrations: tuple[str, ...], batch_size: int, log_level: str) -> None:
    """Serve the judge over HTTP: POST /v1/score, /v1/compare, /v1/audit, /v1/rank; GET /healthz.

    The judge runs in one thread; concurrent requests are merged into shared judge calls.
    """
    try:
        import uvicorn

        from ..serve import create_app, uvicorn_options
    except ImportError:
        raise ServeError(str(pip_dependency_error("trustjudge serve", ["fastapi", "uvicorn"], "server"))) from None
    keys = api_keys(api_key)
    if not is_loopback(host) and not keys:
        raise ServeError(f"refusing to bind {host}: a non-loopback address needs at least one API key "
                         f"(--api-key KEY or {KEYS_ENV}=KEY1,KEY2); or bind 127.0.0.1")
    named = calibration_paths(calibrations)
    try:
        app = create_app(judge, store_path=store, api_keys=keys, max_body_bytes=int(max_body_mb * 2**20),
                         max_items=max_items, protocol=protocol, batch_wait_s=batch_wait_ms / 1000,  # type: ignore[arg-type]
                         max_judgments=max_judgments, max_prompt_bytes=max_prompt_bytes, max_labels=max_labels,
                         body_timeout_s=timeout_s, request_deadline_s=request_deadline_s,
                         max_connections=max_connections, max_requests_per_address=max_requests_per_address,
                         calibrations=named, batch_size=batch_size)
    except TrustJudgeError as exc:
        raise ServeError(str(exc)) from None
    if not is_loopback(host):
        click.echo("note: traffic is plain HTTP; put a TLS-terminating proxy in front of a public address",
                   err=True)
    click.echo(f"trustjudge serve: judge {app.state.judge.name}, store {app.state.judge.store.path}, "
               f"http://{host}:{port} ({'API keys required' if keys else 'no API key'})", err=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level,
                **uvicorn_options(timeout_s=timeout_s))
