"""``trustjudge recipes`` and ``trustjudge run RECIPE ITEMS``: benchmarks' protocols as shipped files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from ..errors import TrustJudgeError
from ..io._outputs import readable_input, record_output, write_text
from ..recipes import Recipe, get_metric, get_recipe, recipe_names, run_recipe
from ._common import err, is_utf8, progress, wide_console
from ._inputs import read_items
from ._options import JUDGE, JUDGE_FACTORY, STORE, make_judge
from ._summary import BOOTSTRAP


def _num(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


@click.command("recipes")
def recipes() -> None:
    """List the recipes: shipped and installed ones (name, version, benchmark, metric)."""
    table = Table(title="Recipes (trustjudge run NAME ITEMS; a recipe file's path works too)")
    for col in ("name", "version", "mode", "metric", "benchmark"):
        table.add_column(col)
    for name in recipe_names():
        try:
            r = get_recipe(name)
        except TrustJudgeError as exc:
            table.add_row(escape(name), "-", "-", "-", escape(f"broken: {exc}"))
            continue
        defaults = get_metric(r.metric).params
        params = ", ".join(f"{k}={v}" for k, v in r.metric_params.items() if v != defaults.get(k))
        table.add_row(escape(r.name), escape(r.version), escape(r.mode),
                      escape(r.metric + (f" ({params})" if params else "")), escape(r.benchmark))
    wide_console().print(table)


def _show(recipe: Recipe, result: dict[str, Any], judge: str) -> None:
    table = Table(title=escape(f"{recipe.name} {recipe.version} ({recipe.benchmark}) by {judge}: {recipe.metric}, "
                               f"{result['interval']}"))
    for col in ("system", recipe.metric, "95% CI", "scored", "items", "unscored"):
        table.add_column(escape(col), justify="left" if col == "system" else "right")
    rows = [("all", result), *result["systems"].items()] if len(result["systems"]) > 1 else [("all", result)]
    for name, e in rows:
        low, high = e["ci"]
        table.add_row(escape(name), _num(e["value"]), f"[{_num(low)}, {_num(high)}]", str(e["n"]), str(e["items"]),
                      str(e["unscored"]))
    wide_console().print(table)
    if result.get("groups"):
        _show_groups(recipe.metric, result["by"], result["groups"])
    parts = result.get("parts") if "parts" in result else None
    if parts:
        _show_parts(parts)


def _show_groups(metric: str, by: str, groups: dict[str, Any]) -> None:
    """The metric per value of the item field ``by`` (the recipe's ``[metric] by``)."""
    table = Table(title=escape(f"By {by} (each over its items' responses; '-': items without {by})"))
    for col in (by, metric, "95% CI", "scored", "items", "unscored"):
        table.add_column(escape(col), justify="left" if col == by else "right")
    for name, e in groups.items():
        low, high = e["ci"]
        table.add_row(escape(name), _num(e["value"]), f"[{_num(low)}, {_num(high)}]", str(e["n"]), str(e["items"]),
                      str(e["unscored"]))
    wide_console().print(table)


def _show_parts(parts: dict[str, Any]) -> None:
    """A recipe with parts: each part's metric over all responses."""
    table = Table(title="Parts (each over all responses; the headline combines them per response)")
    for col in ("part", "metric", "value", "95% CI", "scored", "items", "unscored"):
        table.add_column(col, justify="left" if col in ("part", "metric") else "right")
    for name, e in parts.items():
        low, high = e["ci"]
        table.add_row(escape(name), escape(e["metric"]), _num(e["value"]), f"[{_num(low)}, {_num(high)}]",
                      str(e["n"]), str(e["items"]), str(e["unscored"]))
    wide_console().print(table)


def _show_audit(audit: dict[str, Any]) -> None:
    consistency = audit.get("consistency")
    if consistency:
        table = Table(title="Consistency (TrustJudge audit): conflict ratio CR and non-transitivity NTR")
        for col in ("measure", "ratio", "95% CI", "counted"):
            table.add_column(col, justify="left" if col == "measure" else "right")
        for key, cr in consistency.get("conflict", {}).items():
            if key.endswith("/likelihood"):
                ci = cr.get("ci") or [None, None]
                table.add_row(escape(f"CR {key}"), _num(cr.get("ratio")), f"[{_num(ci[0])}, {_num(ci[1])}]",
                              str(cr.get("counted", cr.get("pairs", "-"))))
        for key, ntr in consistency.get("ntr", {}).items():
            if key.startswith("likelihood/"):
                ci = ntr.get("ci") or [None, None]
                table.add_row(escape(f"NTR {key}"), _num(ntr.get("ratio")), f"[{_num(ci[0])}, {_num(ci[1])}]",
                              str(ntr.get("valid_subsets", "-")))
        wide_console().print(table)
    if "mode" in audit:
        err.print(escape("mode audit: " + ", ".join(k for k in audit["mode"]) + " (in --json)"), highlight=False)


@click.command("run")
@click.argument("recipe")
@click.argument("items", type=click.Path(exists=True, allow_dash=True, path_type=Path))
@JUDGE
@STORE
@click.option("--out", "-o", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path), default=None,
              help="Also write the records (JSON lines) here.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the metric (and audit) as JSON here.")
@click.option("--audit", "audit_", is_flag=True, help="Also run the recipe's own checks (e.g. CR/NTR).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Judge only the first N items.")
@click.option("--format", "fmt", default="auto", show_default=True, help="Input format (as for `trustjudge score`).")
@BOOTSTRAP
@click.option("--seed", "bootstrap_seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Bootstrap seed.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@click.pass_context
def run(ctx: click.Context, recipe: str, items: Path, judge: str, store: Path | None, out: Path | None,
        json_out: Path | None, audit_: bool, limit: int | None, fmt: str, bootstrap: int, bootstrap_seed: int,
        quiet: bool) -> None:
    """Judge ITEMS as RECIPE says (a shipped recipe's name, or a recipe file's path) and print the benchmark's
    metric with a 95% bootstrap interval over items; --audit adds the recipe's checks."""
    r = get_recipe(recipe)
    loaded = read_items(readable_input(items), False, 1, fmt)
    if limit is not None:
        loaded = loaded[:limit]
    factory = ctx.meta.get(JUDGE_FACTORY, make_judge)
    settings = r.judge_kwargs()
    protocol = settings.pop("protocol", "direct")
    max_new_tokens = settings.pop("max_new_tokens", 256)
    temperature = float(settings.pop("temperature", 0.0))
    j = factory(judge, store, protocol, 8, temperature, 0, max_new_tokens, 1e-3, None, **settings)
    j.source = str(items)
    try:
        with progress(quiet) as bar:
            task = bar.add_task(f"{r.name} ({j.name})", total=None)
            result = run_recipe(r, loaded, j, bootstrap=bootstrap, seed=bootstrap_seed, audit=audit_,
                                progress=lambda n: bar.advance(task, n))
        if out is not None:
            with record_output(out, "--out") as stream:
                ascii_only = not is_utf8(stream)
                for row in result.records:
                    stream.write(json.dumps(row, ensure_ascii=ascii_only) + "\n")
        data = result.to_dict()
        _show(r, {**data["result"], **({"parts": data["parts"]} if "parts" in data else {})}, j.name)
        if result.audit:
            _show_audit(result.audit)
        s = j.stats
        if not quiet:
            err.print(escape(f"{r.name}: {len(result.records)} records; model calls {s.model_calls}, from store "
                             f"{s.from_store}; store: {j.store.path}"), highlight=False)
        if json_out is not None:
            write_text(json_out, json.dumps({"judge": j.name, "items": str(items), **data}, indent=2) + "\n", "--json")
    finally:
        j.close()
