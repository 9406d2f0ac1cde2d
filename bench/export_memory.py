"""Peak memory of `trustjudge store export --out x.parquet`, before and after it streams in row groups.

Builds a synthetic judgment store (label outputs with 100-label requests and long prompts, plus some
critiques) of about ``--mb`` megabytes, then exports it to Parquet with two versions of the package: the
source tree of ``--before`` (a git revision, extracted with ``git archive`` into a temporary folder) and
this tree's ``src``. Each export runs in a fresh process; its peak RSS is read from ``getrusage`` of that
process alone. Both Parquet files are read back and compared (row count, columns, every value).

    python bench/export_memory.py --mb 40,160 --before d135ca4

Writes bench/results/export_memory.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import WORDS, peak_rss_mb, write_results

ROOT = Path(__file__).resolve().parents[1]


def build_store(path: Path, target_mb: float, seed: int = 0) -> int:
    """A store of about ``target_mb`` MB: 9 label outputs (100 labels) per critique; returns the rows."""
    sys.path.insert(0, str(ROOT / "src"))
    from trustjudge import Store

    rng = random.Random(seed)
    labels = [f"{k}]" for k in range(1, 101)]
    rows = 0
    with Store(path) as store:
        while path.stat().st_size < target_mb * 1e6:
            batch: list[tuple[str, str, str, dict[str, Any], dict[str, Any], int, int, float]] = []
            for _ in range(500):
                prompt = " ".join(rng.choice(WORDS) for _ in range(300))
                if rows % 10 == 9:
                    batch.append((f"b2:g{rows}", "generate", "mock:hash",
                                  {"kind": "generate", "backend": "mock:hash", "prompt": prompt, "stop": ["\n\n"],
                                   "max_new_tokens": 256, "temperature": 0.0, "seed": 0},
                                  {"text": prompt[:600], "token_logprobs": [-rng.random() for _ in range(120)],
                                   "finish_reason": "stop"}, 400, 120, 0.5))
                else:
                    logprobs: list[float | None] = [-20 * rng.random() for _ in labels]
                    logprobs[rng.randrange(100)] = None  # -inf is stored as null
                    batch.append((f"b2:l{rows}", "labels", "mock:hash",
                                  {"kind": "labels", "backend": "mock:hash", "prompt": prompt, "labels": labels},
                                  {"logprobs": logprobs, "method": "exact"}, 400, 0, 0.1))
                rows += 1
            store.put_many(batch)
    return rows


def export(src: Path, store: Path, out: Path) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(src), "TRUSTJUDGE_THREADS": "1"}
    return peak_rss_mb([sys.executable, "-m", "trustjudge.cli", "store", "export", "--store", str(store),
                        "--out", str(out)], env=env)


def same_tables(a: Path, b: Path) -> tuple[bool, int, int]:
    """Whether two Parquet files hold the same rows and columns (values compared as Python objects)."""
    import pyarrow.parquet as pq

    ta, tb = pq.read_table(a), pq.read_table(b)
    if ta.num_rows != tb.num_rows or sorted(ta.column_names) != sorted(tb.column_names):
        return False, ta.num_rows, tb.num_rows
    for name in ta.column_names:
        if ta.column(name).to_pylist() != tb.column(name).to_pylist():
            return False, ta.num_rows, tb.num_rows
    return True, ta.num_rows, tb.num_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", default="40,160", help="Sizes of the synthetic stores (MB), comma-separated.")
    parser.add_argument("--before", default="d135ca4", help="The git revision measured as 'before'.")
    args = parser.parse_args()
    sizes = [float(x) for x in args.mb.split(",") if x.strip()]
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip()
    runs = []
    with tempfile.TemporaryDirectory(prefix="export-memory-") as tmp:
        folder = Path(tmp)
        old = folder / "before"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before, "src"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        for target in sizes:
            store = folder / f"store-{target:g}.sqlite"
            rows = build_store(store, target)
            run: dict[str, Any] = {"store_mb": round(store.stat().st_size / 1e6, 1), "rows": rows}
            for name, src in (("before", old / "src"), ("after", ROOT / "src")):
                out = folder / f"{name}.parquet"
                rss, seconds = export(src, store, out)
                run[name] = {"peak_rss_mb": round(rss, 1), "seconds": round(seconds, 2),
                             "parquet_mb": round(out.stat().st_size / 1e6, 1)}
            run["same_rows_and_values"], _, run["rows_read_back"] = same_tables(folder / "before.parquet",
                                                                                folder / "after.parquet")
            print(run, flush=True)
            runs.append(run)
            store.unlink()
    payload = {"before": args.before, "after": commit, "runs": runs,
               "machine": {"cores": os.cpu_count(), "python": platform.python_version()}}
    lines = [f"| {r['store_mb']:.0f} MB ({r['rows']:,} outputs) | {r['before']['peak_rss_mb']:,.0f} MB | "
             f"{r['after']['peak_rss_mb']:,.0f} MB | {r['before']['seconds']:.1f} s / {r['after']['seconds']:.1f} s | "
             f"{'yes' if r['same_rows_and_values'] else 'NO'} |" for r in runs]
    markdown = f"""# `store export --out x.parquet`: peak memory

`python bench/export_memory.py --mb {args.mb} --before {args.before}` on synthetic stores (100-label
judgments with 300-word prompts, one critique in ten), each exported by a fresh process
({os.cpu_count()} cores, Python {platform.python_version()}). Before ({args.before}): every row flattened in
memory and written as one table. After ({commit}): two passes over one read snapshot (columns and types, then
rows), written in row groups of 1,000 rows.

| store | peak RSS before | peak RSS after | time before / after | same rows, columns, values |
|---|---:|---:|---:|---|
""" + "\n".join(lines) + """

The streaming export's peak stays near the process's own size (Python, pyarrow, one row group) whatever the
store; the one-table export's grows with it.
"""
    write_results("export_memory", payload, markdown)
    print(markdown)


if __name__ == "__main__":
    main()
