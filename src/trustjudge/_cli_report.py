"""``trustjudge report``: audit a file (judging only what the store lacks) and write a self-contained HTML report.

Registered in :mod:`trustjudge.cli` as ``cli.add_command(command)``. The cli helpers it reuses and
matplotlib are imported when the command runs, so cli.py may import this module at any point (no import
cycle) and ``trustjudge --help`` does not load matplotlib.
"""

from __future__ import annotations

from pathlib import Path

import click

from ._adapters import FORMATS
from .backends import DEFAULT_JUDGE


@click.command("report")
@click.argument("items", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--html", "html_out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Write the HTML report here (one self-contained file).")
@click.option("--judge", "-j", default=DEFAULT_JUDGE, show_default=True,
              help="Judge name: llamacpp/qwen2.5-coder-1.5b, hf/smollm2-135m, hf/gemma3-270m, "
                   "hf//path (folder or .gguf), mock/hash.")
@click.option("--store", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="SQLite judgment store (default: the user store, as for `trustjudge audit`).")
@click.option("--protocol", type=click.Choice(["direct", "cot"]), default="direct", show_default=True,
              help="direct: labels read right after the prompt; cot: the judge writes a critique first.")
@click.option("--format", "fmt", type=click.Choice(["auto", *FORMATS]), default="auto", show_default=True,
              help="Input format: trustjudge items (JSONL/CSV) or a dataset's own format (see README).")
@click.option("--scales", default="5,100", show_default=True, help="Pointwise scales to judge and audit.")
@click.option("--bootstrap", default=1000, show_default=True, type=click.IntRange(min=0),
              help="Bootstrap resamples over items for the intervals (0: none).")
@click.option("--delta", default=0.0, show_default=True, type=click.FloatRange(min=0.0),
              help="Score tolerance of the conflict ratio.")
@click.option("--ks", default="3,4,5", show_default=True, help="Subset sizes k (3 or more) for NTR_k.")
@click.option("--title", default=None, help="Report title (default: 'trustjudge audit report').")
@click.option("--skip-invalid", is_flag=True, help="Skip invalid lines (reported) instead of stopping.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def command(items: Path, html_out: Path, judge: str, store: Path | None, protocol: str, fmt: str, scales: str,
            bootstrap: int, delta: float, ks: str, title: str | None, skip_invalid: bool, quiet: bool) -> None:
    """Audit ITEMS like `trustjudge audit` and write an HTML report: plots, audit table, ranking, conflicts."""
    from ._report import DEFAULT_TITLE, render_report
    from ._outputs import readable_input, write_text
    from .cli import _guard, _make_judge, _progress, _read_items, err, parse_ks, parse_scales

    scale_list, ks_list = parse_scales(scales), parse_ks(ks)
    if delta != delta:
        raise click.BadParameter("must be a finite number", param_hint="--delta")
    _guard(items, store, None, {"--html": html_out})
    loaded = _read_items(readable_input(items), skip_invalid, 1, fmt)
    j = _make_judge(judge, store, protocol, batch_size=8, temperature=0.0, seed=0, max_new_tokens=256,
                    min_label_mass=1e-3)
    try:
        with _progress(quiet) as bar:
            task = bar.add_task(f"audit ({j.name}, {j.protocol})", total=j.audit_judgments(loaded, scale_list))
            run = j.audit(loaded, scales=scale_list, delta=delta, ks=ks_list, bootstrap=bootstrap,
                          progress=lambda n: bar.advance(task, n))
        name, used_protocol, calls, from_store = j.name, j.protocol, j.stats.model_calls, j.stats.from_store
    finally:
        j.close()

    ranking = None
    try:
        from ._ranking import rank
    except ImportError:  # the ranking module is optional: no ranking section then
        pass
    else:
        try:
            ranking = rank(run.compare_records, run.score_records[max(run.score_records)],
                           bootstrap=bootstrap).to_dict()
        except ValueError as exc:  # e.g. the items name fewer than two systems: the report has no ranking
            if not quiet:
                err.print(f"no ranking: {exc}", highlight=False)

    page = render_report(run, judge=name, protocol=used_protocol, data=str(items), ranking=ranking,
                         title=title or DEFAULT_TITLE, items=loaded)
    write_text(html_out, page, "--html")
    if not quiet:
        err.print(f"report: {html_out} ({len(page) / 1024:,.0f} KiB); {run.report.items} items, "
                  f"{run.report.pairs} pairs; model calls: {calls}, from store: {from_store}", highlight=False)
