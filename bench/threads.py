"""How many threads a llama.cpp judge should use: seconds per judgment at 1 thread and at one per physical
core, on idle cores and with one core held by other work (a busy-loop process), per bundled judge.

Each configuration runs in its own process (a fresh ``Llama``), on the same synthetic items (100-point direct
pointwise, ~190-word answers), after a warm-up judgment; every configuration must give the same scores (the
thread count is not part of the store key). Ratios are measured in one run.

Run: .venv/bin/python bench/threads.py [--judges llamacpp/qwen2.5-coder-1.5b,llamacpp/smollm2-135m] [--n 4]
Writes bench/results/threads.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import machine, synthetic_items, write_results


def _burn(stop: Any) -> None:
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def measure(judge: str, threads: int, busy: bool, n: int) -> dict[str, Any]:
    """One configuration, in this process: seconds per judgment and the scores."""
    from trustjudge import Judge, items_from_dicts
    from trustjudge.backends._llamacpp import LlamaCppBackend
    from trustjudge.backends._models import resolve

    backend = LlamaCppBackend(resolve(judge.split("/", 1)[1]), n_threads=threads)
    items = items_from_dicts(synthetic_items(1, n, 190, seed=3))
    with tempfile.TemporaryDirectory() as tmp:
        list(Judge(backend, store=Path(tmp) / "warm.sqlite", scale=100).score(
            items_from_dicts(synthetic_items(1, 1, 20, seed=7))))
        stop = mp.Event()
        burner = mp.Process(target=_burn, args=(stop,)) if busy else None
        if burner is not None:
            burner.start()
            time.sleep(1.0)
        t0 = time.perf_counter()
        records = list(Judge(backend, store=Path(tmp) / "s.sqlite", scale=100).score(items))
        seconds = time.perf_counter() - t0
        if burner is not None:
            stop.set()
            burner.join()
    backend.close()
    return {"judge": judge, "threads": threads, "busy": busy, "judgments": len(records),
            "s_per_judgment": seconds / len(records), "scores": [r.scores["trustjudge"] for r in records]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--judges", default="llamacpp/qwen2.5-coder-1.5b,llamacpp/smollm2-135m")
    ap.add_argument("--n", type=int, default=4, help="judgments per configuration")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: judge,threads,busy in a child process
    args = ap.parse_args()
    if args.one:
        judge, threads, busy = args.one.split(",")
        print(json.dumps(measure(judge, int(threads), busy == "1", args.n)))
        return
    from trustjudge.backends._llamacpp import physical_cores

    cores = physical_cores()
    if cores < 2:
        sys.exit("threads.py compares 1 thread with one per core: this machine has 1 core")
    load_before = os.getloadavg()[0]
    rows: list[dict[str, Any]] = []
    for judge in args.judges.split(","):
        for busy in (False, True):
            for threads in (1, cores):
                out = subprocess.run([sys.executable, __file__, "--one", f"{judge},{threads},{int(busy)}",
                                      "--n", str(args.n)], capture_output=True, text=True, check=True)
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(rows[-1], flush=True)
    run = {"machine": machine(), "physical_cores": cores, "load_1min_before": load_before,
           "load_1min_after": os.getloadavg()[0], "measured": time.strftime("%Y-%m-%d %H:%M")}
    lines = ["# Threads of a llama.cpp judge (bench/threads.py)", "",
             f"Machine: {run['machine']['cpu']}, {run['machine']['cores']} CPUs, {cores} physical cores; commit "
             f"{run['machine']['commit']}; measured {run['measured']}, 1-minute load average "
             f"{load_before:.1f} before, {run['load_1min_after']:.1f} after. {args.n} direct 100-point judgments "
             "per configuration (~190-word answers), each configuration in a fresh process after a warm-up; "
             "'busy' = one other process spinning on a core throughout.", "",
             f"| judge | cores | s per judgment, 1 thread | s per judgment, {cores} threads | {cores} threads vs 1 "
             "(speed-up) | same scores |", "|---|---|---|---|---|---|"]
    for judge in args.judges.split(","):
        for busy in (False, True):
            one, many = (next(r for r in rows if r["judge"] == judge and r["busy"] == busy and r["threads"] == t)
                         for t in (1, cores))
            lines.append(f"| `{judge}` | {'one busy' if busy else 'idle'} | {one['s_per_judgment']:.2f} | "
                         f"{many['s_per_judgment']:.2f} | {one['s_per_judgment'] / many['s_per_judgment']:.2f}x | "
                         f"{'yes' if one['scores'] == many['scores'] else 'NO'} |")
    lines += ["", "Speed-up above 1: more threads are faster. The backend's default is one thread per physical "
              "core (`TRUSTJUDGE_THREADS` overrides it); ggml's threads spin at barriers, which is what a busy "
              "core costs.", ""]
    write_results("threads", {"run": run, "rows": rows}, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
