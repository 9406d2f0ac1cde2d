"""``trustjudge rank``: rank the systems that wrote the responses."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table
from rich.markup import escape

from ..io._outputs import readable_input, write_text
from ._common import fail, methods_note, print_plan, progress, wide_console, write_records
from ._inputs import read_items
from ._options import MAX_PAIRS_OPTION, SCALES, JudgeOptions, input_options, judge_options, output_options


@click.command("rank")
@input_options
@judge_options("score", "compare")
@output_options(stdout=False)
@click.option("--scale", type=SCALES, default="10", show_default=True,
              help="Scale of the pointwise scores whose means are ranked too.")
@click.option("--method", type=click.Choice(["single", "two_pass", "likelihood", "ppl"]), default="likelihood",
              show_default=True, help="Verdicts for the hard Bradley-Terry fit, Elo and win rates.")
@click.option("--bootstrap", default=200, show_default=True, type=click.IntRange(min=0),
              help="Bootstrap resamples over questions.")
@click.option("--rank-seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Bootstrap and Elo seed.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the ranking as JSON here.")
@MAX_PAIRS_OPTION
def rank(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions, out: Path | None,
         dry_run: bool, scale: str, method: str, bootstrap: int, rank_seed: int, json_out: Path | None,
         max_pairs: int) -> None:
    """Rank the systems that wrote the responses (the `system` field).

    Bradley-Terry with Davidson ties on the soft likelihood probabilities and on hard verdicts, with
    bootstrap intervals over questions, Elo, win rates and mean pointwise scores, and Kendall tau
    between these rankings. The same seed gives the same numbers.
    """
    from ..audit._ranking import rank as fit

    judging.guard(items, {"--out": out, "--json": json_out})
    loaded = read_items(readable_input(items), skip_invalid, 1, fmt, max_pairs=max_pairs)
    j = judging.make(scale=int(scale))
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
        if json_out is not None:
            write_text(json_out, json.dumps({"judge": j.name, "protocol": j.protocol, **data}, indent=2) + "\n",
                       "--json")
    finally:
        j.close()
