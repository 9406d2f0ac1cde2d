"""Every shipped recipe with a judge on a few real items, where public data for it ships with the project.

For each recipe: the data it runs on (../shared/data), its headline metric with the 95% bootstrap interval
over items, the audit's numbers where the recipe has one (CR and NTR for trustjudge-study), the model calls,
and the time. Recipes without shippable data here are listed with why.

Run: .venv/bin/python bench/recipes.py                                   # the default judge, 5 items each
     .venv/bin/python bench/recipes.py --judge llamacpp/smollm2-135m --limit 1 --responses 3 --no-write
Data: ../shared/data (or --data DIR). Store: bench/results/work/recipes.sqlite.
Results: bench/results/recipes.{md,json}.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

from _common import RESULTS, fmt, machine, write_results
from trustjudge import InputError
from trustjudge.io._adapters import iter_dataset
from trustjudge.recipes import builtin_recipes, get_recipe, recipe_judge, run_recipe

JUDGE = "llamacpp/qwen2.5-coder-1.5b"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
RUNS = {"trustjudge-study": ("trustjudge-demo/filtered_selected_answers_with_category.jsonl", "trustjudge-demo")}
"""The recipes with public data here: recipe -> (file under the data folder, its format)."""
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
        if name not in RUNS:
            results[name] = {"skipped": NO_DATA.get(name, "no public data here")}
            lines.append(f"| {name} | - | - | {recipe.metric} | - | - | - | - | - | {results[name]['skipped']} |")
            continue
        file, data_format = RUNS[name]
        items = []
        for it in iter_dataset(args.data / file, data_format):
            if isinstance(it, InputError):
                raise it
            if args.responses is not None:
                it = dataclasses.replace(it, responses=it.responses[:args.responses], pairs=None)
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
        lines.append(f"| {name} | {file} | {len(items)} | {recipe.metric} | {fmt(o.value, 3)} | "
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
