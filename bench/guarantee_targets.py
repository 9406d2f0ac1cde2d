"""Are issue 34's other two targets reachable by this judge? Topical-Chat coverage and the PandaLM cascade (zero calls)

bench/guarantee_reach.py answers it for PandaLM coverage at 0.8. This script does the same for:

- **Topical-Chat: coverage >= 0.30 at target 0.7** (delta 0.1, split-fit selection). The 150 labelled pairs of
  the study (the human side from the ``overall`` ratings, as bench/guarantee.py reads them), over ``--splits``
  random halves into part A (the map) and part B (the threshold), exactly as guarantee_reach.py does PandaLM:
  the judge's calibrated verdicts and their agreement held fixed, only the ranking replaced (observed; binormal
  AUROC a: ``d * agree + N(0, 1)``, ``d = sqrt(2) Phi^-1(a)``; oracle: every agreeing verdict first).
- **The PandaLM cascade: at target 0.8, gpt-3.5 asked about <= 60% of the pairs** (default judge -> recorded
  gpt-3.5-turbo -> human). The same splits and rule as the cascade block of bench/guarantee.py (both tiers
  calibrated on one half, thresholds by ``choose_cascade`` on it, routed on the other half; the recorded
  gpt-3.5-turbo verdicts that block reads), with the ranking of one tier replaced at a time, and of both (oracle).
  ``choose_cascade`` chooses tier 1's threshold on all calibration pairs before it looks at tier 2, so the share
  sent to gpt-3.5 (1 - tier 1's coverage) cannot depend on how well tier 2 ranks: the tier-2 rows show it.

Writes results/guarantee_targets.json and its block in results/guarantee.md.

    cd bench && PYTHONPATH=../src ../.venv/bin/python guarantee_targets.py
"""

from __future__ import annotations

import argparse
import json
import math
import os
from typing import Any

import numpy as np
from scipy.stats import norm  # type: ignore[import-untyped]

from _common import RESULTS, replace_section
from guarantee import (
    PUBLISHED,
    StoreOnly,
    _calibrated_tier,
    _first_time,
    _fit,
    _key,
    _label_from_ratings,
    _tier_probs,
    pair_units,
    recorded_records,
    write_recorded,
)
from guarantee_judge import CHUNKS, DATA, EXPORT, JUDGE, STORE, records
from guarantee_reach import AUROCS
from guarantee_reach import study as reach_study
from trustjudge import Judge
from trustjudge.audit import _calibration as C
from trustjudge.backends import get_backend
from trustjudge.engine._store import Store
from trustjudge.engine._store_io import import_file

HEADING = "## Are the Topical-Chat and cascade targets reachable by this judge?"
DELTA = 0.1
TOPICAL_GOAL, CASCADE_GOAL = 0.30, 0.60
CASCADE_TARGETS = (0.8, 0.7)


def _judge() -> Judge:
    STORE.parent.mkdir(parents=True, exist_ok=True)
    store = Store(STORE)
    import_file(EXPORT, store)  # idempotent
    return Judge(StoreOnly(get_backend(JUDGE)), store=store)


def study_records(judge: Judge, prefix: str) -> list[dict[str, Any]]:
    """The study's records of one dataset (its chunks), from the store; Topical-Chat labelled by its ratings."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()
    for chunk in CHUNKS:
        if chunk.name.split("-")[0] == prefix:
            items = chunk.items(DATA)
            recs = [r.to_dict() for r in records(judge, chunk.mode, items, lambda n: None)]
            recs = [r for r in recs if _first_time(r, seen)]  # a pair two chunks share: once
            if prefix == "topical":
                _label_from_ratings(recs, items)
            out.extend(recs)
    return out


def _rankings(agree: np.ndarray, observed: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The observed confidence, binormal re-rankings of ``agree`` and the oracle (NaN kept where observed is)."""
    has = np.isfinite(observed)
    out = {"observed": observed}
    for a in AUROCS:
        c = math.sqrt(2) * norm.ppf(a) * agree + rng.normal(size=agree.size)
        out[f"binormal AUROC {a:.2f}"] = np.where(has, c, np.nan)
    out["oracle"] = np.where(has, agree + rng.uniform(0, 1e-6, agree.size), np.nan)
    return out


def cascade_reach(probs: np.ndarray, y: np.ndarray, gpt: np.ndarray, splits: int, seed: int) -> dict[str, Any]:
    """The cascade of bench/guarantee.py's block under replaced rankings of tier 1, of tier 2, and of both."""
    names = ["observed", *(f"binormal AUROC {a:.2f}" for a in AUROCS), "oracle"]
    combos = [("observed", "observed"), *((n, "observed") for n in names[1:]), *(("observed", n) for n in names[1:]),
              ("oracle", "oracle")]
    out: dict[str, Any] = {}
    for target in CASCADE_TARGETS:
        split_rng = np.random.default_rng(seed)  # the cascade block's splits (its first target's)
        noise = np.random.default_rng(seed + 1)
        acc: dict[str, dict[str, list[float]]] = {f"{a}|{b}": {k: [] for k in (
            "gpt_calls_share", "human_share", "agreement_machine", "auroc1", "auroc2")} for a, b in combos}
        for _ in range(splits):
            perm = split_rng.permutation(len(y))
            cal, test = perm[: len(y) // 2], perm[len(y) // 2:]
            q = _fit(probs[cal], y[cal]).apply(probs)
            agree1 = q.argmax(axis=1) == y
            conf2, agree2 = _calibrated_tier(gpt, y, cal)
            r1, r2 = _rankings(agree1, q.max(axis=1), noise), _rankings(agree2, conf2, noise)
            for a, b in combos:
                c1, c2 = r1[a], r2[b]
                sels = C.choose_cascade([c1[cal], c2[cal]], [agree1[cal], agree2[cal]], alpha=1 - target,
                                        delta=DELTA)
                routed = C.run_cascade([c1[test], c2[test]], sels).tier
                agree = np.where(routed == 0, agree1[test], np.where(routed == 1, agree2[test], True))
                d = acc[f"{a}|{b}"]
                d["gpt_calls_share"].append(float(np.mean(routed != 0)))
                d["human_share"].append(float(np.mean(routed == -1)))
                d["agreement_machine"].append(float(np.mean(agree[routed >= 0])) if (routed >= 0).any() else math.nan)
                has2 = np.isfinite(c2[test])
                d["auroc1"].append(_auroc(c1[test], agree1[test]))
                d["auroc2"].append(_auroc(c2[test][has2], agree2[test][has2]))
        out[str(target)] = {k: {m: _mean(v) for m, v in d.items()} for k, d in acc.items()}
    return out


def _auroc(score: np.ndarray, positive: np.ndarray) -> float:
    from guarantee_estimators import auroc

    return auroc(score, positive)


def _mean(v: list[float]) -> float | None:
    vals = [x for x in v if not math.isnan(x)]
    return float(np.mean(vals)) if vals else None


def _f(v: Any, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def _needed(cov: dict[str, dict[str, float]], target: str, goal: float, at_least: bool = True) -> float | None:
    for a in AUROCS:
        v = cov[f"binormal AUROC {a:.2f}"][target]
        if (v >= goal) if at_least else (v <= goal):
            return a
    return None


def topical_lines(t: dict[str, Any]) -> list[str]:
    cov = t["coverage"]
    rows = ["", f"**Topical-Chat: coverage >= {TOPICAL_GOAL:.2f} at target 0.7.** {t['units']} labelled pairs; the "
                f"calibrated verdicts agree with the humans {t['accuracy']:.3f} of the time (part B, mean over "
                f"{t['splits']} random halves into part A, the map, and part B, the threshold); the calibrated top "
                f"probability ranks agreement with AUROC {t['observed_auroc']:.3f}.", "",
            "| ranking of the same verdicts | coverage at 0.7 | coverage at 0.8 |", "|---|---|---|"]
    rows += [f"| {name} | {c['0.7']:.3f} | {c['0.8']:.3f} |" for name, c in cov.items()]
    need = _needed(cov, "0.7", TOPICAL_GOAL)
    met = cov["observed"]["0.7"] >= TOPICAL_GOAL
    rows += ["", f"Topical-Chat target: **{'met' if met else 'missed'}** (observed {cov['observed']['0.7']:.2f}). "
             + (f"A ranking of AUROC about {need:.2f} would meet it (today {t['observed_auroc']:.2f}); "
                if need is not None else f"No binormal ranking up to AUROC {AUROCS[-1]:.2f} meets it; ")
             + f"the oracle keeps {cov['oracle']['0.7']:.2f}, so the target is "
             + ("within this judge's verdicts: the ranking is what misses it." if cov["oracle"]["0.7"] >= TOPICAL_GOAL
                else "beyond even a perfect ranking of this judge's verdicts.")]
    return rows


def cascade_lines(c: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    rows = ["", f"**PandaLM cascade: gpt-3.5 asked about <= {CASCADE_GOAL:.0%} of the pairs at target 0.8.** "
                f"{meta['pairs']} pairs ({meta['with_gpt_verdict']} with a recorded gpt-3.5-turbo verdict), the "
                f"cascade block's {meta['splits']} halves and rule (both tiers calibrated on one half, thresholds by "
                "`choose_cascade` on it at delta 0.1 (delta/2 per tier), routed on the other); one tier's ranking "
                "replaced at a time. AUROC: of each tier's confidence against its own agreement on the routed half.",
            "",
            "| target | tier 1 ranking (default judge) | tier 2 ranking (gpt-3.5) | AUROC tier 1 | AUROC tier 2 | "
            "gpt-3.5 calls (share of pairs) | left to humans | agreement of machine verdicts |",
            "|---|---|---|---|---|---|---|---|"]
    for target, runs in c.items():
        for k, d in runs.items():
            a, b = k.split("|")
            rows.append(f"| {target} | {a} | {b} | {_f(d['auroc1'])} | {_f(d['auroc2'])} | "
                        f"{_f(d['gpt_calls_share'], '.2f')} | {_f(d['human_share'], '.2f')} | "
                        f"{_f(d['agreement_machine'])} |")
    r = c["0.8"]
    obs = r["observed|observed"]["gpt_calls_share"]
    need = next((x for x in AUROCS if r[f"binormal AUROC {x:.2f}|observed"]["gpt_calls_share"] <= CASCADE_GOAL), None)
    t2 = [r[f"observed|{n}"]["gpt_calls_share"] for n in (*(f"binormal AUROC {x:.2f}" for x in AUROCS), "oracle")]
    oracle = r["oracle|observed"]["gpt_calls_share"]
    rows += ["", f"Cascade target: **{'met' if obs <= CASCADE_GOAL else 'missed'}** (gpt-3.5 asked about {obs:.2f} "
                 "of the pairs). "
             + (f"A tier-1 ranking of AUROC about {need:.2f} would meet it "
                f"(today {r['observed|observed']['auroc1']:.2f}); " if need is not None
                else f"No tier-1 ranking up to AUROC {AUROCS[-1]:.2f} meets it; ")
             + f"a perfect tier-1 ranking sends {oracle:.2f}. The second tier's ranking does not move the share at "
               f"all (gpt-3.5 calls {min(t2):.2f}..{max(t2):.2f} over tier-2 rankings from binormal "
               f"{AUROCS[0]:.2f} to the oracle): gpt-3.5 is asked whatever tier 1 passes on, and `choose_cascade` "
               "fixes tier 1's threshold before it looks at tier 2, so a better gpt-3.5 confidence only moves pairs "
               "from the humans to gpt-3.5. The cascade target is tier 1's coverage at 0.8 (at delta/2) >= "
               f"{1 - CASCADE_GOAL:.2f}: the same bottleneck as PandaLM coverage above. (Behind both oracles, tier 2 "
               "keeps nothing: the library's threshold grid first tests 3 x min_kept verdicts, more than the pairs "
               "tier 1 leaves that gpt-3.5 gets right.)"]
    return rows


def section(res: dict[str, Any]) -> list[str]:
    return ["", HEADING, "",
            f"{res['judge']}, zero model calls (the committed judgments and the recorded gpt-3.5-turbo verdicts). "
            "As for PandaLM coverage above: the judge's verdicts and their agreement with the humans held fixed, "
            "the ranking of them replaced (binormal AUROC a: confidence = d * agree + N(0, 1), d = sqrt(2) "
            "Phi^-1(a); oracle: every agreeing verdict ranked first).",
            *topical_lines(res["topical"]), *cascade_lines(res["cascade"], res["cascade_meta"]), "",
            "Rebuild (zero calls): `cd bench && PYTHONPATH=../src ../.venv/bin/python guarantee_targets.py`."]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    judge = _judge()
    try:
        topical = study_records(judge, "topical")
        probs, y, kept = pair_units(study_records(judge, "pandalm"))
        recorded = {}
        for who in PUBLISHED:
            path = write_recorded(DATA, who, STORE.parent / f"recorded-{who}.jsonl")
            recorded[who], _ = recorded_records(judge, f"recorded/{os.path.relpath(path)}", DATA)
        refused = judge.backend.refused  # type: ignore[attr-defined]
    finally:
        judge.close()
    gpt = _tier_probs(recorded["gpt-3.5-turbo"], [_key(r) for r in kept])
    res = {"judge": JUDGE, "delta": DELTA, "refused_not_in_store": refused,
           "topical": reach_study(topical, args.splits, DELTA, args.seed),
           "cascade_meta": {"pairs": len(y), "with_gpt_verdict": int(np.isfinite(gpt[:, 0]).sum()),
                            "splits": args.splits},
           "cascade": cascade_reach(probs, y, gpt, args.splits, args.seed)}
    (RESULTS / "guarantee_targets.json").write_text(json.dumps(res, indent=1) + "\n")
    md = RESULTS / "guarantee.md"
    md.write_text(replace_section(md.read_text(), HEADING, section(res)))
    print("\n".join(section(res)))
    print(f"model calls 0; judgments not in the store (left out): {refused}")


if __name__ == "__main__":
    main()
