"""The sandboxed executor's overhead per script (trustjudge.execute.LocalExecutor).

For each isolation (namespace where it works here, hooks) and each script: an empty script (the
sandbox's own cost: temporary folder, process start, confinement), a script that prints, and a
matplotlib bar chart saved as PNG (what VisPlotBench runs). Each is run ``--repeats`` times; the table
gives the median and the spread of wall seconds, and next to it the same code run by a bare
``python -c`` subprocess (no sandbox), so the difference is the sandbox's overhead. A last row: the
same plot read back from the store (StoredExecutor), which executes nothing.

Run: .venv/bin/python bench/executor.py [--repeats 10]
Results: bench/results/executor.{md,json}
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import machine, write_results
from trustjudge.engine._store import Store
from trustjudge.execute import LocalExecutor, StoredExecutor, namespaces_work

SCRIPTS = {
    "empty": "pass\n",
    "print": "print('hello')\n",
    "matplotlib PNG": ("import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n"
                       "ax.bar(['a', 'b', 'c'], [3, 1, 2])\nfig.savefig('plot.png')\n"),
}


def bare(code: str) -> float:
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, MPLBACKEND="Agg")
        start = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-B", "-c", code], cwd=folder, env=env, check=True,
                       capture_output=True)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    isolations = (["namespace"] if namespaces_work() else []) + ["hooks"]
    rows = []
    for name, code in SCRIPTS.items():
        bare_s = [bare(code) for _ in range(args.repeats)]
        for isolation in isolations:
            ex = LocalExecutor(isolation=isolation)  # type: ignore[arg-type]
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                result = ex.run(code)
                times.append(time.perf_counter() - start)
                assert result.ok, result.stderr
            rows.append({"script": name, "isolation": isolation, "median_s": statistics.median(times),
                         "min_s": min(times), "max_s": max(times), "bare_median_s": statistics.median(bare_s),
                         "overhead_s": statistics.median(times) - statistics.median(bare_s)})
    with tempfile.TemporaryDirectory() as folder:
        stored = StoredExecutor(LocalExecutor(), Store(Path(folder) / "s.sqlite"))
        stored.run(SCRIPTS["matplotlib PNG"])
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            stored.run(SCRIPTS["matplotlib PNG"])
            times.append(time.perf_counter() - start)
        assert stored.executed == 1
        rows.append({"script": "matplotlib PNG, from the store", "isolation": stored.executor.settings()["isolation"],
                     "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
                     "bare_median_s": None, "overhead_s": None})
    facts = machine()
    load = os.getloadavg()[0]
    lines = ["# Sandboxed executor: overhead per script (bench/executor.py)", "",
             f"Command: `python bench/executor.py --repeats {args.repeats}`. Machine: {facts}; load average "
             f"{load:.1f} at the end (2 cores shared with other work: upper bounds). `bare` is the same code "
             "in a plain `python -I -c` subprocess in a temporary folder, no sandbox; overhead = median - bare median.",
             "", "| script | isolation | median s | min s | max s | bare median s | overhead s |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        bare_txt = "-" if r["bare_median_s"] is None else f"{r['bare_median_s']:.3f}"
        over = "-" if r["overhead_s"] is None else f"{r['overhead_s']:+.3f}"
        lines.append(f"| {r['script']} | {r['isolation']} | {r['median_s']:.3f} | {r['min_s']:.3f} | "
                     f"{r['max_s']:.3f} | {bare_txt} | {over} |")
    write_results("executor", {"machine": facts, "repeats": args.repeats, "rows": rows}, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
