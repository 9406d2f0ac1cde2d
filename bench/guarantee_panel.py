"""The panel estimators' study (issue 34): PandaLM pairs judged by simulated annotators or sampled critiques
(resumable), and its zero-call analysis.

Judging (default): the study's PandaLM pairs (bench/guarantee_ensemble.py's seeded order, seed 34) with the
default judge under ``--estimator annotators`` (``--size`` 3, examples drawn by the library from part A of the
labelled pairs, which then leave the pairs judged) or ``critiques`` (``--size`` 5, cot at temperature 0.7), in
batches of ``--batch`` pairs; after each batch the store is exported to
bench/results/guarantee_panel_<estimator>_judgments.jsonl.gz (and with ``--commit`` that file is committed); an
empty store imports that export first, so a later session continues where this one stopped.

``--study``: zero calls. Imports the panel's export and the committed default-template judgments, combines the
pairs the panel has fully judged, and reports likelihood accuracy, AUROC against agreement and coverage at 0.7 /
0.8 (split-fit, delta 0.1, ``--splits`` random halves; bench/guarantee_estimators.estimator_study) for the
default template alone and the panel on the same pairs, with model calls per verdict; writes
results/guarantee_panel_<estimator>.json.

    cd bench && TRUSTJUDGE_THREADS=2 nice -n 19 ../.venv/bin/python guarantee_panel.py --estimator annotators \
        --commit > results/work/guarantee_panel.log 2>&1 &
    PYTHONPATH=../src ../.venv/bin/python guarantee_panel.py --estimator annotators --study
    ../.venv/bin/python guarantee_panel.py --judge mock/hash --limit 4 --store /tmp/p.sqlite \
        --export /tmp/p.jsonl.gz                      # smoke test: the hash judge
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from _common import RESULTS, replace_section
from guarantee_ensemble import commit, study_pairs
from guarantee_judge import DATA, EXPORT, JUDGE, log
from trustjudge import Judge
from trustjudge._panel import run_panel, spec
from trustjudge.audit._panel import PAIR, PANELS
from trustjudge.engine._store import Store
from trustjudge.engine._store_io import import_file, write_export


def _paths(estimator: str) -> tuple[Path, Path]:
    return (RESULTS / "work" / f"guarantee_panel_{estimator}.sqlite",
            RESULTS / f"guarantee_panel_{estimator}_judgments.jsonl.gz")


def _todo(judge: Judge, estimator: str, size: int | None, seed: int) -> tuple[list[Any], dict[str, Any]]:
    pairs = study_pairs(DATA, seed)
    panel = spec(judge, estimator, size, pairs)
    shown = {tuple(e["key"]) for ex in panel.get("examples", []) for e in ex}
    return [p for p in pairs if (p.id, p.pairs[0].first, p.pairs[0].second) not in shown], panel


def judge_panel(args: argparse.Namespace) -> None:
    args.store.parent.mkdir(parents=True, exist_ok=True)
    store = Store(args.store)
    if args.export.exists() and store.count() == 0:
        added, skipped, _ = import_file(args.export, store)
        log(f"imported {args.export}: {added} outputs ({skipped} already stored)")
    judge = Judge(args.judge, store=store)
    pairs, panel = _todo(judge, args.estimator, args.size, args.seed)
    pairs = pairs[: args.limit]
    log(f"judge {args.judge}, {args.estimator} x{panel['size']}, {len(pairs)} pairs, store {args.store}, "
        f"pid {os.getpid()}, TRUSTJUDGE_THREADS={os.environ.get('TRUSTJUDGE_THREADS', '')}")
    task = judge.calibration_task("compare")
    try:
        for start in range(0, len(pairs), args.batch):
            calls0, t1 = judge.stats.model_calls, time.perf_counter()
            batch = pairs[start:start + args.batch]
            run_panel(judge, task, batch, panel)
            calls = judge.stats.model_calls - calls0
            done = start + len(batch)
            log(f"pairs {start}-{done - 1}: {calls} model calls, {time.perf_counter() - t1:.0f} s; {done}/{len(pairs)}")
            if calls:
                outputs = write_export(args.store, args.export)
                log(f"export: {outputs} outputs -> {args.export}")
                if args.commit:
                    commit(args.export, f"bench: the {args.estimator} panel study, PandaLM pairs 0-{done - 1} of the "
                                        f"seed-{args.seed} order judged ({outputs} judgments exported)")
    finally:
        judge.close()


def study(args: argparse.Namespace) -> dict[str, Any]:
    from guarantee import StoreOnly
    from guarantee_estimators import estimator_study
    from trustjudge.backends import get_backend

    scratch = RESULTS / "work" / f"guarantee_panel_{args.estimator}_study.sqlite"
    store = Store(scratch)
    for export in (EXPORT, args.export):
        if export.exists():
            import_file(export, store)
    backend = StoreOnly(get_backend(args.judge))
    judge = Judge(backend, store=store)
    pairs, panel = _todo(judge, args.estimator, args.size, args.seed)
    own = {(r.item_id, r.first_id, r.second_id): r.to_dict() for r in judge.compare(pairs)}
    panel_recs = run_panel(judge, judge.calibration_task("compare"), pairs, panel)
    keep = [r for r in panel_recs if r.get("probabilities") and r.get("human") in PAIR
            and all(p is not None for p in r["panel"]["probabilities"])
            and (own.get((r["item_id"], r["first_id"], r["second_id"])) or {}).get("probabilities")]
    base = [own[(r["item_id"], r["first_id"], r["second_id"])] for r in keep]
    per = 2 * panel["size"] * (2 if args.estimator == "critiques" else 1)  # cot: a critique, then a label read
    res: dict[str, Any] = {"judge": args.judge, "estimator": args.estimator, "size": panel["size"],
                           "pairs": len(keep), "splits": args.splits, "calls_per_verdict": per,
                           "accuracy": {n: sum(r["verdicts"]["likelihood"] == r["human"] for r in rs) / max(len(rs), 1)
                                        for n, rs in (("default", base), (args.estimator, keep))}}
    if len(keep) >= 20:
        res["estimators"] = {n: estimator_study("compare", rs, args.splits, 0)["estimators"]["calibrated"]
                             for n, rs in (("calibrated (default)", base), (args.estimator, keep))}
    res["of_pairs"] = len(pairs)
    res["agreeing"] = {n: sum(r["verdicts"]["likelihood"] == r["human"] for r in rs)
                       for n, rs in (("default", base), (args.estimator, keep))}
    (RESULTS / f"guarantee_panel_{args.estimator}.json").write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))
    if "estimators" in res:
        md = RESULTS / "guarantee.md"
        md.write_text(replace_section(md.read_text(), f"{HEADING} ({args.estimator}", section(res)))
    return res


HEADING = "## Simulated annotators and sampled critiques"


def hanley_mcneil_se(a: float, agree: int, disagree: int) -> float:
    """The standard error of an AUROC ``a`` over ``agree`` positives and ``disagree`` negatives (Hanley and
    McNeil 1982), a rough width for a study of few pairs."""
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    var = (a * (1 - a) + (agree - 1) * (q1 - a * a) + (disagree - 1) * (q2 - a * a)) / max(agree * disagree, 1)
    return float(max(var, 0.0) ** 0.5)


def section(res: dict[str, Any]) -> list[str]:
    """The page block of one panel study (what is judged so far)."""
    done = res["pairs"] >= res["of_pairs"]
    name, n = res["estimator"], res["pairs"]
    extent = "every pair" if done else f"PARTIAL: {n} of {res['of_pairs']} pairs"
    title = f"{HEADING} ({name}, {extent})"
    lines = ["", title, "",
             f"The first {n} PandaLM pairs of the seed-34 order (the prompt ensemble's), judged by the default judge "
             f"and by `calibrate --confidence {name}` (x{res['size']}; {res['calls_per_verdict']} model calls per "
             f"verdict, against 2)" + ("; the pairs shown to the annotators as examples left out" if name ==
                                         "annotators" else ": cot at temperature 0.7") + ". Split-fit selection at "
             f"delta 0.1 over {res['splits']} random halves; AUROC on the test halves, its standard error by Hanley-"
             "McNeil at all the pairs (a rough width).", "",
             "| confidence | likelihood accuracy | AUROC vs agreement (se) | coverage at 0.7 (agreement, violation) | "
             "coverage at 0.8 (agreement, violation) |", "|---|---|---|---|---|"]
    for label, key in (("calibrated (default)", "default"), (name, name)):
        est = res["estimators"]["calibrated (default)" if key == "default" else name]
        agree = res["agreeing"][key]
        se = hanley_mcneil_se(est["auroc"], agree, n - agree)

        def cell(t: str, e: dict[str, Any] = est) -> str:
            a = e[f"agreement_{t}"]
            return f"{e[f'coverage_{t}']:.3f} ({'-' if a is None else f'{a:.3f}'}, {e[f'violated_{t}']:.3f})"

        lines.append(f"| {label} | {res['accuracy'][key]:.3f} | {est['auroc']:.3f} ({se:.3f}) | {cell('0.7')} | "
                     f"{cell('0.8')} |")
    lines += ["", "Resume the judging (the store answers what is done): `cd bench && TRUSTJUDGE_THREADS=2 nice -n 19 "
              f"../.venv/bin/python guarantee_panel.py --estimator {name} --commit`; rebuild this block (zero calls): "
              f"`PYTHONPATH=../src ../.venv/bin/python guarantee_panel.py --estimator {name} --study`."]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--estimator", choices=PANELS, default="annotators")
    ap.add_argument("--size", type=int, default=None)
    ap.add_argument("--judge", default=JUDGE)
    ap.add_argument("--store", type=Path, default=None)
    ap.add_argument("--export", type=Path, default=None)
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--batch", type=int, default=5)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--commit", action="store_true")
    ap.add_argument("--study", action="store_true", help="analyse what is judged (zero calls)")
    args = ap.parse_args()
    store, export = _paths(args.estimator)
    args.store, args.export = args.store or store, args.export or export
    if not DATA.is_dir():
        sys.exit(f"no data folder {DATA}")
    study(args) if args.study else judge_panel(args)


if __name__ == "__main__":
    main()
