"""``trustjudge judges``: what a judge name can be here, and which judge a command would use.

The bundled judges (installed or not, their size), the prefixes a name may start with and what each reads
labels with, the installed backend plug-ins, the project's aliases (``[tool.trustjudge.aliases]``), and the
judge and store a command run here gets with no option (``--judge``, then ``TRUSTJUDGE_JUDGE``, then the
project's ``judge``). Nothing is loaded or downloaded.
"""

from __future__ import annotations

import json
import os
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from .._plugins import describe
from .._settings import JUDGE_ENV, STORE_ENV, judge_name, project_settings, store_path
from ..backends import DEFAULT_JUDGE, backend_plugins, prefixes
from ..backends._models import bundled_judges
from ..engine._store import default_store_path
from ._common import wide_console


def catalog() -> dict[str, Any]:
    """What ``trustjudge judges`` shows, as JSON-able data."""
    settings = project_settings()
    given = os.environ.get(JUDGE_ENV)
    source = (f"${JUDGE_ENV}" if given else f"{settings.path} [tool.trustjudge] judge" if settings.judge
              else "the default")
    store = store_path(None, settings)
    store_source = (f"${STORE_ENV}" if os.environ.get(STORE_ENV) else
                    f"{settings.path} [tool.trustjudge] store" if settings.store else "the default")
    labels = prefixes()
    return {
        "judge": {"name": judge_name(None, settings), "from": source},
        "store": {"path": str(store or default_store_path()), "from": store_source},
        "bundled": [{"name": f"llamacpp/{b.name}", "also": f"hf/{b.name}", "size_mb": round(b.size / 1e6),
                     "installed": b.installed, "install": b.install, "prompt": b.prompt_format,
                     "default": f"llamacpp/{b.name}" == DEFAULT_JUDGE, "labels": labels["llamacpp"]}
                    for b in bundled_judges()],
        "prefixes": [{"prefix": f"{p}/", "labels": text} for p, text in labels.items()],
        "plugins": [{"prefix": f"{p}/", "plugin": describe(ep, "backend plugin"), "labels": "as the plug-in reads them"}
                    for p, eps in sorted(backend_plugins().items()) for ep in eps],
        "aliases": [{"alias": a, "judge": n, "from": str(settings.path)} for a, n in settings.aliases.items()],
    }


@click.command("judges")
@click.option("--json", "as_json", is_flag=True, help="Print the listing as one JSON object.")
def judges(as_json: bool) -> None:
    """List the bundled judges (installed or not, size), the judge-name prefixes and installed plug-ins with
    what each reads labels with, the project's aliases, and the judge and store a command here would use."""
    data = catalog()
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    console = wide_console()
    console.print(escape(f"judge: {data['judge']['name']} (from {data['judge']['from']}); "
                         f"store: {data['store']['path']} (from {data['store']['from']})"), highlight=False)
    table = Table(title="Bundled judges (also as hf/<name>)")
    for column in ("judge", "size", "installed", "prompt"):
        table.add_column(column)
    for b in data["bundled"]:
        table.add_row(escape(b["name"] + (" (default)" if b["default"] else "")), f"{b['size_mb']} MB",
                      "yes" if b["installed"] else escape(f"no: {b['install']}"), b["prompt"])
    console.print(table)
    table = Table(title="Judge names: <prefix>/<model>")
    table.add_column("prefix")
    table.add_column("reads labels with")
    for p in data["prefixes"]:
        table.add_row(escape(p["prefix"]), escape(p["labels"]))
    for p in data["plugins"]:
        table.add_row(escape(p["prefix"]), escape(f"{p['plugin']}: {p['labels']}"))
    console.print(table)
    if data["aliases"]:
        table = Table(title="Aliases", caption=escape(data["aliases"][0]["from"]))
        table.add_column("alias")
        table.add_column("judge")
        for a in data["aliases"]:
            table.add_row(escape(a["alias"]), escape(a["judge"]))
        console.print(table)
