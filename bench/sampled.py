"""How far sampled label distributions (``?labels=sampled&samples=N``) lie from exact ones, and what N buys.

A judge with no log-probabilities is judged from N answers sampled at temperature 1. On a slice of the
PandaLM human-labelled test set, the bundled SmolLM2-135M judge (llama.cpp) scores every response on 1-5 and
compares every pair in both orders, exactly and sampled at N = 5, 10, 20; this measures the distance of each
sampled score and verdict probability from the exact one, the agreement of the verdicts with the exact
verdicts and with the human labels, and the audit's conflict ratio (CR), for each N.

Sample k is stored by its index (the seed), so N = 20 holds N = 10 and 5: those are read from the store
(zero calls), and the N = 20 pass is the only sampled cost. Run with TRUSTJUDGE_THREADS=1::

    TRUSTJUDGE_THREADS=1 python bench/sampled.py [--items 30] [--data /work/shared/data]

Writes bench/results/sampled.md and sampled.json. Reads /work/shared/data (never the tests).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from trustjudge import Judge, read_items

RESULTS = Path(__file__).parent / "results"
JUDGE = "llamacpp/smollm2-135m"
SAMPLES = (20, 10, 5)  # 20 first: 10 and 5 are its first samples, read from the store


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    return statistics.fmean(xs) if xs else math.nan


def _run(judge: Judge, items: list[Any]) -> dict[str, Any]:
    began = time.perf_counter()
    run = judge.audit(items, scales=(5,), ks=(3,), bootstrap=0)
    seconds = time.perf_counter() - began
    report = run.report.to_dict()
    return {"scores": run.score_records[5], "pairs": run.compare_records, "report": report, "seconds": seconds,
            "generate_calls": judge.stats.generate_calls, "label_calls": judge.stats.label_calls}


def _key(r: dict[str, Any]) -> tuple[str, ...]:
    return (r["item_id"], r.get("response_id") or r.get("first_id", ""), r.get("second_id", ""))


def _cr(report: dict[str, Any], method: str, agg: str) -> float:
    for row in report.get("conflict", []) if isinstance(report.get("conflict"), list) else []:
        if row.get("scale") == 5 and row.get("method") == method and row.get("aggregation") == agg:
            return float(row["ratio"])
    conflict = report.get("conflict") or {}
    entry = conflict.get(f"5/{method}/{agg}") if isinstance(conflict, dict) else None
    return float(entry["ratio"]) if entry and entry.get("ratio") is not None else math.nan


def _acc(report: dict[str, Any], agg: str) -> float:
    entry = (report.get("pairwise") or {}).get(agg) or {}
    return float(entry["accuracy"]) if entry.get("accuracy") is not None else math.nan


def compare_runs(exact: dict[str, Any], sampled: dict[str, Any]) -> dict[str, Any]:
    by_key = {_key(r): r for r in exact["scores"]}
    d_expected, d_tj, se, mass_e, mass_s = [], [], [], [], []
    for r in sampled["scores"]:
        e = by_key.get(_key(r))
        if e is None or r["unscored"] or e["unscored"]:
            continue
        d_expected.append(abs(r["scores"]["expected"] - e["scores"]["expected"]))
        d_tj.append(abs(r["scores"]["trustjudge"] - e["scores"]["trustjudge"]))
        se.append(r.get("score_se") or math.nan)
        mass_e.append(e["label_mass"])
        mass_s.append(r["label_mass"])
    pairs = {_key(p): p for p in exact["pairs"]}
    d_first, same_lik, same_2p, both = [], 0, 0, 0
    for p in sampled["pairs"]:
        e = pairs.get(_key(p))
        if e is None or p["probabilities"] is None or e["probabilities"] is None:
            continue
        both += 1
        d_first.append(abs(p["probabilities"]["first"] - e["probabilities"]["first"]))
        same_lik += p["verdicts"]["likelihood"] == e["verdicts"]["likelihood"]
        same_2p += p["verdicts"]["two_pass"] == e["verdicts"]["two_pass"]
    scored = len(d_expected)
    exact_scored = sum(1 for r in exact["scores"] if not r["unscored"])
    return {"responses scored (both)": scored, "responses scored exact": exact_scored,
            "mean |d expected|": _mean(d_expected), "max |d expected|": max(d_expected, default=math.nan),
            "mean |d trustjudge|": _mean(d_tj), "mean score_se": _mean(se),
            "label mass exact / sampled": (_mean(mass_e), _mean(mass_s)),
            "pairs scored (both)": both, "mean |d P(first)|": _mean(d_first),
            "likelihood verdict = exact": same_lik / both if both else math.nan,
            "two-pass verdict = exact": same_2p / both if both else math.nan}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--store", type=Path, default=None, help="a store to reuse (default: a fresh temporary one)")
    args = parser.parse_args()
    items = read_items(args.data / "pandalm-testset" / "testset-v1.json")[: args.items]
    folder = tempfile.mkdtemp(prefix="trustjudge-sampled-")
    store = args.store or Path(folder) / "store.sqlite"
    runs: dict[str, dict[str, Any]] = {}
    with Judge(JUDGE, store=store) as judge:
        runs["exact"] = _run(judge, items)
    for n in SAMPLES:
        with Judge(f"{JUDGE}?labels=sampled&samples={n}", store=store) as judge:
            runs[f"N={n}"] = _run(judge, items)
        print(f"N={n}: {runs[f'N={n}']['seconds']:.0f} s, {runs[f'N={n}']['generate_calls']} generations",
              file=sys.stderr)
    rows = []
    for name in ("exact", *(f"N={n}" for n in sorted(SAMPLES))):
        run = runs[name]
        rep = run["report"]
        row = {"run": name, "seconds": run["seconds"], "generations": run["generate_calls"],
               "label reads": run["label_calls"],
               "human acc likelihood": _acc(rep, "likelihood"), "human acc two-pass": _acc(rep, "two_pass"),
               "CR trustjudge-5 x likelihood": _cr(rep, "trustjudge", "likelihood"),
               "CR discrete-5 x two-pass": _cr(rep, "discrete", "two_pass")}
        if name != "exact":
            row.update(compare_runs(runs["exact"], run))
        rows.append(row)
    responses, pairs = sum(len(i.responses) for i in items), sum(len(i.all_pairs()) for i in items)
    facts = {"judge": JUDGE,
             "data": f"PandaLM test set, first {len(items)} items ({responses} responses, {pairs} pairs)",
             "threads": os.environ.get("TRUSTJUDGE_THREADS", "(unset)"), "cpus": os.cpu_count(),
             "note": "The machine's 2 cores were shared with other jobs (8 sessions): seconds are indicative only"}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sampled.json").write_text(json.dumps({"facts": facts, "rows": rows}, indent=2) + "\n")
    (RESULTS / "sampled.md").write_text("\n".join(render(facts, rows)) + "\n")
    print("\n".join(render(facts, rows)))


def _f(x: Any, digits: int = 2) -> str:
    if isinstance(x, tuple):
        return " / ".join(_f(v, digits) for v in x)
    if isinstance(x, float):
        return "-" if x != x else f"{x:.{digits}f}"
    return str(x)


def render(facts: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    lines = ["# Sampled labels against exact ones (bench/sampled.py)", "",
             f"Judge {facts['judge']} (llama.cpp, TRUSTJUDGE_THREADS={facts['threads']}); {facts['data']}: every "
             "response scored on 1-5 and every pair compared in both orders, from exact label probabilities and "
             "from N answers sampled at temperature 1. "
             f"{facts['note']}.", "",
             "| labels | generations | responses scored (of those exact) | "
             "mean / max abs diff of expected score (1-5) | mean abs diff trustjudge score | "
             "mean score_se | label mass exact / sampled | mean abs diff P(first) | likelihood verdict = exact | "
             "two-pass verdict = exact | human acc lik / 2p | CR trustjudge-5 x lik | CR discrete-5 x 2p |",
             "|" + "---|" * 13]
    for r in rows:
        if r["run"] == "exact":
            lines.append(f"| exact | 0 ({r['label reads']} label reads) | - | - | - | - | - | - | - | - | "
                         f"{_f(r['human acc likelihood'])} / {_f(r['human acc two-pass'])} | "
                         f"{_f(r['CR trustjudge-5 x likelihood'])} | {_f(r['CR discrete-5 x two-pass'])} |")
            continue
        lines.append(f"| {r['run']} | {r['generations']} | "
                     f"{r['responses scored (both)']} ({r['responses scored exact']}) | "
                     f"{_f(r['mean |d expected|'])} / {_f(r['max |d expected|'])} | "
                     f"{_f(r['mean |d trustjudge|'])} | {_f(r['mean score_se'])} | "
                     f"{_f(r['label mass exact / sampled'])} | {_f(r['mean |d P(first)|'])} | "
                     f"{_f(r['likelihood verdict = exact'])} | {_f(r['two-pass verdict = exact'])} | "
                     f"{_f(r['human acc likelihood'])} / {_f(r['human acc two-pass'])} | "
                     f"{_f(r['CR trustjudge-5 x likelihood'])} | {_f(r['CR discrete-5 x two-pass'])} |")
    lines += ["", "Generations: model calls the run made (N = 10 and 5 reuse N = 20's first samples: zero calls). "
              "score_se: the record's Monte-Carlo standard error of the expected score "
              "(none with fewer than 2 labelled answers). A response is unscored (no_label_mass) when no sampled "
              "answer wrote a label; the distances are over the responses scored both ways. Seconds (shared "
              "machine): " + ", ".join(f"{r['run']} {r['seconds']:.0f} s" for r in rows) + "."]
    return lines


if __name__ == "__main__":
    main()
