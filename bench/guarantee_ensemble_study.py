"""The prompt-ensemble study's analysis (issue 34), zero model calls: the pairs bench/guarantee_ensemble.py has
judged under the explicit-steps template, against the committed default-template judgments of the same pairs.

Imports both compressed exports (bench/results/guarantee_judgments.jsonl.gz and
guarantee_ensemble_judgments.jsonl.gz) into a scratch store, judges the seeded order's pairs through a judge that
refuses every model call, and keeps the pairs both templates scored and a human labelled. Reports each template's
likelihood accuracy, the ensemble's (the library's ``--confidence ensemble`` records: mean log-probability of
the two templates), and, through guarantee_estimators.estimator_study (the same random halves, split-fit
selection), AUROC of the confidence against agreement and coverage at 0.7/0.8 for the default template's
calibrated top probability, the steps template's alone, and the ensemble. Writes
results/guarantee_ensemble.json and prints the markdown block of results/guarantee.md.

    cd bench && PYTHONPATH=../src ../.venv/bin/python guarantee_ensemble_study.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from _common import RESULTS, replace_section
from guarantee import StoreOnly
from guarantee_ensemble import EXPORT as STEPS_EXPORT
from guarantee_ensemble import study_pairs
from guarantee_estimators import estimator_study
from guarantee_judge import DATA, EXPORT, JUDGE
from trustjudge import Judge
from trustjudge._ensemble import sibling
from trustjudge.audit._ensemble import PAIR, combine
from trustjudge.backends import get_backend
from trustjudge.engine._store import Store
from trustjudge.engine._store_io import import_file

STORE = RESULTS / "work" / "guarantee_ensemble_study.sqlite"


def _accuracy(recs: list[dict[str, Any]]) -> float:
    return sum(r["verdicts"]["likelihood"] == r["human"] for r in recs) / len(recs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--seed", type=int, default=34, help="the order of pairs (guarantee_ensemble.py's --seed)")
    ap.add_argument("--store", type=Path, default=STORE)
    args = ap.parse_args()
    args.store.parent.mkdir(parents=True, exist_ok=True)
    store = Store(args.store)
    for export in (EXPORT, STEPS_EXPORT):
        import_file(export, store)  # idempotent
    backend = StoreOnly(get_backend(JUDGE))
    judge = Judge(backend, store=store)
    pairs = study_pairs(DATA, args.seed)
    own = [r.to_dict() for r in judge.compare(pairs)]
    steps = [r.to_dict() for r in sibling(judge, "pairwise_steps").compare(pairs)]
    done = sum(1 for r in steps if r.get("probabilities"))
    both = [i for i, (a, b) in enumerate(zip(own, steps, strict=True))
            if a.get("probabilities") and b.get("probabilities") and a.get("human") in PAIR]
    own_k, steps_k = [own[i] for i in both], [steps[i] for i in both]
    ens = combine(own_k, [steps_k])
    result: dict[str, Any] = {
        "judge": JUDGE, "seed": args.seed, "pairs_in_order": len(pairs), "steps_judged": done,
        "pairs": len(both), "refused_calls": backend.refused, "splits": args.splits,
        "accuracy": {"default": _accuracy(own_k), "steps": _accuracy(steps_k), "ensemble": _accuracy(ens)},
        "estimators": {name: estimator_study("compare", recs, args.splits, 0)["estimators"]["calibrated"]
                       for name, recs in (("calibrated (default template)", own_k),
                                          ("calibrated (steps template)", steps_k), ("ensemble", ens))}}
    (RESULTS / "guarantee_ensemble.json").write_text(json.dumps(result, indent=1) + "\n")
    md = RESULTS / "guarantee.md"
    if md.exists():
        md.write_text(replace_section(md.read_text(), HEADING, section(result)))
    print("\n".join(section(result)))


HEADING = "## Prompt ensemble"
"""The block's heading starts so (then: partial, or every pair of the study)."""


def section(res: dict[str, Any]) -> list[str]:
    """The block of results/guarantee.md (guarantee.py's render adds it too, from results/guarantee_ensemble.json)."""
    done = res.get("refused_calls") == 0  # the store held every judgment of the order
    title = f"{HEADING} (every pair of the study)" if done else f"{HEADING} (PARTIAL: a prefix of the study's pairs)"
    return ["", title, "", *render(res).splitlines(), "",
            "The ensemble is `calibrate --confidence ensemble`: the default template and "
            "src/trustjudge/templates/pairwise_steps.txt (G-Eval-style explicit evaluation steps), combined by mean "
            "log-probability. Coverage and violation: split-fit selection at delta 0.1 over "
            f"{res.get('splits', 200)} random halves of these pairs (a violation: realised agreement on the kept "
            "test verdicts below the target). Resume the judging (it continues the same seeded order; the store "
            "answers what is done): `cd bench && TRUSTJUDGE_THREADS=2 nice -n 19 ../.venv/bin/python "
            "guarantee_ensemble.py --commit > results/work/guarantee_ensemble.log 2>&1 &`; then "
            "`PYTHONPATH=../src ../.venv/bin/python guarantee_ensemble_study.py` rebuilds this block (zero calls)."]


def _f(v: Any) -> str:
    return "" if v is None else f"{v:.3f}"


def render(res: dict[str, Any]) -> str:
    lines = [f"{res['pairs']} labelled PandaLM pairs scored under both templates (the first {res['steps_judged']} "
             f"of the seed-{res['seed']} order of {res['pairs_in_order']}), {res['judge']}, zero calls.", "",
             "| template | likelihood accuracy |", "|---|---|"]
    lines += [f"| {k} | {v:.3f} |" for k, v in res["accuracy"].items()]
    lines += ["", "| confidence | AUROC vs agreement | coverage at 0.7 (agreement, violation) | coverage at 0.8 "
              "(agreement, violation) |", "|---|---|---|---|"]
    for name, e in res["estimators"].items():
        cells = [f"{_f(e[f'coverage_{t}'])} ({_f(e[f'agreement_{t}'])}, {_f(e[f'violated_{t}'])})" for t in (0.7, 0.8)]
        lines.append(f"| {name} | {_f(e['auroc'])} | {' | '.join(cells)} |")
    acc = res["accuracy"]
    wins = acc["steps"] > acc["default"]
    lines += ["", f"The steps template {'wins' if wins else 'does not win'} on accuracy ({acc['steps']:.3f} vs "
              f"the default's {acc['default']:.3f} on the same pairs)" + (
                  "; the default template is not changed on a partial subset." if wins else
                  ": the default template stays.")]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
