"""``trustjudge rank``: rank the systems that wrote the responses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from .._judge import Judge
from ..errors import ConfigError, InputError
from ..io._files import load_suite
from ..io._items import Item
from ..io._outputs import readable_input, record_output, write_text
from ..io._suites import Suite
from ..modes._base import RULE_MODES
from ..modes._registry import get_mode, registered_modes
from ._common import fail, methods_note, print_plan, progress, wide_console, write_records
from ._inputs import read_items
from ._mode_options import suite_values
from ._options import MAX_PAIRS_OPTION, SCALE_RANGE, JudgeOptions, input_options, judge_options, output_options
from ._summary import show_summary, write_summary


def _summary_mode(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--mode``: a mode with a summary (``Mode.summary_metrics``), a plug-in's too (checked by asking it)."""
    if value is None:
        return None
    try:
        summarised = get_mode(value).summary_metrics is not None
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None
    if not summarised:
        ranked = [m.name for m in registered_modes().values() if m.summary_metrics is not None]
        raise click.BadParameter(f"the {value} mode has no summary to rank by; the modes with one are "
                                 f"{', '.join(ranked)} (or a plug-in's)")
    return value


@click.command("rank")
@input_options
@judge_options("score", "compare")
@output_options(stdout=False)
@click.option("--scale", type=SCALE_RANGE, default="10", show_default=True,
              help="Scale of the pointwise scores whose means are ranked too, as score's --scale: a top value "
                   "(10: 1..10) or a range (0-5).")
@click.option("--method", type=click.Choice(["single", "two_pass", "likelihood", "ppl"]), default="likelihood",
              show_default=True, help="Verdicts for the hard Bradley-Terry fit, Elo and win rates.")
@click.option("--bootstrap", default=200, show_default=True, type=click.IntRange(min=0),
              help="Bootstrap resamples over questions.")
@click.option("--rank-seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Bootstrap and Elo seed.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the ranking as JSON here.")
@MAX_PAIRS_OPTION
@click.option("--mode", "summary_mode", default=None, callback=_summary_mode, metavar="MODE",
              help="Rank by one mode's per-system headline value instead (score: mean expected score; criteria: "
                   "mean weighted aggregate; checklist: mean satisfaction; claims: expected precision, F1 with "
                   "gold claims; criteria-compare: win rate with BT strength; any other mode with a summary, a "
                   "plug-in's too: its headline value), 95% CI over items.")
@click.option("--suite", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="With --mode criteria/checklist/criteria-compare: the suite whose criteria/checklist apply to "
                   "items carrying none.")
@click.option("--metric", default=None, help="With --mode: the headline value (see `trustjudge summary --help`).")
def rank(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions, out: Path | None,
         dry_run: bool, scale: int | str, method: str, bootstrap: int, rank_seed: int, json_out: Path | None,
         max_pairs: int, summary_mode: str | None, suite: Path | None, metric: str | None) -> None:
    """Rank the systems that wrote the responses (the `system` field, else the response id).

    Bradley-Terry with Davidson ties on the soft likelihood probabilities and on hard verdicts, with
    bootstrap intervals over questions, Elo, win rates and mean pointwise scores, and Kendall tau
    between these rankings. The same seed gives the same numbers. With --mode, by that mode's
    per-system headline value instead.
    """
    from ..audit._ranking import rank as fit

    judging.guard(items, {"--out": out, "--json": json_out}, inputs=(suite,))
    loaded = read_items(readable_input(items), skip_invalid, 1, fmt, max_pairs=max_pairs)
    j = judging.make(scale=scale)
    if summary_mode is not None:
        try:
            _rank_mode(j, loaded, summary_mode, suite, metric, scale, dry_run, quiet, out, json_out, bootstrap,
                       rank_seed)
        finally:
            j.close()
        return
    if suite is not None or metric is not None:
        j.close()
        raise click.UsageError("--suite and --metric need --mode")
    try:
        if dry_run:
            print_plan(j, loaded, j.score_task())
            print_plan(j, [it for it in loaded if len(it.responses) >= 2], j.compare_task())
            return
        with progress(quiet) as bar:
            total = sum(len(it.responses) + 2 * len(it.all_pairs()) for it in loaded)
            task = bar.add_task(f"rank ({j.name}, {j.protocol})", total=total)
            scores = [r.to_dict() for r in j.score(loaded, progress=lambda n: bar.advance(task, n))]
            pairs = [r.to_dict() for r in j.compare([it for it in loaded if len(it.responses) >= 2],
                                                    progress=lambda n: bar.advance(task, n))]
        methods_note([*scores, *pairs], quiet)
        write_records(out, scores, pairs)  # the records the ranking rests on
        try:
            ranking = fit(pairs, scores, method=method, bootstrap=bootstrap, seed=rank_seed)
        except ValueError as exc:
            raise SystemExit(fail(str(exc))) from None
        table = Table(title=escape(f"Ranking of systems by {j.name} ({j.protocol}); BT strengths are log-strengths, "
                                   f"95% CI over questions (B={bootstrap})"))
        for col in ranking.COLUMNS:
            table.add_column(col, justify="left" if col == "system" else "right")
        for row in ranking.rows():
            table.add_row(*(f"{v:.3f}" if isinstance(v, float) else escape(str(v)) for v in row))
        wide = wide_console()
        wide.print(table)
        data = ranking.to_dict()
        agree = Table(title="Agreement between rankings (Kendall tau)")
        for col in ("ranking", "vs", "tau", "n"):
            agree.add_column(col)
        for a in data.get("agreements", []):
            tau = a.get("tau")
            agree.add_row(escape(str(a.get("first"))), escape(str(a.get("second"))),
                          "-" if tau is None else f"{tau:.2f}", str(a.get("n")))
        wide.print(agree)
        wide.print(escape(f"ranked on: {ranking.basis()}"), highlight=False)
        if json_out is not None:
            write_text(json_out, json.dumps({"judge": j.name, "protocol": j.protocol, **data}, indent=2) + "\n",
                       "--json")
    finally:
        j.close()



def _rank_mode(j: Judge, loaded: list[Item], mode: str, suite: Path | None, metric: str | None, scale: int | str,
               dry_run: bool, quiet: bool, out: Path | None, json_out: Path | None, bootstrap: int, seed: int) -> None:
    """``rank --mode``: judge the items with that mode, then each system's headline value with its interval."""
    from ..audit._summary import summarize

    s = load_suite(suite) if suite is not None else Suite()
    declared = get_mode(mode)
    # The mode's own options from the items and --scale (Mode.rank_options), then the suite's (its fields'
    # metadata["suite"], as its command reads them).
    options: dict[str, Any] = dict(declared.rank_options(loaded, scale) if declared.rank_options else {})
    given = suite_values(declared, s)
    if s.rules and "rules" not in given:
        raise InputError(f"the {mode} mode takes no rules (rules apply to the modes {', '.join(RULE_MODES)})",
                         file=str(suite), field="rules")
    options.update(given)
    try:
        task = j.task(mode, **options)
    except InputError as exc:
        if exc.file is None and (exc.field or "").startswith("rules"):
            raise InputError(exc.reason, file=str(suite), field=exc.field) from None
        raise
    todo = [it for it in loaded if len(it.responses) >= declared.min_responses]
    if dry_run:
        print_plan(j, todo, task)
        return
    with progress(quiet) as bar:
        bar_task = bar.add_task(f"rank {mode} ({j.name})", total=sum(task.size(it) for it in todo))
        records = [r.to_dict() for r in j.run(task, todo, progress=lambda n: bar.advance(bar_task, n))]
    if out is not None:
        with record_output(out, "--out") as stream:
            for row in records:
                stream.write(json.dumps(row) + "\n")
    try:
        result = summarize(records, mode=mode, metric=metric, bootstrap=bootstrap, seed=seed)
    except ValueError as exc:
        raise SystemExit(fail(str(exc))) from None
    show_summary(result, f"Ranking of systems by {j.name}: {mode} {result.metric}, 95% CI over items "
                         f"(B={bootstrap})")
    if json_out is not None:
        write_summary(result, json_out, "--json", judge=j.name)
