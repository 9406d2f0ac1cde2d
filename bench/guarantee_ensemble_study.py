"""The prompt-ensemble study's analysis (issue 34), zero model calls: the pairs bench/guarantee_ensemble.py has
judged under the explicit-steps and rubric templates, against the committed default-template judgments of the
same pairs.

Imports the compressed exports (bench/results/guarantee_judgments.jsonl.gz and each template's
guarantee_ensemble_*_judgments.jsonl.gz of ``--dataset``) into a scratch store, judges the seeded order's pairs
through a judge that refuses every model call, and keeps the pairs every template present scored and a human
labelled. Reports each template's likelihood accuracy, the ensembles' (the records of the library's
``--confidence ensemble`` combination: mean log-probability over the templates) of the default template with
the steps one, with the rubric one, and with both, and, through guarantee_estimators.estimator_study (the same
random halves, split-fit selection), AUROC of each confidence against agreement and coverage at 0.7/0.8. Writes
results/guarantee_ensemble.json (PandaLM; other sets guarantee_ensemble_DATASET.json) and its block of
results/guarantee.md.

    cd bench && PYTHONPATH=../src ../.venv/bin/python guarantee_ensemble_study.py [--dataset llmbar]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from scipy.stats import binomtest

from _common import RESULTS, replace_section
from guarantee import StoreOnly, _label_from_ratings
from guarantee_ensemble import DATASETS, NAMES, paths, study_pairs
from guarantee_estimators import estimator_study
from guarantee_judge import DATA, EXPORT, JUDGE
from trustjudge import Judge
from trustjudge._ensemble import sibling
from trustjudge.audit._ensemble import PAIR, combine
from trustjudge.backends import get_backend
from trustjudge.engine._store import Store
from trustjudge.engine._store_io import import_file

SIGNIFICANT = 0.05
"""Another template replaces the default only if it is more accurate by an exact McNemar test at this level."""
TITLES = {"pandalm": "PandaLM", "llmbar": "LLMBar Natural", "topical": "Topical-Chat"}


def result_path(dataset: str) -> Path:
    return RESULTS / ("guarantee_ensemble.json" if dataset == "pandalm" else f"guarantee_ensemble_{dataset}.json")


def _accuracy(recs: list[dict[str, Any]]) -> float:
    return sum(r["verdicts"]["likelihood"] == r["human"] for r in recs) / len(recs)


def versus_default(default: list[dict[str, Any]], other: list[dict[str, Any]]) -> dict[str, Any]:
    """The exact McNemar test of two templates' verdicts on the same pairs: the pairs only ``other`` gets right
    (``better``), only the default gets right (``worse``), and the two-sided binomial p-value of that split."""
    right = [(a["verdicts"]["likelihood"] == a["human"], b["verdicts"]["likelihood"] == b["human"])
             for a, b in zip(default, other, strict=True)]
    better, worse = sum(b and not a for a, b in right), sum(a and not b for a, b in right)
    p = binomtest(better, better + worse).pvalue if better + worse else 1.0
    return {"better": better, "worse": worse, "p": float(p)}


def study(dataset: str, seed: int, splits: int, store_path: Path) -> dict[str, Any]:
    """The study of ``dataset``'s pairs (zero calls; a pair some template has not judged is left out)."""
    store_path.parent.mkdir(parents=True, exist_ok=True)
    store = Store(store_path)
    exports = {t: paths(t, dataset)[1] for t in NAMES}
    present = [t for t, p in exports.items() if p.exists()]
    for export in (EXPORT, *(exports[t] for t in present)):
        import_file(export, store)  # idempotent
    backend = StoreOnly(get_backend(JUDGE))
    judge = Judge(backend, store=store)
    pairs = study_pairs(DATA, seed, dataset)
    runs = {"default": [r.to_dict() for r in judge.compare(pairs)]}
    runs |= {t: [r.to_dict() for r in sibling(judge, f"pairwise_{t}").compare(pairs)] for t in present}
    if dataset == "topical":  # its pairs' human side is the higher mean rating, as in guarantee.py
        for recs in runs.values():
            _label_from_ratings(recs, pairs)
    judged = {t: sum(1 for r in runs[t] if r.get("probabilities")) for t in present}
    keep = [i for i in range(len(runs["default"]))
            if all(recs[i].get("probabilities") for recs in runs.values()) and runs["default"][i].get("human") in PAIR]
    kept = {t: [recs[i] for i in keep] for t, recs in runs.items()}
    recs: dict[str, list[dict[str, Any]]] = dict(kept)
    for combo in [[t] for t in present] + ([present] if len(present) > 1 else []):
        recs["ensemble (default + " + " + ".join(combo) + ")"] = combine(
            kept["default"], [kept[t] for t in combo], [f"pairwise_{t}" for t in combo])
    label = {"default": "calibrated (default template)", **{t: f"calibrated ({t} template)" for t in present}}
    return {"judge": JUDGE, "dataset": dataset, "seed": seed, "pairs_in_order": len(runs["default"]),
            "judged": judged, "pairs": len(keep), "refused_calls": backend.refused, "splits": splits,
            "accuracy": {t: _accuracy(r) for t, r in recs.items()},
            "versus_default": {t: versus_default(kept["default"], kept[t]) for t in present},
            "estimators": {label.get(t, t): estimator_study("compare", r, splits, 0)["estimators"]["calibrated"]
                           for t, r in recs.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="pandalm", choices=list(DATASETS))
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--seed", type=int, default=34, help="the order of pairs (guarantee_ensemble.py's --seed)")
    ap.add_argument("--store", type=Path, default=None)
    args = ap.parse_args()
    store = args.store or RESULTS / "work" / f"guarantee_ensemble_study_{args.dataset}.sqlite"
    result = study(args.dataset, args.seed, args.splits, store)
    result_path(args.dataset).write_text(json.dumps(result, indent=1) + "\n")
    md = RESULTS / "guarantee.md"
    if md.exists():
        md.write_text(replace_section(md.read_text(), heading(args.dataset), section(result)))
    print("\n".join(section(result)))


HEADING = "## Prompt ensemble"
"""The PandaLM block's heading starts so (then: partial, or every pair of the study); other sets add their name."""


def heading(dataset: str) -> str:
    return HEADING if dataset == "pandalm" else f"{HEADING} on {TITLES[dataset]}"


def section(res: dict[str, Any]) -> list[str]:
    """The block of results/guarantee.md (guarantee_page's render adds it too, from the study's json)."""
    dataset = res.get("dataset", "pandalm")
    whole = res.get("refused_calls") == 0  # the store held every template's judgment of every pair of the order
    title = heading(dataset) + (" (every pair of the study)" if whole else " (PARTIAL: a prefix of the study's pairs)")
    again = "" if dataset == "pandalm" else f" --dataset {dataset}"
    return ["", title, "", *render(res).splitlines(), "",
            "The ensembles are the records of `calibrate --confidence ensemble`'s combination: the default template "
            "with src/trustjudge/templates/pairwise_steps.txt (G-Eval-style explicit evaluation steps) and/or "
            "pairwise_rubric.txt (a rubric in order of importance), by mean log-probability. Coverage and "
            "violation: split-fit selection at delta 0.1 over "
            f"{res.get('splits', 200)} random halves of these pairs (a violation: realised agreement on the kept "
            "test verdicts below the target). Resume the judging (it continues the same seeded order; the store "
            "answers what is done): `cd bench && TRUSTJUDGE_THREADS=2 nice -n 19 ../.venv/bin/python "
            f"guarantee_ensemble.py --template steps|rubric{again} --commit > results/work/guarantee_ensemble.log "
            f"2>&1 &`; then `PYTHONPATH=../src ../.venv/bin/python guarantee_ensemble_study.py{again}` rebuilds "
            "this block (zero calls)."]


def _f(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}"


def render(res: dict[str, Any]) -> str:
    name = TITLES[res.get("dataset", "pandalm")]
    done = ", ".join(f"{t} {n}" for t, n in res["judged"].items())
    lines = [f"{res['pairs']} labelled {name} pairs scored under every template (judged of the seed-{res['seed']} "
             f"order of {res['pairs_in_order']}: {done}), {res['judge']}, zero calls.", "",
             "| template | likelihood accuracy |", "|---|---|"]
    lines += [f"| {k} | {v:.3f} |" for k, v in res["accuracy"].items()]
    lines += ["", "| confidence | AUROC vs agreement | coverage at 0.7 (agreement, violation) | coverage at 0.8 "
              "(agreement, violation) |", "|---|---|---|---|"]
    for label, e in res["estimators"].items():
        cells = [f"{_f(e[f'coverage_{t}'])} ({_f(e[f'agreement_{t}'])}, {_f(e[f'violated_{t}'])})" for t in (0.7, 0.8)]
        lines.append(f"| {label} | {_f(e['auroc'])} | {' | '.join(cells)} |")
    acc = res["accuracy"]
    singles = [t for t in acc if t != "default" and not t.startswith("ensemble")]
    best = max(singles, key=acc.__getitem__) if singles else None
    if best is not None:
        vs = res["versus_default"][best]
        if vs["p"] >= SIGNIFICANT:
            said = "not a significant difference at 0.05, so the default template stays."
        elif acc[best] > acc["default"]:
            said = "significantly more accurate at 0.05: the default template should change."
        else:
            said = "significantly less accurate at 0.05: the default template stays."
        lines += ["", f"The best other template ({best}, {acc[best]:.3f} against the default template's "
                  f"{acc['default']:.3f}) is right on {vs['better']} pairs the default template gets wrong and wrong "
                  f"on {vs['worse']} it gets right (exact McNemar test, two-sided p = {vs['p']:.2g}): {said}"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
