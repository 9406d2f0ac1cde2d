"""Profile re-aggregation: judge N responses with the mock judge once, then time and cProfile a rerun
that reads every judgment from the store (no model calls).

Run: .venv/bin/python bench/profile_reaggregate.py [--n 10000] [--kind score|compare] [--top 25]
Prints the rerun's wall time and the functions with the most cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path

from trustjudge import Judge, items_from_dicts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000, help="responses (5 per question)")
    ap.add_argument("--kind", choices=("score", "compare"), default="score")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sort", default="cumulative", help="pstats sort key (cumulative, tottime, ...)")
    args = ap.parse_args()
    pairs = [{"first": "r0", "second": "r1"}, {"first": "r1", "second": "r2"}, {"first": "r0", "second": "r2"}]
    rows = [{"id": f"q{i}", "question": f"Question {i}?", "pairs": pairs,
             "responses": [{"id": f"r{k}", "text": f"answer {i}-{k}", "human_score": (i * 7 + k) % 5 + 1}
                           for k in range(5)]} for i in range(args.n // 5)]
    items = items_from_dicts(rows)
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "s.sqlite"

        def run() -> tuple[int, int]:
            judge = Judge("mock/hash", store=store, scale=100)
            method = judge.score if args.kind == "score" else judge.compare
            out = [r.to_dict() for r in method(items)]
            return len(out), judge.stats.model_calls

        run()  # store every judgment
        began = time.perf_counter()
        n, calls = run()
        print(f"re-aggregating {n:,} {args.kind} records from the store: {time.perf_counter() - began:.2f} s "
              f"({calls} model calls)")
        profile = cProfile.Profile()
        profile.enable()
        run()
        profile.disable()
        pstats.Stats(profile).sort_stats(args.sort).print_stats(args.top)


if __name__ == "__main__":
    main()
