"""Every shipped recipe with a judge on a few real items, where public data for it ships with the project.

For each recipe: the data it runs on (../shared/data), its headline metric with the 95% bootstrap interval
over items, the audit's numbers where the recipe has one (CR and NTR for trustjudge-study), the model calls,
and the time. Recipes without shippable data here are listed with why.

Two recipes have no data of their own here and run on a stand-in that exercises the same protocol ("-like"):
puzzleworld on QAGS CNN/DM (each summary sentence one step, judged against the article; no reference solution,
so the share is over the response's own steps, `normalize = "response"`), and livedrbench on SummHay
(each summary bullet a predicted claim, the subtopic's reference insights the gold claims, the topic the
subset; at most 8 bullets per summary and 2 summaries per subtopic unless --responses says otherwise).

Run: .venv/bin/python bench/recipes.py                                   # the default judge, 5 items each
     .venv/bin/python bench/recipes.py --judge llamacpp/smollm2-135m --limit 1 --responses 3 --no-write
Data: ../shared/data (or --data DIR). Store: bench/results/work/recipes.sqlite.
Results: bench/results/recipes.{md,json}.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import RESULTS, fmt, machine, write_results
from trustjudge import InputError
from trustjudge.io._adapters import iter_dataset
from trustjudge.io._items import Claim, Item
from trustjudge.recipes import builtin_recipes, get_recipe, recipe_judge, run_recipe

JUDGE = "llamacpp/qwen2.5-coder-1.5b"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
RUNS = {"trustjudge-study": ("trustjudge-demo/filtered_selected_answers_with_category.jsonl", "trustjudge-demo")}
"""The recipes with public data here: recipe -> (file under the data folder, its format)."""


def _quoted(text: str) -> str:
    """The quoted sentence or insight of an adapter's check text (``... "TEXT"?``)."""
    return text[text.index('"') + 1:text.rindex('"')]


def _qags_as_steps(item: Item) -> Item:
    """A QAGS summary as a steps response: one sentence per line (its checks hold the sentences)."""
    responses = tuple(dataclasses.replace(r, text="\n".join(_quoted(c.text) for c in r.checklist), checklist=())
                      for r in item.responses)
    return dataclasses.replace(item, responses=responses)


def _summhay_as_claims(item: Item) -> Item:
    """A SummHay subtopic as a claims item: reference insights as gold claims, bullets as predicted claims."""
    gold = tuple(_quoted(c.text) for c in item.checklist)
    topic = re.search(r"Topic: (.*)", item.question)
    responses = tuple(dataclasses.replace(r, checklist=(), claims=tuple(
        Claim(line.strip("-*• ").strip()) for line in r.text.splitlines() if line.strip("-*• ").strip())[:8])
        for r in item.responses)
    return dataclasses.replace(item, checklist=(), gold_claims=gold, responses=responses,
                               fields={"subset": topic.group(1).strip() if topic else "-"})


LIKE: dict[str, tuple[str, str, Callable[[Item], Item], dict[str, Any], int]] = {
    "puzzleworld": ("qags-cnndm/mturk_cnndm.jsonl", "qags", _qags_as_steps, {"normalize": "response"}, 0),
    "livedrbench": ("summhay-coverage/eval_benchmark_data.json", "summhay", _summhay_as_claims, {}, 2),
}
"""Recipes run on a stand-in: recipe -> (file, format, item conversion, metric parameters, responses cap)."""
NO_DATA = {
    "dit": "no DIT data ships here (needs generated texts with their references)",
    "omnispatial": "no OmniSpatial data ships here (answers with their ground truths)",
    "datamind": "no DataMind data ships here (agents' answers with references)",
    "pqr": "no PDR-Bench data ships here (reports with their personas, sources and cited claims)",
    "sc-arena": "no SC-ARENA data ships here (answers with their references and grounding context)",
    "geoprivacy": "no VLM-GeoPrivacy data ships here (free-form location answers with the expected levels)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judge", default=JUDGE)
    parser.add_argument("--limit", type=int, default=5, help="Items per recipe.")
    parser.add_argument("--responses", type=int, default=None, help="At most this many responses per item.")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--store", type=Path, default=RESULTS / "work" / "recipes.sqlite")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--no-write", action="store_true", help="Print only (smoke runs).")
    args = parser.parse_args()
    args.store.parent.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    lines = [f"# Recipes on shipped data ({args.judge}, first {args.limit} items each)", ""]
    lines += ["| recipe | data | items | metric | value | 95% CI | unscored | audit | model calls | time |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for name in builtin_recipes():
        recipe = get_recipe(name)
        convert: Callable[[Item], Item] | None = None
        cap = args.responses
        if name in LIKE:
            file, data_format, convert, params, default_cap = LIKE[name]
            recipe = dataclasses.replace(recipe, metric_params={**recipe.metric_params, **params})
            cap = cap if cap is not None else default_cap or None
        elif name in RUNS:
            file, data_format = RUNS[name]
        else:
            results[name] = {"skipped": NO_DATA.get(name, "no public data here")}
            lines.append(f"| {name} | - | - | {recipe.metric} | - | - | - | - | - | {results[name]['skipped']} |")
            continue
        items = []
        for it in iter_dataset(args.data / file, data_format):
            if isinstance(it, InputError):
                raise it
            if cap is not None:
                it = dataclasses.replace(it, responses=it.responses[:cap], pairs=None)
            if convert is not None:
                it = convert(it)
            items.append(it)
            if len(items) >= args.limit:
                break
        judge = recipe_judge(recipe, args.judge, store=args.store)
        start = time.perf_counter()
        try:
            run = run_recipe(recipe, items, judge, bootstrap=args.bootstrap, audit=bool(recipe.audit))
            calls = judge.stats.model_calls
        finally:
            judge.close()
        seconds = time.perf_counter() - start
        o = run.result.overall
        audit = ""
        consistency = run.audit.get("consistency")
        if consistency:
            cr = consistency["conflict"].get(f"{recipe.judge.get('scale', 5)}/trustjudge/likelihood", {})
            ntr = consistency["ntr"].get("likelihood/3", {})
            audit = f"CR {fmt(cr.get('ratio'), 3)}, NTR_3 {fmt(ntr.get('ratio'), 3)}"
        results[name] = {"data": file, "items": len(items), "result": run.result.to_dict(), "audit": run.audit,
                         "model_calls": calls, "seconds": seconds}
        shown = f"{name}-like" if convert else name
        lines.append(f"| {shown} | {file} | {len(items)} | {recipe.metric} | {fmt(o.value, 3)} | "
                     f"[{fmt(o.ci[0], 3)}, {fmt(o.ci[1], 3)}] | {o.unscored} | {audit or '-'} | {calls} | "
                     f"{seconds:.1f} s |")
        print(lines[-1], flush=True)
    markdown = "\n".join(lines) + "\n"
    print(markdown)
    if not args.no_write:
        write_results("recipes", {"judge": args.judge, "limit": args.limit, "machine": machine(), "recipes": results},
                      markdown)


if __name__ == "__main__":
    main()
