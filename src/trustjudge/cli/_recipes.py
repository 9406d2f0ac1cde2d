"""``trustjudge recipes`` and ``trustjudge run RECIPE ITEMS``: benchmarks' protocols as shipped files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from ..errors import ConfigError, TrustJudgeError
from ..io._adapters import FORMATS
from ..io._frames import parse_mapping
from ..io._outputs import readable_input, record_output, write_text
from ..recipes import Recipe, get_metric, get_recipe, recipe_names, run_recipe
from ..recipes._readers import READERS, detect
from ..recipes._readers import read as read_benchmark
from ..recipes._recipe import with_benchmark_dir
from ..recipes._run import prepare_items
from ._common import err, is_utf8, progress, wide_console
from ._inputs import InputFormat, read_items
from ._options import JUDGE, JUDGE_FACTORY, STORE, make_judge
from ._summary import BOOTSTRAP


def _num(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _shown(path: Path, recipe: Recipe) -> str:
    """A template file relative to its recipe's folder (where it must be), else its full path."""
    folder = recipe.path.parent if recipe.path is not None else None
    return str(path.relative_to(folder.resolve())) if folder is not None and path.is_relative_to(folder.resolve()) \
        else str(path)


@click.command("recipes")
def recipes() -> None:
    """List the recipes: shipped and installed ones (name, version, benchmark, metric)."""
    table = Table(title="Recipes (trustjudge run NAME ITEMS; a recipe file's path works too)")
    for col in ("name", "version", "mode", "metric", "templates", "benchmark"):
        table.add_column(col)
    for name in recipe_names():
        try:
            r = get_recipe(name)
        except TrustJudgeError as exc:
            table.add_row(escape(name), "-", "-", "-", "-", escape(f"broken: {exc}"))
            continue
        defaults = get_metric(r.metric).params
        params = ", ".join(f"{k}={v}" for k, v in r.metric_params.items() if v != defaults.get(k))
        files = r.template_files()
        shown = ", ".join(f"{k}={_shown(v, r)}" for k, v in files.items()) or "(package defaults)"
        table.add_row(escape(r.name), escape(r.version), escape(r.mode),
                      escape(r.metric + (f" ({params})" if params else "")), escape(shown), escape(r.benchmark))
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
    if result.get("readings"):
        _show_readings(result["readings"])
    if result.get("groups"):
        _show_groups(recipe.metric, result["by"], result["groups"])
    parts = result.get("parts") if "parts" in result else None
    if parts:
        _show_parts(parts)


def _show_readings(readings: dict[str, Any]) -> None:
    """Hard (argmax) and soft (expected) side by side, the published reading first."""
    table = Table(title="Readings (the published one first; hard: the judge's argmax verdicts, soft: expected "
                        "under its label distribution)")
    for col in ("reading", "value", "95% CI", "scored", "unscored"):
        table.add_column(col, justify="left" if col == "reading" else "right")
    for name, e in readings.items():
        low, high = e["ci"]
        table.add_row(escape(name + (" (published)" if e.get("published") else "")), _num(e["value"]),
                      f"[{_num(low)}, {_num(high)}]", str(e["n"]), str(e["unscored"]))
    wide_console().print(table)


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
    for col in ("part", "metric", "value", "95% CI", "scored", "items", "unscored", "beside it"):
        table.add_column(col, justify="left" if col in ("part", "metric", "beside it") else "right")
    for name, e in parts.items():
        low, high = e["ci"]
        readings = list((e.get("readings") or {}).items())
        first = f" ({readings[0][0]})" if readings else ""
        beside = "; ".join(f"{k} {_num(r['value'])}" for k, r in readings[1:]) or "-"
        table.add_row(escape(name), escape(e["metric"] + first), _num(e["value"]), f"[{_num(low)}, {_num(high)}]",
                      str(e["n"]), str(e["items"]), str(e["unscored"]), escape(beside))
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
@click.option("--format", "fmt", default="auto", show_default=True,
              help="Input format: as for `trustjudge score`, or a benchmark's released format (the recipe's "
                   "[input] format: omnispatial, livedrbench, puzzleworld, sc-arena-scienceqa, sc-arena-celltype, "
                   "sc-arena-captioning, sc-arena-generation, sc-arena-perturbation, geoprivacy, visplotbench, "
                   "visplotbench-vis, datamind); "
                   "auto: the recipe's reader where the file has its schema.")
@click.option("--map", "column_map", multiple=True, metavar="FIELD=COLUMN,...",
              help="Read a table in another schema: which column holds each field (see docs/formats.md).")
@click.option("--benchmark-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A checkout of the benchmark's repository: judge with the benchmark's own prompt (the recipe's "
                   "[benchmark_prompt] file, its sha256 checked).")
@click.option("--allow-changed-prompt", is_flag=True,
              help="With --benchmark-dir: use the prompt file even when its sha256 is not the recipe's (said in the "
                   "records).")
@BOOTSTRAP
@click.option("--seed", "bootstrap_seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Bootstrap seed.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@click.pass_context
def run(ctx: click.Context, recipe: str, items: Path, judge: str, store: Path | None, out: Path | None,
        json_out: Path | None, audit_: bool, limit: int | None, fmt: str, column_map: tuple[str, ...],
        benchmark_dir: Path | None, allow_changed_prompt: bool, bootstrap: int, bootstrap_seed: int,
        quiet: bool) -> None:
    """Judge ITEMS as RECIPE says (a shipped recipe's name, or a recipe file's path) and print the benchmark's
    metric with a 95% bootstrap interval over items; --audit adds the recipe's checks."""
    r = get_recipe(recipe)
    if benchmark_dir is not None:
        r = with_benchmark_dir(r, benchmark_dir, allow_changed=allow_changed_prompt)
        for used in [r.prompt, *r.rubric_prompts.values(), *r.group_prompts.values()]:
            if used.get("matches_recipe") is False:
                err.print(escape(f"warning: {used['file']} has sha256 {used['sha256']}, not the recipe's "
                                 f"{used['recipe_sha256']}: judging with the changed file (--allow-changed-prompt)"),
                          highlight=False)
    try:
        mapping = parse_mapping(column_map) or None
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--map") from None
    if mapping is not None and fmt in READERS:
        raise click.BadParameter(f"--map reads a table in another schema; {fmt} is a benchmark's own format, read "
                                 "as published", param_hint="--map")
    source = readable_input(items)
    owns = [f.strip() for f in str(r.input.get("format", "")).split(",") if f.strip() in READERS]  # one or several
    own = next((f for f in owns if detect(source, f)), None) if fmt == "auto" and mapping is None else None
    if fmt in READERS or own is not None:
        loaded = read_benchmark(source, fmt if fmt in READERS else str(own))
    else:
        if fmt not in ("auto", *FORMATS):
            raise click.BadParameter(f"unknown format {fmt!r}: auto, {', '.join(FORMATS)} or a benchmark's "
                                     f"({', '.join(READERS)})", param_hint="--format")
        loaded = read_items(source, False, 1, InputFormat(fmt, mapping))
    if limit is not None:
        loaded = loaded[:limit]
    loaded = prepare_items(r, loaded, str(items))
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
        _show(r, {**data["result"], **({"parts": data["parts"]} if "parts" in data else {}),
                  **({"readings": data["readings"]} if "readings" in data else {})}, j.name)
        passes = data.get("execution", {}).get("pass_rate_by_attempt")
        if passes:  # VisPlotBench's print_exec_pass.py: Init, then Post A<k> after debug attempt k, over all tasks
            wide_console().print(escape("execution pass rate (over all tasks): " + ", ".join(
                f"{'Init' if k == 0 else f'Post A{k - 1}'} {_num(v)}" for k, v in enumerate(passes))), highlight=False)
        if not quiet:
            used = r.prompt_used()
            err.print(escape("prompt: " + (f"the benchmark's own, {used['file']} (sha256 {used['sha256'][:12]}"
                                           f"{', CHANGED from the recipe' if not used['matches_recipe'] else ''})"
                                           if used["source"] == "benchmark" else
                                           "this recipe's own (" + (", ".join(used.get("files", {}).values())
                                                                    or "package defaults") + ")")
                             + (f"; the paper's judge: {r.published_judge}" if r.published_judge else "")),
                      highlight=False)
        if result.audit:
            _show_audit(result.audit)
        s = j.stats
        if not quiet:
            err.print(escape(f"{r.name}: {len(result.records)} records; model calls {s.model_calls}"
                             f"{s.recorded_note()}, from store {s.from_store}; store: {j.store.path}"), highlight=False)
        if json_out is not None:
            write_text(json_out, json.dumps({"judge": j.name, "items": str(items), **data}, indent=2) + "\n", "--json")
    finally:
        j.close()
