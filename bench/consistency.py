"""The TrustJudge study on real human-labelled data, with both bundled judges.

For each judge and dataset: judge a stratified subset of whole questions (pointwise on 5 and 100
points, pairwise in both orders, `direct` protocol), audit it, and write one table shaped like the
paper's: CR for discrete-5, geval-5 and trustjudge-100 (against two_pass and likelihood verdicts), NTR_4
and NTR_5 for two_pass, likelihood and ppl (with the verdicts' tie rate), and agreement with humans.
A smaller `cot` run follows. Everything is stored in bench/results/work/study.sqlite, so a rerun (or a
larger run) only judges what is missing.

Run: .venv/bin/python bench/consistency.py                 # the planned subsets, as recorded (~1 h per judge here)
     .venv/bin/python bench/consistency.py --scale-budget 0.5   # half the budget
     .venv/bin/python bench/consistency.py --scale-budget 10   # ten times larger subsets
     .venv/bin/python bench/consistency.py --full              # every question of every dataset
Data: ../shared/data (or --data DIR). Results: bench/results/consistency.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import RESULTS, machine
from trustjudge import InputError, Item, Judge
from trustjudge.io._adapters import iter_dataset
from trustjudge.io._datasets import short_hash
from trustjudge.io._subsets import budget_subset
from trustjudge.modes._prompts import scale as make_scale


@dataclass(frozen=True)
class Dataset:
    name: str
    path: str
    budget: int
    """Judgments for SmolLM2 (pointwise 5 + 100 points and both pairwise orders, per question)."""
    cot_budget: int = 0


DATASETS = [
    Dataset("PandaLM test set", "pandalm-testset/testset-v1.json", 600, 0),
    Dataset("Topical-Chat USR", "topical-chat-usr/topical_chat.json", 700, 84),
    Dataset("LLMBar Natural", "llmbar/Natural/dataset.json", 240, 0),
    Dataset("LLMBar FairEval", "llmbar/Processed/FairEval/dataset.json", 120, 0),
    Dataset("LLMBar LLMEval2", "llmbar/Processed/LLMEval2/dataset.json", 120, 0),
    Dataset("LLMBar MT-Bench", "llmbar/Processed/MT-Bench/dataset.json", 120, 0),
]
# Budget factor per judge: Gemma is ~2x slower than SmolLM2 here, the 1.5B default judge ~20x.
JUDGES = {"llamacpp/qwen2.5-coder-1.5b": 0.1, "hf/smollm2-135m": 1.0, "hf/gemma3-270m": 0.5}
SCALES = (5, 10, 100)


def judgments(item: Item) -> int:
    return len(SCALES) * len(item.responses) + (2 * len(item.all_pairs()) if len(item.responses) >= 2 else 0)


def load(data: Path, ds: Dataset) -> list[Item]:
    return [v for v in iter_dataset(data / ds.path) if not isinstance(v, InputError)]


def pick(v: dict[str, Any], *path: str) -> float:
    for key in path:
        if v is None:
            return math.nan
        v = v.get(key)  # type: ignore[assignment]
    return math.nan if v is None else float(v)  # type: ignore[arg-type]


def pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:.1f}"


def summarise(report: dict[str, Any]) -> dict[str, Any]:
    cr = report["conflict"]
    out: dict[str, Any] = {"items": report["items"], "pairs": report["pairs"]}
    for key, label in (("5/discrete", "CR discrete-5"), ("5/geval", "CR geval-5"),
                       ("100/trustjudge", "CR trustjudge-100"), ("100/discrete", "CR discrete-100"),
                       ("100/expected", "CR expected-100")):
        for agg in ("two_pass", "likelihood"):
            out[f"{label} x {agg}"] = pick(cr, f"{key}/{agg}", "ratio")
    for agg in ("two_pass", "likelihood", "ppl", "single"):
        for k in (3, 4, 5):
            out[f"NTR_{k} {agg}"] = pick(report["ntr"], f"{agg}/{k}", "ratio")
            out[f"subsets_{k}"] = pick(report["ntr"], f"{agg}/{k}", "valid_subsets")
        res = report["ntr"].get(f"{agg}/3") or {}
        judged = res.get("judged") or 0
        out[f"tie rate {agg}"] = (res.get("ties") or 0) / judged if judged else math.nan
        out[f"acc {agg}"] = pick(report["pairwise"], agg, "accuracy")
        out[f"acc-no-ties {agg}"] = pick(report["pairwise"], agg, "accuracy_no_ties")
        out[f"kappa {agg}"] = pick(report["pairwise"], agg, "kappa")
    for key in ("5/discrete", "5/geval", "5/trustjudge", "10/discrete", "10/trustjudge", "100/discrete",
                "100/trustjudge", "100/expected"):
        out[f"spearman {key}"] = pick(report["scores"], key, "spearman_mean")
    for points in (5, 10):
        for method in ("discrete", "trustjudge"):
            for agg in ("two_pass", "likelihood"):
                out[f"CR {method}-{points} x {agg}"] = pick(cr, f"{points}/{method}/{agg}", "ratio")
    out["swap flip"] = pick(report, "swap", "rate")
    out["first-shown wins"] = pick(report, "position", "overall", "first_shown_rate")
    out["annotator loo acc"] = pick(report, "annotators", "loo_accuracy") if report.get("annotators") else math.nan
    out["unscored"] = {"score": report["unscored_scores"], "compare": report["unscored_compare"]}
    return out


def table(rows: list[tuple[str, str, str, dict[str, Any]]]) -> list[str]:
    lines = ["| judge | data | protocol | items / pairs | CR discrete-5 (2p / lik) | CR geval-5 (2p / lik) | "
             "CR trustjudge-100 (2p / lik) | NTR_4 2p / lik / ppl | NTR_5 2p / lik / ppl | tie rate 2p / lik / ppl | "
             "human acc single / 2p / lik / ppl | acc no-ties lik | Spearman d5 / tj100 |",
             "|" + "---|" * 13]
    for judge, data, protocol, s in rows:
        def two(label: str, s: dict[str, Any] = s) -> str:
            return f"{pct(s[f'{label} x two_pass'])} / {pct(s[f'{label} x likelihood'])}"

        def three(prefix: str, s: dict[str, Any] = s) -> str:
            return " / ".join(pct(s[f"{prefix} {a}"]) for a in ("two_pass", "likelihood", "ppl"))

        acc = " / ".join(pct(s[f"acc {a}"]) for a in ("single", "two_pass", "likelihood", "ppl"))
        sp = f"{s['spearman 5/discrete']:.2f} / {s['spearman 100/trustjudge']:.2f}" \
            if s["spearman 5/discrete"] == s["spearman 5/discrete"] else "-"
        lines.append(f"| {judge} | {data} | {protocol} | {s['items']} / {s['pairs']} | {two('CR discrete-5')} | "
                     f"{two('CR geval-5')} | {two('CR trustjudge-100')} | {three('NTR_4')} | {three('NTR_5')} | "
                     f"{three('tie rate')} | {acc} | {pct(s['acc-no-ties likelihood'])} | {sp} |")
    return lines


def scale_table(rows: list[tuple[str, str, str, dict[str, Any]]], chosen: dict[str, Any]) -> list[str]:
    """Per scale, for the judges measured on 5, 10 and 100 points: agreement with human scores, CR against
    likelihood verdicts, and seconds per judgment (what the default scale is chosen from)."""
    lines = ["## Scales (5, 10, 100 points), where measured", "",
             "| judge | data | Spearman discrete / trustjudge: 5 | 10 | 100 | CR trustjudge x lik: 5 | 10 | 100 | "
             "s per judgment: 5 | 10 | 100 |", "|" + "---|" * 11]
    for judge, data, protocol, s in rows:
        c = chosen.get(f"{judge} | {data} | {protocol}", {})
        if protocol != "direct" or "CR trustjudge-10 x likelihood" not in s:
            continue

        def sp(points: int, s: dict[str, Any] = s) -> str:
            a, b = s.get(f"spearman {points}/discrete", math.nan), s.get(f"spearman {points}/trustjudge", math.nan)
            return "-" if a != a and b != b else f"{a:.2f} / {b:.2f}"

        def cr(points: int, s: dict[str, Any] = s) -> str:
            return pct(s.get(f"CR trustjudge-{points} x likelihood", math.nan))

        def sec(points: int, c: dict[str, Any] = c) -> str:
            v = c.get(f"s_per_judgment_{points}")
            return "-" if v is None else f"{v:.1f}"

        lines.append(f"| {judge} | {data} | {sp(5)} | {sp(10)} | {sp(100)} | {cr(5)} | {cr(10)} | {cr(100)} | "
                     f"{sec(5)} | {sec(10)} | {sec(100)} |")
    return lines


def reference_table(references: dict[str, Any]) -> list[str]:
    if not references:
        return []
    lines = ["## Published judges on the same PandaLM pairs", "",
             "| our run | judge | pairs | human accuracy (ties included) | kappa | unparsed |",
             "|---|---|---|---|---|---|"]
    for key, ref in references.items():
        for name, r in ref.items():
            kappa = r.get("kappa")
            lines.append(f"| {key.split(' | ')[0]} | {name} | {r['pairs']} | {pct(r['accuracy'])} | "
                         f"{'-' if kappa is None or kappa != kappa else f'{kappa:.2f}'} | {r['unparsed']} |")
    return lines


def directions(rows: list[tuple[str, str, str, dict[str, Any]]]) -> list[str]:
    out = []
    for judge, data, protocol, s in rows:
        checks = []
        a, b = s["CR discrete-5 x likelihood"], s["CR trustjudge-100 x likelihood"]
        if a == a and b == b:
            checks.append(f"CR trustjudge-100 {'<' if b < a else '>='} discrete-5 ({pct(b)} vs {pct(a)}, likelihood "
                          f"verdicts): {'agrees with' if b < a else 'differs from'} the paper")
        a, b = s["NTR_5 two_pass"], s["NTR_5 likelihood"]
        if a == a and b == b:
            checks.append(f"NTR_5 likelihood {'<' if b < a else '>='} two_pass ({pct(b)} vs {pct(a)}; tie rates "
                          f"{pct(s['tie rate likelihood'])} vs {pct(s['tie rate two_pass'])}): "
                          f"{'agrees with' if b < a else 'differs from'} the paper")
        a, b = s["acc two_pass"], s["acc likelihood"]
        if a == a and b == b:
            checks.append(f"human accuracy likelihood {pct(b)} vs two_pass {pct(a)}")
        out.append(f"- **{judge}, {data} ({protocol})**: " + ("; ".join(checks) or "no comparable numbers"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--store", type=Path, default=RESULTS / "work" / "study.sqlite")
    ap.add_argument("--judges", default=",".join(JUDGES))
    ap.add_argument("--datasets", default="", help="comma-separated name prefixes (default: all)")
    ap.add_argument("--scale-budget", type=float, default=1.0, help="multiply every subset budget")
    ap.add_argument("--full", action="store_true", help="every question of every dataset")
    ap.add_argument("--no-cot", action="store_true")
    ap.add_argument("--cot-judges", default=None, help="comma-separated judges that also run cot (default: all)")
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args()
    args.store.parent.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, str, str, dict[str, Any]]] = []
    chosen: dict[str, Any] = {}
    references: dict[str, Any] = {}
    ran = set(args.judges.split(","))
    previous = RESULTS / "consistency.json"
    if previous.exists():  # judges not run now keep their earlier rows (the study store is not committed)
        old = json.loads(previous.read_text())
        for row in old["rows"]:
            if row["judge"] not in ran:
                row = dict(row)
                rows.append((row.pop("judge"), row.pop("data"), row.pop("protocol"), row))
        chosen.update({k: v for k, v in old["subsets"].items() if k.split(" | ")[0] not in ran})
        references.update({k: v for k, v in old.get("references", {}).items() if k.split(" | ")[0] not in ran})
    timings: dict[str, float] = {}
    wanted = [d for d in DATASETS if not args.datasets or any(d.name.startswith(p) for p in args.datasets.split(","))]
    for judge_name in args.judges.split(","):
        factor = JUDGES.get(judge_name, 1.0) * args.scale_budget
        for protocol in ("direct", "cot"):
            if protocol == "cot" and (args.no_cot or (args.cot_judges is not None
                                                      and judge_name not in args.cot_judges.split(","))):
                continue
            judge = Judge(judge_name, store=args.store, protocol=protocol, max_new_tokens=128)
            for ds in wanted:
                budget = ds.budget if protocol == "direct" else ds.cot_budget
                if budget == 0:
                    continue
                items = load(args.data, ds)
                subset = items if args.full else budget_subset(items, int(budget * factor), judgments, seed=0)
                if not subset:  # the budget is smaller than one question
                    subset = budget_subset(items, min(judgments(it) for it in items), judgments, seed=0)
                began = time.perf_counter()
                calls_before = judge.stats.model_calls
                per_scale: dict[str, float] = {}
                for points in SCALES:  # judged one scale at a time first, to time each (the audit reuses them)
                    calls = judge.stats.model_calls
                    t0 = time.perf_counter()
                    judge.scale = make_scale(points)
                    list(judge.score(subset))
                    if judge.stats.model_calls > calls:
                        per_scale[f"s_per_judgment_{points}"] = (time.perf_counter() - t0) / sum(
                            len(it.responses) for it in subset)
                judge.scale = make_scale(100)
                run = judge.audit(subset, scales=SCALES, bootstrap=args.bootstrap)
                elapsed = time.perf_counter() - began
                key = f"{judge_name} | {ds.name} | {protocol}"
                timings[key] = elapsed
                chosen[key] = {"items": [it.id for it in subset], "judgments": sum(judgments(it) for it in subset),
                               "of_items": len(items), "model_calls": judge.stats.model_calls - calls_before,
                               "seconds": elapsed, **per_scale}
                s = summarise(run.report.to_dict())
                rows.append((judge_name, ds.name, protocol, s))
                if ds.name.startswith("PandaLM") and protocol == "direct":
                    references[key] = published_on_the_same_pairs(args.data, subset, run.compare_records)
                print(f"{key}: {len(subset)}/{len(items)} items, {chosen[key]['judgments']} judgments, "
                      f"{elapsed:.0f} s", flush=True)
                write(rows, chosen, references, args)
            judge.close()


PUBLISHED = {"gpt-3.5-turbo": ("gpt-3.5-turbo-testset-v1.json", "gpt_result"),
             "PandaLM-7B": ("pandalm-7b-testset-v1.json", "pandalm_result")}
VERDICT = {"1": "first", "2": "second", "0": "tie", "Tie": "tie"}


def published_on_the_same_pairs(data: Path, subset: list[Item], pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """The published gpt-3.5-turbo and PandaLM-7B verdicts on exactly the PandaLM pairs we judged: accuracy
    against the human majority (ties included, as ours) and Cohen's kappa; unparsed ("garbage") verdicts
    are counted apart and scored as wrong, as they would be in use."""
    from trustjudge.audit._audit import cohen_kappa

    rows = json.loads((data / "pandalm-testset" / "testset-v1.json").read_text())
    wanted = {it.id for it in subset}
    human: dict[tuple[str, str, str], str] = {}
    for it in subset:
        for pair in it.pairs:
            if pair.human:
                human[(it.id, pair.first, pair.second)] = pair.human
    ours = {(p["item_id"], p["first_id"], p["second_id"]): p["verdicts"].get("likelihood") for p in pairs}
    out: dict[str, Any] = {}
    for name, (file, field) in PUBLISHED.items():
        verdicts = json.loads((data / "pandalm-testset" / "judge_outputs" / file).read_text())
        by_idx = {v["idx"]: str(v[field]) for v in verdicts}
        gold, got, unparsed = [], [], 0
        seen = set()
        for idx, row in enumerate(rows):
            item = "pandalm-" + short_hash(row["instruction"] + "\x00" + (row.get("input") or ""))
            key = (item, short_hash(str(row["response1"])), short_hash(str(row["response2"])))
            if item not in wanted or key not in human or key in seen or key not in ours:
                continue
            seen.add(key)
            verdict = VERDICT.get(by_idx.get(idx, ""), "unparsed")
            unparsed += verdict == "unparsed"
            gold.append(human[key])
            got.append(verdict)
        acc = sum(a == b for a, b in zip(gold, got)) / len(gold) if gold else math.nan
        kappa = cohen_kappa((a, b) for a, b in zip(gold, got) if b != "unparsed")  # over parsed verdicts
        out[name] = {"pairs": len(gold), "accuracy": acc, "kappa": kappa, "unparsed": unparsed}
    return out


def write(rows: list[tuple[str, str, str, dict[str, Any]]], chosen: dict[str, Any], references: dict[str, Any],
          args: argparse.Namespace) -> None:
    notes = RESULTS / "consistency_notes.md"
    lines = ["# TrustJudge consistency study on real human-labelled data (bench/consistency.py)", "",
             f"Machine: {machine()}.", "",
             "All numbers are percentages over the judged subset. CR pairs each scoring method with two_pass (2p) "
             "and likelihood (lik) verdicts of the same judge on the same pairs; NTR_k is over k-subsets of a "
             "question's responses whose pairs were all judged (only datasets with 3+ responses per question have "
             "them); tie rate is the share of pairs the aggregation calls a tie (read NTR next to it: an all-tie "
             "judge is perfectly transitive). Human accuracy is against the (majority) human label, ties included. "
             "Spearman is the mean within-question rank correlation of scores with human scores (Topical-Chat).", "",
             *table(rows), "", *scale_table(rows, chosen), "", *reference_table(references), "",
             "## Direction of the effects, checked automatically", "", *directions(rows), "",
             "## Subsets (whole questions, stratified by number of responses; ids in consistency.json)", ""]
    for key, c in chosen.items():
        lines.append(f"- {key}: {len(c['items'])} of {c['of_items']} questions, {c['judgments']} judgments, "
                     f"{c['model_calls']} model calls this run, {c['seconds']:.0f} s")
    if notes.exists():
        lines += ["", notes.read_text()]
    (RESULTS / "consistency.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "consistency.json").write_text(json.dumps(
        {"rows": [{"judge": j, "data": d, "protocol": p, **s} for j, d, p, s in rows], "subsets": chosen,
         "references": references},
        indent=1, default=lambda x: None) + "\n")


if __name__ == "__main__":
    main()
