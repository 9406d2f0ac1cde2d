"""``trustjudge serve``: run the HTTP API (see :mod:`trustjudge._server`) with uvicorn.

Importing this module needs only click: fastapi and uvicorn (the ``server`` extra) are imported when
the command runs, so the rest of the CLI works without them.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import click

from ..errors import TrustJudgeError, pip_dependency_error
from ._options import BATCH_SIZE, JUDGE, STORE

KEYS_ENV = "TRUSTJUDGE_API_KEYS"
# Equal to trustjudge._server's defaults (a test checks), kept here so that --help needs no fastapi.
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_ITEMS = 1000
DEFAULT_MAX_JUDGMENTS = 10_000
DEFAULT_BODY_TIMEOUT_S = 30.0


class ServeError(click.ClickException):
    """A reason not to start the server (exit status 2, like the other trustjudge commands)."""

    exit_code = 2


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to a public address


def api_keys(cli_keys: tuple[str, ...], environ: dict[str, str] | None = None) -> list[str]:
    """The API keys from ``--api-key`` and ``TRUSTJUDGE_API_KEYS`` (comma-separated), without blanks."""
    env = (environ if environ is not None else dict(os.environ)).get(KEYS_ENV, "")
    keys = [k.strip() for k in (*cli_keys, *env.split(",")) if k.strip()]
    return list(dict.fromkeys(keys))


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
@click.option("--max-connections", default=64, show_default=True, type=click.IntRange(min=1),
              help="Most concurrent connections; more get 503 at once.")
@click.option("--timeout", "timeout_s", default=DEFAULT_BODY_TIMEOUT_S, show_default=True,
              type=click.FloatRange(min=0.1),
              help="Seconds a client may take to send its request body (408 after) and to keep an idle "
                   "connection open.")
@click.option("--protocol", type=click.Choice(["direct", "cot"]), default="direct", show_default=True,
              help="Default protocol (a request may ask for the other).")
@click.option("--batch-wait-ms", default=0.0, show_default=True, type=click.FloatRange(min=0.0),
              help="Wait this long after a request arrives to merge more requests into one judge call.")
@BATCH_SIZE
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info", "debug"]), default="info",
              show_default=True)
def serve(judge: str, store: Path | None, host: str, port: int, api_key: tuple[str, ...], max_body_mb: float,
          max_items: int, max_judgments: int, max_connections: int, timeout_s: float, protocol: str,
          batch_wait_ms: float, batch_size: int, log_level: str) -> None:
    """Serve the judge over HTTP: POST /v1/score, /v1/compare, /v1/audit, /v1/rank; GET /healthz.

    The judge runs in one thread; concurrent requests are merged into shared judge calls.
    """
    try:
        import uvicorn

        from .._server import create_app, uvicorn_options
    except ImportError:
        raise ServeError(str(pip_dependency_error("trustjudge serve", ["fastapi", "uvicorn"], "server"))) from None
    keys = api_keys(api_key)
    if not is_loopback(host) and not keys:
        raise ServeError(f"refusing to bind {host}: a non-loopback address needs at least one API key "
                         f"(--api-key KEY or {KEYS_ENV}=KEY1,KEY2); or bind 127.0.0.1")
    try:
        app = create_app(judge, store_path=store, api_keys=keys, max_body_bytes=int(max_body_mb * 2**20),
                         max_items=max_items, protocol=protocol, batch_wait_s=batch_wait_ms / 1000,  # type: ignore[arg-type]
                         max_judgments=max_judgments, body_timeout_s=timeout_s, batch_size=batch_size)
    except TrustJudgeError as exc:
        raise ServeError(str(exc)) from None
    if not is_loopback(host):
        click.echo("note: traffic is plain HTTP; put a TLS-terminating proxy in front of a public address",
                   err=True)
    click.echo(f"trustjudge serve: judge {app.state.judge.name}, store {app.state.judge.store.path}, "
               f"http://{host}:{port} ({'API keys required' if keys else 'no API key'})", err=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level,
                **uvicorn_options(timeout_s=timeout_s, max_connections=max_connections))
