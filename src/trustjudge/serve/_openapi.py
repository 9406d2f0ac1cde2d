"""The committed OpenAPI schema: ``python -m trustjudge.serve --write-openapi docs/openapi.json`` regenerates
it (a test fails when it drifts from the API)."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..modes._registry import MODES, builtin_modes
from ._app import create_app

__all__ = ["main", "openapi_json"]


def openapi_json() -> str:
    """The OpenAPI schema of the API (for a ``mock/hash`` judge, built-in modes only), as committed in
    ``docs/openapi.json``."""
    served = [name for name in builtin_modes() if MODES[name].route is not None]
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app("mock/hash", store_path=Path(tmp) / "openapi.sqlite", modes=served)
        try:
            return json.dumps(app.openapi(), indent=2, sort_keys=True) + "\n"
        finally:
            app.state.judge.close()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m trustjudge.serve --write-openapi PATH``: write (or print) the OpenAPI schema."""
    parser = argparse.ArgumentParser(prog="python -m trustjudge.serve", description=main.__doc__)
    parser.add_argument("--write-openapi", metavar="PATH", help="write the schema here (default: print it)")
    args = parser.parse_args(argv)
    text = openapi_json()
    if args.write_openapi:
        Path(args.write_openapi).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write_openapi).write_text(text, encoding="utf-8")
        print(f"wrote {args.write_openapi}")
    else:
        print(text, end="")
