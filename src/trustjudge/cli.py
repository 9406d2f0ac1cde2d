"""The ``trustjudge`` command line: a thin shell over :class:`trustjudge.Judge`."""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from . import _audit
from ._adapters import FORMATS, iter_dataset
from ._items import Item
from ._outputs import atomic_output, check_outputs, readable_input, write_text
from ._prompts import scale as make_scale
from ._judge import CompareRecord, Judge, ScoreRecord
from ._scoring import AGGREGATIONS, SCORE_METHODS
from ._store import default_store_path
from .backends import DEFAULT_JUDGE
from ._engine import BACKEND_ERROR
from .errors import BackendError, InputError, TrustJudgeError

err = Console(stderr=True, soft_wrap=True)


class _Finite(click.FloatRange):
    """A float range that also refuses NaN and infinities (which FloatRange lets through)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def _judge_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.argument("items", type=click.Path(dir_okay=False, path_type=Path)),
        click.option("--judge", "-j", default=DEFAULT_JUDGE, show_default=True,
                     help="Judge name: llamacpp/qwen2.5-coder-1.5b, hf/smollm2-135m, hf/gemma3-270m, "
                          "hf//path (folder or .gguf), "
                          "mock/hash."),
        click.option("--protocol", type=click.Choice(["direct", "cot"]), default="direct", show_default=True,
                     help="direct: labels read right after the prompt; cot: the judge writes a critique first."),
        click.option("--store", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help=f"SQLite judgment store. [default: {default_store_path()}]"),
        click.option("--out", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="Write JSONL records here (default: standard output)."),
        click.option("--dry-run", is_flag=True, help="Print the plan (calls, tokens, stored, time) and stop."),
        click.option("--skip-invalid", is_flag=True, help="Skip invalid lines (reported) instead of stopping."),
        click.option("--batch-size", default=8, show_default=True, type=click.IntRange(min=1),
                     help="Prompts per backend call and store write."),
        click.option("--temperature", default=0.0, show_default=True, type=_Finite(min=0.0),
                     help="cot sampling temperature (0 = greedy)."),
        click.option("--seed", default=0, show_default=True, help="Seed for cot sampling."),
        click.option("--max-new-tokens", default=256, show_default=True, type=click.IntRange(min=1),
                     help="cot critique length limit."),
        click.option("--min-label-mass", default=1e-3, show_default=True, type=_Finite(min=0.0, max=1.0),
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


def _validated(path: Path, skip_invalid: bool, min_responses: int, fmt: str) -> Iterator[Item]:
    """The file's valid items; once it is read through, every problem is reported (the run stops on them
    unless ``skip_invalid``) and a file without a valid item is an error."""
    problems: list[InputError] = []
    count = valid = 0
    for value in iter_dataset(path, fmt, min_responses=min_responses):
        if isinstance(value, InputError):
            count += 1
            if len(problems) < 20:
                problems.append(value)
        else:
            valid += 1
            yield value
    _report_problems(path, problems, count, skip_invalid)
    _require_items(path, valid, count)


def _scan(path: Path, skip_invalid: bool, min_responses: int, fmt: str, per_item: Callable[[Item], int]) -> int:
    """Validate the whole file before any model call (keeping nothing in memory); return the judgments."""
    return sum(per_item(item) for item in _validated(path, skip_invalid, min_responses, fmt))


def _require_items(path: Path, valid: int, invalid: int) -> None:
    if not valid:
        raise InputError("holds no valid item to judge" if invalid else "holds no items", file=str(path))


def _digest(path: Path) -> str:
    """SHA-256 of a file's bytes (to tell that it changed between the validation and the judging)."""
    h = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    return h.hexdigest()


def _changed(path: Path) -> InputError:
    return InputError("the file changed while it was being judged; nothing was written. Run the same command "
                      "again: every finished judgment is in the store", file=str(path))


def _stream_items(path: Path, min_responses: int, fmt: str, skip_invalid: bool, digest: str) -> Iterator[Item]:
    """The items of a file validated (and hashed) before: the file is read a second time while judging,
    so a problem that was not there at validation means the file changed, and stops the run."""
    for value in iter_dataset(path, fmt, min_responses=min_responses):
        if isinstance(value, InputError):
            if not skip_invalid:
                raise _changed(path)
            continue
        yield value
    if _digest(path) != digest:
        raise _changed(path)


def _read_items(path: Path, skip_invalid: bool, min_responses: int, fmt: str = "auto") -> list[Item]:
    """Read and validate the whole file once, before any model call; report every problem; return the
    valid items."""
    return list(_validated(path, skip_invalid, min_responses, fmt))


def _guard(items: Path, store: Path | None, template: Path | None, outputs: dict[str, Path | None],
           *templates: Path | None) -> None:
    """Refuse, before any work, outputs that would overwrite the input, a template, the store or each other."""
    check_outputs(outputs, inputs=[items, template, *templates],
                  store=store if store is not None else default_store_path())


def _fail(message: str) -> int:
    err.print(f"[red]error:[/] {message}", highlight=False)
    return 2


def _progress(quiet: bool) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=err, disable=quiet)


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
    digest = _digest(items_path)
    total = _scan(items_path, skip_invalid, min_responses, fmt, per_item)
    if _digest(items_path) != digest:
        raise _changed(items_path)
    j = j_factory()
    summary = _Summary(kind)
    try:
        with atomic_output(out, "--out") as stream:
            with _progress(quiet) as bar:
                task = bar.add_task(f"{kind} ({j.name}, {j.protocol})", total=total)
                stream_items = _stream_items(items_path, min_responses, fmt, skip_invalid, digest)
                gen: Iterator[ScoreRecord | CompareRecord] = (
                    j.score(stream_items, progress=lambda n: bar.advance(task, n)) if kind == "score"
                    else j.compare(stream_items, progress=lambda n: bar.advance(task, n)))
                ascii_only = not _utf8(stream)
                for record in gen:
                    row = record.to_dict()
                    stream.write(json.dumps(row, ensure_ascii=ascii_only) + "\n")
                    summary.add(row)
                    stream.flush()
        if not quiet:
            summary.show(j)
        summary.check(j)
    finally:
        j.close()


def _methods_note(records: list[dict[str, Any]], quiet: bool) -> None:
    """Warn if any record's labels came from the top-k; unless quiet, count each method."""
    methods = Counter(r["method"] for r in records if r.get("method"))
    if methods["top_k"]:
        _warn_top_k()
    if methods and not quiet:
        err.print("labels read: " + ", ".join(f"{k} {v}" for k, v in sorted(methods.items())), highlight=False)


def _warn_top_k() -> None:
    """Say once per run that labels came from the top-k log-probabilities (``-q`` does not hide it)."""
    err.print("[yellow]warning:[/] labels are read from the judge server's top-k log-probabilities, not exactly: "
              "a label outside the top-k gets probability 0 and scores can differ from an exact judge "
              "(records say \"method\": \"top_k\"; see docs/judges.md for servers with exact labels)",
              highlight=False)


class _Summary:
    """Running totals for the end-of-run table (constant memory, whatever the input size)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.records = 0
        self.unscored: Counter[str] = Counter()
        self.sums: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()
        self.verdicts: dict[str, Counter[str | None]] = {m: Counter() for m in AGGREGATIONS}
        self.methods: Counter[str] = Counter()

    def add(self, row: dict[str, Any]) -> None:
        self.records += 1
        method = row.get("method")
        if method:
            if method == "top_k" and not self.methods["top_k"]:
                _warn_top_k()
            self.methods[method] += 1
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
        if self.methods:
            err.print("labels read: " + ", ".join(f"{k} {v}" for k, v in sorted(self.methods.items())), highlight=False)
        if s.last_error and self.unscored.get(BACKEND_ERROR):
            err.print(f"[yellow]backend error:[/] {s.last_error}", highlight=False)

    def check(self, j: Judge) -> None:
        """Fail (exit non-zero) when the judge failed every judgment it was asked for."""
        failed = self.unscored.get(BACKEND_ERROR, 0)
        if failed and failed == self.records:
            cause = j.stats.last_error or "no message"
            raise BackendError(f"every judgment failed ({failed} backend errors; the records say backend_error): "
                               f"{cause}")


@click.group()
@click.version_option(package_name="trustjudge")
def cli() -> None:
    """trustjudge: LLM-as-a-judge with distribution-sensitive scores and likelihood-aware verdicts."""


@cli.command("score")
@_judge_options
@click.option("--scale", type=click.Choice(["5", "10", "100"]), default="10", show_default=True,
              help="Rating scale 1..N (10: the default judge's best trade-off, bench/results/consistency.md).")
@click.option("--distribution", is_flag=True, help="Include each response's full label distribution.")
def score_cmd(items: Path, judge: str, protocol: str, store: Path | None, out: Path | None, dry_run: bool,
              skip_invalid: bool, template: Path | None, quiet: bool, fmt: str, scale: str, distribution: bool,
              **run: Any) -> None:
    """Score every response under every method (discrete, geval, expected, trustjudge)."""
    _guard(items, store, template, {"--out": out})
    _run("score", readable_input(items), out, dry_run, skip_invalid, quiet,
         lambda: _make_judge(judge, store, protocol, scale=int(scale), pointwise_template=template,
                             keep_distribution=distribution, **run), fmt)


@cli.command("compare")
@_judge_options
@click.option("--delta", default=0.0, show_default=True, type=_Finite(min=0.0),
              help="Tie margin for likelihood and ppl aggregation.")
def compare_cmd(items: Path, judge: str, protocol: str, store: Path | None, out: Path | None, dry_run: bool,
                skip_invalid: bool, template: Path | None, quiet: bool, fmt: str, delta: float, **run: Any) -> None:
    """Compare pairs in both orders under every aggregation (single, two_pass, likelihood, ppl)."""
    _guard(items, store, template, {"--out": out})
    _run("compare", readable_input(items), out, dry_run, skip_invalid, quiet,
         lambda: _make_judge(judge, store, protocol, delta=delta, pairwise_template=template, **run), fmt)


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {text!r}") from None


def parse_scales(text: str, param: Any = None) -> list[int]:
    """``--scales``: comma-separated 5, 10 or 100, at least one (checked before any judging)."""
    values = _int_list(text)
    bad = [v for v in values if v not in (5, 10, 100)]
    if bad or not values:
        raise click.BadParameter(f"scales are 5, 10 or 100, got {text!r}", param=param)
    return list(dict.fromkeys(values))


def parse_ks(text: str, param: Any = None) -> list[int]:
    """``--ks``: comma-separated subset sizes of 3 or more."""
    values = _int_list(text)
    if not values or min(values) < 3:
        raise click.BadParameter(f"subset sizes k must be 3 or more, got {text!r}", param=param)
    return values


def parse_deltas(text: str, param: Any = None) -> list[float]:
    """``--delta-sweep``: comma-separated finite tolerances of 0 or more."""
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {text!r}", param=param) from None
    if any(not math.isfinite(v) or v < 0 for v in values):
        raise click.BadParameter(f"deltas must be finite and 0 or more, got {text!r}", param=param)
    return values


def _fmt(value: float) -> str:
    return "-" if value != value else f"{value:.3f}"


@cli.command("audit")
@_judge_options
@click.option("--scales", default="5,100", show_default=True, callback=lambda c, p, v: parse_scales(v, p),
              help="Pointwise scales to judge and audit.")
@click.option("--delta", default=0.0, show_default=True, type=_Finite(min=0.0),
              help="Score tolerance of the conflict ratio.")
@click.option("--delta-sweep", default="", callback=lambda c, p, v: parse_deltas(v, p),
              help="Comma-separated deltas: CR for each (e.g. 0,1,2,5).")
@click.option("--ks", default="3,4,5", show_default=True, callback=lambda c, p, v: parse_ks(v, p),
              help="Subset sizes k (3 or more) for NTR_k.")
@click.option("--bootstrap", default=1000, show_default=True, type=click.IntRange(min=0),
              help="Bootstrap resamples over items (0: no intervals).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the audit as JSON here.")
@click.option("--pairwise-template", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Your own pairwise prompt template (--template sets the pointwise one).")
@click.option("--injection", is_flag=True,
              help="Also score every response with an appended instruction to give the top score, and report "
                   "how far the judge moves (one more pointwise judgment per response and scale).")
def audit_cmd(items: Path, judge: str, protocol: str, store: Path | None, out: Path | None, dry_run: bool,
              skip_invalid: bool, template: Path | None, quiet: bool, fmt: str, scales: list[int], delta: float,
              delta_sweep: list[float], ks: list[int], bootstrap: int, json_out: Path | None,
              pairwise_template: Path | None, injection: bool, **run: Any) -> None:
    """Judge what the store lacks, then audit consistency and agreement with human labels.

    One table, a row per method: conflict ratio of every scoring method against every aggregation,
    NTR_k with circular/equivalence splits and tie rates, swap flips, position and length bias,
    agreement with human labels (with bootstrap intervals over items), and unscored counts.
    """
    scale_list, ks_list = scales, ks
    _guard(items, store, template, {"--out": out, "--json": json_out}, pairwise_template)
    loaded = _read_items(readable_input(items), skip_invalid, 1, fmt)
    j = _make_judge(judge, store, protocol, pointwise_template=template, pairwise_template=pairwise_template, **run)
    try:
        if dry_run:
            for points in scale_list:
                j.scale = make_scale(points)
                _print_plan(j, loaded, f"score ({points}-point)")
            _print_plan(j, [it for it in loaded if len(it.responses) >= 2], "compare")
            return
        with _progress(quiet) as bar:
            task = bar.add_task(f"audit ({j.name}, {j.protocol})",
                                total=j.audit_judgments(loaded, scale_list, injection))
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
        deltas = delta_sweep
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
            write_text(json_out, json.dumps(payload, indent=2) + "\n", "--json")
        if out is not None:
            with atomic_output(out, "--out") as fh:
                for records in result.score_records.values():
                    for rec in records:
                        fh.write(json.dumps({"kind": "score", **rec}) + "\n")
                for rec in result.compare_records:
                    fh.write(json.dumps({"kind": "compare", **rec}) + "\n")
        _methods_note([*(r for rs in result.score_records.values() for r in rs), *result.compare_records], quiet)
        if not quiet:
            s = j.stats
            err.print(f"model calls: {s.model_calls}; from store: {s.from_store}; store: {j.store.path}",
                      highlight=False)
    finally:
        j.close()


@cli.command("rank")
@_judge_options
@click.option("--scale", type=click.Choice(["5", "10", "100"]), default="10", show_default=True,
              help="Scale of the pointwise scores whose means are ranked too.")
@click.option("--method", type=click.Choice(["single", "two_pass", "likelihood", "ppl"]), default="likelihood",
              show_default=True, help="Verdicts for the hard Bradley-Terry fit, Elo and win rates.")
@click.option("--bootstrap", default=200, show_default=True, type=click.IntRange(min=0),
              help="Bootstrap resamples over questions.")
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

    _guard(items, store, template, {"--out": out, "--json": json_out})
    loaded = _read_items(readable_input(items), skip_invalid, 1, fmt)
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
        _methods_note([*scores, *pairs], quiet)
        if out is not None:  # the records the ranking rests on
            with atomic_output(out, "--out") as fh:
                for rec in scores:
                    fh.write(json.dumps({"kind": "score", **rec}) + "\n")
                for rec in pairs:
                    fh.write(json.dumps({"kind": "compare", **rec}) + "\n")
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
            agree.add_row(str(a.get("first")), str(a.get("second")), "-" if tau is None else f"{tau:.2f}",
                          str(a.get("n")))
        wide.print(agree)
        if json_out is not None:
            write_text(json_out, json.dumps({"judge": j.name, "protocol": j.protocol, **data}, indent=2) + "\n",
                       "--json")
    finally:
        j.close()


def _register_extra_commands() -> None:
    # Each lives in its own module and imports its heavy dependencies (FastAPI, matplotlib) on use.
    from ._cli_report import command as report_command
    from ._cli_serve import serve

    cli.add_command(report_command)
    cli.add_command(serve)


_register_extra_commands()


def _utf8(stream: Any) -> bool:
    return str(getattr(stream, "encoding", "") or "").lower().replace("_", "-") in ("utf-8", "utf8")


def _safe_std_streams() -> None:
    """On a terminal or pipe that is not UTF-8, write what it cannot show as escapes instead of failing
    (JSON records on such a standard output are written with \\u escapes: the same JSON)."""
    for stream in (sys.stdout, sys.stderr):
        if not _utf8(stream) and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def main() -> None:
    """Entry point: turns trustjudge errors into one clear line and exit status 2."""
    _safe_std_streams()
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:  # click turns Ctrl-C into Abort
        err.print("interrupted: every finished batch is in the store; run the same command to resume")
        sys.exit(130)
    except TrustJudgeError as exc:
        sys.exit(_fail(str(exc)))
    except OSError as exc:  # a file or device failed (unreadable input, full disk): one line, no traceback
        where = f"{exc.filename}: " if exc.filename else ""
        sys.exit(_fail(f"{where}{exc.strerror or exc}"))
    except KeyboardInterrupt:
        err.print("interrupted: every finished batch is in the store; run the same command to resume")
        sys.exit(130)


if __name__ == "__main__":
    main()
