"""How often the printed guarantee is false given that it was printed (issue 38, H5), with the current code.

A biased 3-class judge (it over-says the first classes; the human's class gets a noisy boost), calibration sets
of ``--n`` labelled units, the library's own ``Calibration.selection`` (map fitted on part A, thresholds tested
on part B), each selection applied to ``--fresh`` fresh units from the same judge. For each target it reports:

- ``printed``: the share of calibration sets whose target is supported (a guarantee line is printed);
- ``violated (all sets)``: the share of all sets whose kept fresh verdicts agree below the target (the marginal
  rate the guarantee bounds by delta; an unsupported set keeps nothing and violates nothing);
- ``violated | printed``: the same among the sets that printed a guarantee;
- ``bound above truth | printed``: how often the in-sample Clopper-Pearson bound of the selected set
  (``agreement_lower_bound``, no longer printed) was above the fresh agreement;
- ``marginal | printed`` and the violation rate among marginal and among other printed sets.

Run (zero model calls, about a minute per 1,000 sets on one core)::

    cd bench && PYTHONPATH=../src OPENBLAS_NUM_THREADS=1 python guarantee_borderline.py --sets 1000
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # for tests._simulated

from tests._simulated import biased_judge  # noqa: E402 (after the sys.path set-up)

from trustjudge.audit._calibration import fit_vector  # noqa: E402
from trustjudge.audit._trust import Calibration  # noqa: E402
from trustjudge.errors import ConfigError  # noqa: E402

CLASSES = ("c0", "c1", "c2")


def run(targets: list[float], sets: int, n: int, fresh: int, delta: float, seed: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    fresh_p, fresh_y = biased_judge(rng, fresh)
    keys: list[list[str | int]] = [[f"u{i}"] for i in range(n)]
    counts = {t: {"printed": 0, "violated": 0, "bound_above": 0, "marginal": 0, "marginal_violated": 0}
              for t in targets}
    for _ in range(sets):
        p, y = biased_judge(rng, n)
        cal = Calibration("claims", "sim", "sim", "t", "direct", fit_vector(p, y, CLASSES), p.tolist(), y.tolist(),
                          keys=keys)
        for target in targets:
            try:
                sel = cal.selection(target, delta)
            except ConfigError:
                continue  # unsupported: nothing printed, nothing kept
            if not sel.supported:
                continue
            q = sel.map.apply(fresh_p)
            kept = sel.keep(q.max(axis=1))
            truth = float(np.mean(q.argmax(axis=1)[kept] == fresh_y[kept])) if kept.any() else 1.0
            c = counts[target]
            c["printed"] += 1
            bad = truth < target
            c["violated"] += bad
            c["bound_above"] += sel.lower_bound is not None and sel.lower_bound > truth
            c["marginal"] += sel.marginal
            c["marginal_violated"] += bad and sel.marginal
    out = {}
    for target, c in counts.items():
        printed, marginal = c["printed"], c["marginal"]
        out[f"{target:g}"] = {
            "printed": printed / sets, "violated_all_sets": c["violated"] / sets,
            "violated_given_printed": c["violated"] / printed if printed else float("nan"),
            "bound_above_truth_given_printed": c["bound_above"] / printed if printed else float("nan"),
            "marginal_given_printed": marginal / printed if printed else float("nan"),
            "violated_given_marginal": c["marginal_violated"] / marginal if marginal else float("nan"),
            "violated_given_not_marginal": ((c["violated"] - c["marginal_violated"]) / (printed - marginal)
                                            if printed > marginal else float("nan"))}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="0.8,0.85,0.88")
    parser.add_argument("--sets", type=int, default=1000)
    parser.add_argument("--n", type=int, default=400, help="labelled units per calibration set (split in two)")
    parser.add_argument("--fresh", type=int, default=200_000)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=38)
    args = parser.parse_args()
    result = run([float(t) for t in args.targets.split(",")], args.sets, args.n, args.fresh, args.delta, args.seed)
    print(json.dumps({"sets": args.sets, "n": args.n, "fresh": args.fresh, "delta": args.delta, "seed": args.seed,
                      "targets": result}, indent=2))


if __name__ == "__main__":
    main()
