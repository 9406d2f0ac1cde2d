"""Is the issue's coverage target reachable by the default judge on PandaLM? (issue 34; zero model calls)

The target: coverage >= 0.35 at target agreement 0.8, delta 0.1, split-fit selection. The guarantee's
threshold is an exact one-sided binomial test on part B, so what coverage it can reach depends on two things
only: how often the judge agrees with the humans at all (its calibrated-verdict accuracy p) and how well the
confidence ranks agreement (AUROC). This script holds the judge's own verdicts and their agreement fixed (the
committed default-template judgments, bench/results/guarantee_judgments.jsonl.gz: the PandaLM pairs of
bench/guarantee_ensemble.py's order) and replaces only the ranking, over ``--splits`` random halves (map fitted
on part A, threshold chosen on part B at delta 0.1, coverage = kept / part B):

- ``observed``: the calibrated top probability (the default estimator);
- ``binormal AUROC a``: confidence = d * agree + N(0, 1) with d = sqrt(2) * Phi^-1(a) (a ranking of AUROC a);
- ``oracle``: every agreeing verdict ranked above every disagreeing one (AUROC 1).

Writes results/guarantee_reach.json and its block in results/guarantee.md.

    cd bench && PYTHONPATH=../src ../.venv/bin/python guarantee_reach.py
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import numpy as np
from scipy.stats import norm  # type: ignore[import-untyped]

from _common import RESULTS, replace_section
from guarantee import StoreOnly
from guarantee_ensemble import study_pairs
from guarantee_estimators import _calibration, auroc, unit_arrays
from guarantee_judge import DATA, EXPORT, JUDGE
from trustjudge import Judge
from trustjudge.audit import _calibration as C
from trustjudge.backends import get_backend
from trustjudge.engine._store import Store
from trustjudge.engine._store_io import import_file

TARGETS = (0.7, 0.8)
AUROCS = (0.75, 0.80, 0.85, 0.90, 0.95)
HEADING = "## Is PandaLM coverage 0.35 at 0.8 reachable by this judge?"


def records() -> list[dict[str, Any]]:
    store = Store(RESULTS / "work" / "guarantee_reach.sqlite")
    import_file(EXPORT, store)
    judge = Judge(StoreOnly(get_backend(JUDGE)), store=store)
    try:
        return [r.to_dict() for r in judge.compare(study_pairs(DATA, 34))]
    finally:
        judge.close()


def coverage(conf: np.ndarray, agree: np.ndarray, target: float, delta: float) -> float:
    sel = C.choose_threshold(conf, agree, alpha=1 - target, delta=delta, strict=False)
    return sel.kept / max(sel.n, 1)


def study(recs: list[dict[str, Any]], splits: int, delta: float, seed: int = 0) -> dict[str, Any]:
    a = unit_arrays("compare", recs)
    n = a["human"].size
    rng = np.random.default_rng(seed)
    names = ["observed", *(f"binormal AUROC {x:.2f}" for x in AUROCS), "oracle"]
    cov: dict[str, dict[float, list[float]]] = {k: {t: [] for t in TARGETS} for k in names}
    areas, accs = [], []
    for _ in range(splits):
        perm = rng.permutation(n)
        part_a, part_b = perm[: (n + 1) // 2], perm[(n + 1) // 2:]
        cal = _calibration("compare", a, part_a, "calibrated")
        cmap = cal.fit_map(a["probs"][part_a], a["human"][part_a])
        verdict, conf = cal.verdicts(cmap.apply(a["probs"][part_b]))
        agree = cal.agrees(verdict, a["human"][part_b])
        areas.append(auroc(conf, agree))
        accs.append(float(agree.mean()))
        rankings = {"observed": conf, "oracle": agree + rng.uniform(0, 1e-6, agree.size)}
        for x in AUROCS:
            rankings[f"binormal AUROC {x:.2f}"] = math.sqrt(2) * norm.ppf(x) * agree + rng.normal(size=agree.size)
        for name, c in rankings.items():
            for t in TARGETS:
                cov[name][t].append(coverage(np.asarray(c, dtype=np.float64), agree, t, delta))
    return {"judge": JUDGE, "units": int(n), "splits": splits, "delta": delta,
            "accuracy": float(np.mean(accs)), "observed_auroc": float(np.mean(areas)),
            "coverage": {k: {str(t): float(np.mean(v)) for t, v in d.items()} for k, d in cov.items()}}


def section(res: dict[str, Any]) -> list[str]:
    rows = ["", HEADING, "",
            f"{res['units']} labelled PandaLM pairs, {res['judge']}, its calibrated verdicts agree with the humans "
            f"{res['accuracy']:.3f} of the time (part B, mean over {res['splits']} random halves); the calibrated "
            f"top probability ranks agreement with AUROC {res['observed_auroc']:.3f}. Coverage at delta "
            f"{res['delta']} of the same verdicts under other rankings (split-fit, exact binomial bound):", "",
            "| ranking of the same verdicts | coverage at 0.7 | coverage at 0.8 |", "|---|---|---|"]
    for name, c in res["coverage"].items():
        rows.append(f"| {name} | {c['0.7']:.3f} | {c['0.8']:.3f} |")
    need = next((x for x in AUROCS if res["coverage"][f"binormal AUROC {x:.2f}"]["0.8"] >= 0.35), None)
    rows += ["", "Coverage 0.35 at 0.8 needs a ranking of AUROC about "
             + (f"{need:.2f}" if need is not None else f"above {AUROCS[-1]:.2f}")
             + f" over this judge's verdicts (today {res['observed_auroc']:.2f}); even a perfect ranking keeps at "
             f"most {res['coverage']['oracle']['0.8']:.2f}, because only {res['accuracy']:.0%} of the verdicts agree "
             "at all. Coverage here is the kept share of part B, where the threshold is chosen (what `calibrate` "
             "reports for a target). "
             "An estimator that only re-ranks the judge's verdicts (features, ensembles, panels: unless they also "
             "change the verdicts) must reach that AUROC to meet the target. Rebuild (zero calls): "
             "`cd bench && PYTHONPATH=../src ../.venv/bin/python guarantee_reach.py`."]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--delta", type=float, default=0.1)
    args = ap.parse_args()
    res = study(records(), args.splits, args.delta)
    (RESULTS / "guarantee_reach.json").write_text(json.dumps(res, indent=1) + "\n")
    md = RESULTS / "guarantee.md"
    md.write_text(replace_section(md.read_text(), HEADING, section(res)))
    print("\n".join(section(res)))


if __name__ == "__main__":
    main()
