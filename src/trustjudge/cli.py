"""The ``trustjudge`` command line: a thin shell over :class:`trustjudge.Judge`."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from . import _audit
from ._adapters import FORMATS, iter_dataset
from ._items import Item
from ._prompts import scale as make_scale
from ._judge import CompareRecord, Judge, ScoreRecord
from ._scoring import AGGREGATIONS, SCORE_METHODS
from ._store import default_store_path
from .backends import DEFAULT_JUDGE
from .errors import InputError, TrustJudgeError

err = Console(stderr=True, soft_wrap=True)


def _judge_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.argument("items", type=click.Path(dir_okay=False, path_type=Path)),
        click.option("--judge", "-j", default=DEFAULT_JUDGE, show_default=True,
                     help="Judge name: hf/smollm2-135m, hf/gemma3-270m, hf//path/to/model (folder or .gguf), mock/hash."),
        click.option("--protocol", type=click.Choice(["direct", "cot"]), default="direct", show_default=True,
                     help="direct: labels read right after the prompt; cot: the judge writes a critique first."),
        click.option("--store", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help=f"SQLite judgment store. [default: {default_store_path()}]"),
        click.option("--out", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="Write JSONL records here (default: standard output)."),
        click.option("--dry-run", is_flag=True, help="Print the plan (calls, tokens, stored, time) and stop."),
        click.option("--skip-invalid", is_flag=True, help="Skip invalid lines (reported) instead of stopping."),
        click.option("--batch-size", default=8, show_default=True, help="Prompts per backend call and store write."),
        click.option("--temperature", default=0.0, show_default=True, help="cot sampling temperature (0 = greedy)."),
        click.option("--seed", default=0, show_default=True, help="Seed for cot sampling."),
        click.option("--max-new-tokens", default=256, show_default=True, help="cot critique length limit."),
        click.option("--min-label-mass", default=1e-3, show_default=True,
                     help="Below this probability on valid labels a judgment is unscored (no_label_mass)."),
        click.option("--closing", type=click.Choice(["every", "needed"]), default="every", show_default=True,
                     help="every: each label read with its closing bracket (exact); needed: only labels that "
                          "begin another (5 of 57): 10x fewer label reads on 100 points, not exact."),
        click.option("--template", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
                     help="Your own prompt template (string.Template fields, see README)."),
        click.option("--quiet", "-q", is_flag=True, help="No progress bar or summary."),
        click.option("--ray", "ray_address", is_flag=False, flag_value="local", default=None,
                     help="Run the judgments on Ray Data actors (`--ray` starts a local Ray; `--ray ADDRESS` joins "
                          "a cluster). Results and store are those of a local run."),
        click.option("--format", "fmt", type=click.Choice(["auto", *FORMATS]), default="auto", show_default=True,
                     help="Input format: trustjudge items (JSONL/CSV) or a dataset's own format (see README)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _report_problems(path: Path, problems: list[InputError], count: int, skip_invalid: bool) -> None:
    if not count:
        return
    for p in problems:
        err.print(f"[red]{'skipped' if skip_invalid else 'error'}:[/] {p}", highlight=False)
    if count > len(problems):
        err.print(f"... and {count - len(problems)} more")
    if not skip_invalid:
        raise SystemExit(_fail(f"{count} invalid line(s) in {path}; fix them or pass --skip-invalid"))
    err.print(f"[yellow]{count} invalid line(s) skipped[/]")


def _scan(path: Path, skip_invalid: bool, min_responses: int, fmt: str, per_item: Callable[[Item], int]) -> int:
    """Validate the whole file before any model call (keeping nothing in memory); return the judgments."""
    problems: list[InputError] = []
    count = total = 0
    for value in iter_dataset(path, fmt, min_responses=min_responses):
        if isinstance(value, InputError):
            count += 1
            if len(problems) < 20:
                problems.append(value)
        else:
            total += per_item(value)
    _report_problems(path, problems, count, skip_invalid)
    return total


def _stream_items(path: Path, min_responses: int, fmt: str) -> Iterator[Item]:
    return (v for v in iter_dataset(path, fmt, min_responses=min_responses) if not isinstance(v, InputError))


def _read_items(path: Path, skip_invalid: bool, min_responses: int, fmt: str = "auto") -> list[Item]:
    """Validate the whole file before any model call; report every problem; return the valid items."""
    _scan(path, skip_invalid, min_responses, fmt, lambda it: 0)
    return list(_stream_items(path, min_responses, fmt))


def _fail(message: str) -> int:
    err.print(f"[red]error:[/] {message}", highlight=False)
    return 2


def _progress(quiet: bool) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=err, disable=quiet)


def _open_out(path: Path | None) -> TextIO:
    if path is None:
        return sys.stdout
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("w", encoding="utf-8")


def _make_judge(judge: str, store: Path | None, protocol: str, batch_size: int, temperature: float, seed: int,
                max_new_tokens: int, min_label_mass: float, ray_address: str | None = None, **extra: Any) -> Judge:
    backend: Any = judge
    if ray_address is not None:
        from .backends._ray import ray_backend

        backend = ray_backend(judge, None if ray_address == "local" else ray_address)
        # Each engine batch is one Ray Data job (actors start and load the model): send whole chunks.
        batch_size = max(batch_size, 256)
    return Judge(backend, store=store, protocol=protocol, batch_size=batch_size,  # type: ignore[arg-type]
                 temperature=temperature, seed=seed, max_new_tokens=max_new_tokens,
                 min_label_mass=min_label_mass, **extra)


def _print_plan(j: Judge, items: list[Item], kind: str) -> None:
    plan = j.plan(items, kind)
    table = Table(title=f"Plan: {kind} with {j.name} ({plan.protocol})")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("judgments (prompts)", f"{plan.judgments:,}")
    table.add_row("already in the store", f"{plan.stored:,}")
    table.add_row("unscorable without a call", f"{plan.unscorable:,}")
    table.add_row("model calls to make", f"{plan.model_calls:,}")
    table.add_row("prompt tokens (all / to run)", f"{plan.prompt_tokens:,} / {plan.prompt_tokens_to_run:,}")
    speed = f"{plan.tokens_per_s:,.0f} tokens/s ({'measured' if plan.measured else 'default estimate'})"
    table.add_row("speed", speed)
    eta = plan.estimated_seconds
    extra = " + critique generation" if plan.protocol == "cot" else ""
    table.add_row("estimated time", f"{eta:,.0f} s{extra}" if math.isfinite(eta) else "unknown")
    Console().print(table)


def _run(kind: str, items_path: Path, out: Path | None, dry_run: bool, skip_invalid: bool, quiet: bool,
         j_factory: Callable[[], Judge], fmt: str = "auto") -> None:
    """Judge a file, streaming: items are read, judged and written chunk by chunk."""
    min_responses = 2 if kind == "compare" else 1
    per_item: Callable[[Item], int] = (lambda it: len(it.responses)) if kind == "score" \
        else (lambda it: 2 * len(it.all_pairs()))
    if dry_run:
        items = _read_items(items_path, skip_invalid, min_responses, fmt)
        j = j_factory()
        try:
            _print_plan(j, items, kind)
        finally:
            j.close()
        return
    total = _scan(items_path, skip_invalid, min_responses, fmt, per_item)
    j = j_factory()
    summary = _Summary(kind)
    try:
        stream = _open_out(out)
        try:
            with _progress(quiet) as bar:
                task = bar.add_task(f"{kind} ({j.name}, {j.protocol})", total=total)
                items = _stream_items(items_path, min_responses, fmt)
                gen: Iterator[ScoreRecord | CompareRecord] = (
                    j.score(items, progress=lambda n: bar.advance(task, n)) if kind == "score"
                    else j.compare(items, progress=lambda n: bar.advance(task, n)))
                for record in gen:
                    row = record.to_dict()
                    stream.write(json.dumps(row, ensure_ascii=False) + "\n")
                    summary.add(row)
                    stream.flush()
        finally:
            if stream is not sys.stdout:
                stream.close()
        if not quiet:
            summary.show(j)
    finally:
        j.close()


class _Summary:
    """Running totals for the end-of-run table (constant memory, whatever the input size)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.records = 0
        self.unscored: Counter[str] = Counter()
        self.sums: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()
        self.verdicts: dict[str, Counter[str | None]] = {m: Counter() for m in AGGREGATIONS}

    def add(self, row: dict[str, Any]) -> None:
        self.records += 1
        if row["unscored"]:
            self.unscored[row["unscored"]] += 1
        if self.kind == "score":
            for m in SCORE_METHODS:
                value = row["scores"][m]
                if value is not None:
                    self.sums[m] += value
                    self.counts[m] += 1
        else:
            for m in AGGREGATIONS:
                self.verdicts[m][row["verdicts"][m]] += 1

    def show(self, j: Judge) -> None:
        if self.kind == "score":
            table = Table(title=f"Scores ({j.name}, protocol {j.protocol}, scale 1-{j.scale.points})")
            for col in ("method", "mean", "scored", "unscored"):
                table.add_column(col, justify="right" if col != "method" else "left")
            for m in SCORE_METHODS:
                n = self.counts[m]
                table.add_row(m, f"{self.sums[m] / n:.2f}" if n else "-", str(n), str(self.records - n))
        else:
            table = Table(title=f"Verdicts ({j.name}, protocol {j.protocol}, both orders)")
            for col in ("method", "first wins", "second wins", "tie", "unscored"):
                table.add_column(col, justify="right" if col != "method" else "left")
            for m in AGGREGATIONS:
                c = self.verdicts[m]
                table.add_row(m, str(c["first"]), str(c["second"]), str(c["tie"]), str(c[None]))
        err.print(table)
        s = j.stats
        err.print(f"model calls: {s.model_calls} (labels {s.label_calls}, generations {s.generate_calls}); "
                  f"from store: {s.from_store}; store: {j.store.path}", highlight=False)
        if self.unscored:
            err.print("unscored: " + ", ".join(f"{k} {v}" for k, v in sorted(self.unscored.items())), highlight=False)


@click.group()
@click.version_option(package_name="trustjudge")
def cli() -> None:
    """trustjudge: LLM-as-a-judge with distribution-sensitive scores and likelihood-aware verdicts."""


@cli.command("score")
@_judge_options
@click.option("--scale", type=click.Choice(["5", "10", "100"]), default="100", show_default=True,
              help="Rating scale 1..N.")
@click.option("--distribution", is_flag=True, help="Include each response's full label distribution.")
def score_cmd(items: Path, judge: str, protocol: str, store: Path | None, out: Path | None, dry_run: bool,
              skip_invalid: bool, template: Path | None, quiet: bool, fmt: str, scale: str, distribution: bool,
              **run: Any) -> None:
    """Score every response under every method (discrete, geval, expected, trustjudge)."""
    _run("score", items, out, dry_run, skip_invalid, quiet,
         lambda: _make_judge(judge, store, protocol, scale=int(scale), pointwise_template=template,
                             keep_distribution=distribution, **run), fmt)


@cli.command("compare")
@_judge_options
@click.option("--delta", default=0.0, show_default=True, help="Tie margin for likelihood and ppl aggregation.")
def compare_cmd(items: Path, judge: str, protocol: str, store: Path | None, out: Path | None, dry_run: bool,
                skip_invalid: bool, template: Path | None, quiet: bool, fmt: str, delta: float, **run: Any) -> None:
    """Compare pairs in both orders under every aggregation (single, two_pass, likelihood, ppl)."""
    _run("compare", items, out, dry_run, skip_invalid, quiet,
         lambda: _make_judge(judge, store, protocol, delta=delta, pairwise_template=template, **run), fmt)


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {text!r}") from None


def _fmt(value: float) -> str:
    return "-" if value != value else f"{value:.3f}"


@cli.command("audit")
@_judge_options
@click.option("--scales", default="5,100", show_default=True, help="Pointwise scales to judge and audit.")
@click.option("--delta", default=0.0, show_default=True, help="Score tolerance of the conflict ratio.")
@click.option("--delta-sweep", default="", help="Comma-separated deltas: CR for each (e.g. 0,1,2,5).")
@click.option("--ks", default="3,4,5", show_default=True, help="Subset sizes k for NTR_k.")
@click.option("--bootstrap", default=1000, show_default=True, help="Bootstrap resamples over items (0: no intervals).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the audit as JSON here.")
@click.option("--injection", is_flag=True,
              help="Also score every response with an appended instruction to give the top score, and report "
                   "how far the judge moves (one more pointwise judgment per response and scale).")
def audit_cmd(items: Path, judge: str, protocol: str, store: Path | None, out: Path | None, dry_run: bool,
              skip_invalid: bool, template: Path | None, quiet: bool, fmt: str, scales: str, delta: float,
              delta_sweep: str, ks: str, bootstrap: int, json_out: Path | None, injection: bool,
              **run: Any) -> None:
    """Judge what the store lacks, then audit consistency and agreement with human labels.

    One table, a row per method: conflict ratio of every scoring method against every aggregation,
    NTR_k with circular/equivalence splits and tie rates, swap flips, position and length bias,
    agreement with human labels (with bootstrap intervals over items), and unscored counts.
    """
    scale_list = _int_list(scales)
    ks_list = _int_list(ks)
    loaded = _read_items(items, skip_invalid, 1, fmt)
    j = _make_judge(judge, store, protocol, pointwise_template=template, **run)
    try:
        if dry_run:
            for points in scale_list:
                j.scale = make_scale(points)
                _print_plan(j, loaded, f"score ({points}-point)")
            _print_plan(j, [it for it in loaded if len(it.responses) >= 2], "compare")
            return
        with _progress(quiet) as bar:
            task = bar.add_task(f"audit ({j.name}, {j.protocol})", total=j.audit_judgments(loaded, scale_list, injection))
            result = j.audit(loaded, scales=scale_list, delta=delta, ks=ks_list, bootstrap=bootstrap,
                             progress=lambda n: bar.advance(task, n), injection=injection)
        report = result.report
        table = Table(title=f"Audit of {j.name} (protocol {j.protocol}) on {items}: {report.items} items, "
                            f"{report.pairs} pairs, delta {delta}, 95% bootstrap CI over items (B={bootstrap})")
        for col in ("section", "method", "metric", "value", "95% CI", "n"):
            table.add_column(col, justify="right" if col in ("value", "95% CI", "n") else "left")
        for section, method, metric, value, lo, hi, n in report.rows():
            ci = f"{lo:.3f}-{hi:.3f}" if lo == lo and hi == hi else ""
            shown = f"{value:.0f}" if section == "unscored" else _fmt(value)
            table.add_row(section, method, metric, shown, ci, f"{n:,}")
        wide = Console(width=max(Console().width, 120))
        wide.print(table)
        payload = report.to_dict()
        deltas = [float(x) for x in delta_sweep.split(",") if x.strip()]
        if deltas:
            sweep = Table(title="Conflict ratio by tolerance delta")
            sweep.add_column("scores x verdicts")
            for d in deltas:
                sweep.add_column(f"delta={d:g}", justify="right")
            payload["delta_sweep"] = {}
            for points, records in result.score_records.items():
                for method in ("discrete", "geval", "expected", "trustjudge"):
                    for agg in ("two_pass", "likelihood"):
                        res = _audit.delta_sweep(records, result.compare_records, method, agg, deltas)
                        sweep.add_row(f"{points}pt {method} x {agg}", *(_fmt(r.ratio) for r in res))
                        payload["delta_sweep"][f"{points}/{method}/{agg}"] = [
                            {"delta": r.delta, "ratio": None if r.ratio != r.ratio else r.ratio,
                             "conflicts": r.conflicts, "counted": r.counted} for r in res]
            wide.print(sweep)
        payload.update(judge=j.name, protocol=j.protocol, input=str(items), scales=scale_list)
        if json_out is not None:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(payload, indent=2) + "\n")
        if out is not None:
            with _open_out(out) as fh:
                for records in result.score_records.values():
                    for rec in records:
                        fh.write(json.dumps({"kind": "score", **rec}) + "\n")
                for rec in result.compare_records:
                    fh.write(json.dumps({"kind": "compare", **rec}) + "\n")
        if not quiet:
            s = j.stats
            err.print(f"model calls: {s.model_calls}; from store: {s.from_store}; store: {j.store.path}",
                      highlight=False)
    finally:
        j.close()


@cli.command("rank")
@_judge_options
@click.option("--scale", type=click.Choice(["5", "10", "100"]), default="100", show_default=True,
              help="Scale of the pointwise scores whose means are ranked too.")
@click.option("--method", type=click.Choice(["single", "two_pass", "likelihood", "ppl"]), default="likelihood",
              show_default=True, help="Verdicts for the hard Bradley-Terry fit, Elo and win rates.")
@click.option("--bootstrap", default=200, show_default=True, help="Bootstrap resamples over questions.")
@click.option("--rank-seed", default=0, show_default=True, help="Bootstrap and Elo seed.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the ranking as JSON here.")
def rank_cmd(items: Path, judge: str, protocol: str, store: Path | None, out: Path | None, dry_run: bool,
             skip_invalid: bool, template: Path | None, quiet: bool, fmt: str, scale: str, method: str,
             bootstrap: int, rank_seed: int, json_out: Path | None, **run: Any) -> None:
    """Rank the systems that wrote the responses (the `system` field).

    Bradley-Terry with Davidson ties on the soft likelihood probabilities and on hard verdicts, with
    bootstrap intervals over questions, Elo, win rates and mean pointwise scores, and Kendall tau
    between these rankings. The same seed gives the same numbers.
    """
    from ._ranking import rank

    loaded = _read_items(items, skip_invalid, 1, fmt)
    j = _make_judge(judge, store, protocol, scale=int(scale), pointwise_template=template, **run)
    try:
        if dry_run:
            _print_plan(j, loaded, "score")
            _print_plan(j, [it for it in loaded if len(it.responses) >= 2], "compare")
            return
        with _progress(quiet) as bar:
            total = sum(len(it.responses) + 2 * len(it.all_pairs()) for it in loaded)
            task = bar.add_task(f"rank ({j.name}, {j.protocol})", total=total)
            scores = [r.to_dict() for r in j.score(loaded, progress=lambda n: bar.advance(task, n))]
            pairs = [r.to_dict() for r in j.compare([it for it in loaded if len(it.responses) >= 2],
                                                    progress=lambda n: bar.advance(task, n))]
        try:
            ranking = rank(pairs, scores, method=method, bootstrap=bootstrap, seed=rank_seed)
        except ValueError as exc:
            raise SystemExit(_fail(str(exc))) from None
        table = Table(title=f"Ranking of systems by {j.name} ({j.protocol}); BT strengths are log-strengths, "
                            f"95% CI over questions (B={bootstrap})")
        for col in ranking.COLUMNS:
            table.add_column(col, justify="left" if col == "system" else "right")
        for row in ranking.rows():
            table.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row))
        wide = Console(width=max(Console().width, 120))
        wide.print(table)
        data = ranking.to_dict()
        agree = Table(title="Agreement between rankings (Kendall tau)")
        for col in ("ranking", "vs", "tau", "n"):
            agree.add_column(col)
        for a in data.get("agreements", []):
            tau = a.get("tau")
            agree.add_row(str(a.get("first")), str(a.get("second")), "-" if tau is None else f"{tau:.2f}", str(a.get("n")))
        wide.print(agree)
        if json_out is not None:
            json_out.write_text(json.dumps({"judge": j.name, "protocol": j.protocol, **data}, indent=2) + "\n")
    finally:
        j.close()


def _register_extra_commands() -> None:
    # Each lives in its own module and imports its heavy dependencies (FastAPI, matplotlib) on use.
    from ._cli_report import command as report_command
    from ._cli_serve import serve

    cli.add_command(report_command)
    cli.add_command(serve)


_register_extra_commands()


def main() -> None:
    """Entry point: turns trustjudge errors into one clear line and exit status 2."""
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        err.print("aborted")
        sys.exit(130)
    except TrustJudgeError as exc:
        sys.exit(_fail(str(exc)))
    except KeyboardInterrupt:
        err.print("interrupted: every finished batch is in the store; run the same command to resume")
        sys.exit(130)


if __name__ == "__main__":
    main()
