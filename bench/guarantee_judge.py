"""The judging half of the "Verdicts with a guarantee" study (bench/guarantee.py analyses it).

Judges the study's items with the default judge (all Judge defaults: `direct` protocol, bundled
templates) into the store bench/results/work/guarantee.sqlite, one whole chunk after another, in this
priority order (the items of each chunk are fixed, so a later session extends exactly the same items):

  a pandalm-0-100    PandaLM test set (testset-v1.json) rows 0-99 in file order (= `idx`), `compare`: every
                     pair in both presentation orders; human ties kept. A row whose two responses are the
                     same text is no pair (the adapter skips it).
  b qags-0-60        QAGS CNN/DM (mturk_cnndm.jsonl) articles 1-60 in file order, `checklist` YES/NO: one
                     check per summary sentence, the article as evidence (the adapter's items).
  c stance-150       Factcheck-GPT subtask 3, `claims` with unknown=True on the first 150 pairs of
                     bench/claims.py's order (its `stance_items`: identical pairs merged, conflicting ones
                     dropped, a seeded shuffle per stance taken in turns; its 64 recorded pairs are the first 64).
  d pandalm-100-400  PandaLM rows 100-399, as a.
  e llmbar-natural   LLMBar Natural, all 100 pairs in file order, `compare` in both orders.
  f qags-60-235      QAGS articles 61-235, as b.
  g topical-10       Topical-Chat USR, the first 10 dialogues in file order (6 responses each), `compare`
                     on all 15 pairs of each in both orders (the human side is the `overall` ratings).
  h pandalm-400-460  PandaLM rows 400-459, as a (rows 0-399 hold 363 distinct pairs: these bring the study
                     to at least 400).

The store caches everything, so a rerun (or a run after an interruption) judges only what is missing.
Every --export-every minutes and at the end of each chunk the store is exported (through the library,
atomically) to bench/results/guarantee_judgments.jsonl.gz; at the start, if that export exists and the
store is empty, it is imported first, so a later session resumes from the committed export.

Run: TRUSTJUDGE_THREADS=1 .venv/bin/python bench/guarantee_judge.py > bench/results/work/guarantee_judge.log 2>&1
     .venv/bin/python bench/guarantee_judge.py --judge mock/hash --limit 2 --store /tmp/g.sqlite \
         --export /tmp/g.jsonl.gz                     # smoke test: 2 items per chunk, the hash judge
Data: ../shared/data (or --data DIR).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import RESULTS
from claims import stance_items
from trustjudge import InputError, Item, Judge
from trustjudge.engine._store import Store
from trustjudge.engine._store_io import import_file, write_export
from trustjudge.io._adapters import iter_dataset
from trustjudge.io._datasets import short_hash

JUDGE = "llamacpp/qwen2.5-coder-1.5b"
PANDALM = "pandalm-testset/testset-v1.json"
QAGS = "qags-cnndm/mturk_cnndm.jsonl"
LLMBAR = "llmbar/Natural/dataset.json"
TOPICAL = "topical-chat-usr/topical_chat.json"
STORE = RESULTS / "work" / "guarantee.sqlite"
EXPORT = RESULTS / "guarantee_judgments.jsonl.gz"
# ../shared/data beside the checkout (a worktree one level deeper finds it one folder further up)
DATA = next((p / "shared" / "data" for p in Path(__file__).resolve().parents[2:4] if (p / "shared" / "data").is_dir()),
            Path(__file__).resolve().parents[2] / "shared" / "data")


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} {message}", flush=True)


def load(path: Path, fmt: str = "auto") -> list[Item]:
    return [v for v in iter_dataset(path, fmt) if not isinstance(v, InputError)]


def pandalm_items(data: Path, start: int, stop: int) -> list[Item]:
    """The adapter's PandaLM items, each with only its pairs from test-set rows ``start``..``stop - 1`` (file
    order), items in the order of their first such row."""
    path = data / PANDALM
    by_id = {it.id: it for it in load(path, "pandalm")}
    rows = json.loads(path.read_text())
    chosen: dict[str, list[Any]] = {}
    for row in rows[start:stop]:
        item = by_id["pandalm-" + short_hash(row["instruction"] + "\x00" + (row.get("input") or ""))]
        first, second = short_hash(str(row["response1"])), short_hash(str(row["response2"]))
        if first == second:
            continue  # the adapter makes no pair of two identical responses
        pair = next(p for p in item.pairs or () if (p.first, p.second) == (first, second))
        pairs = chosen.setdefault(item.id, [])
        if pair not in pairs:
            pairs.append(pair)
    return [dataclasses.replace(by_id[i], pairs=tuple(pairs)) for i, pairs in chosen.items()]


@dataclass(frozen=True)
class Chunk:
    name: str
    mode: str
    """compare, checklist or claims."""
    items: Callable[[Path], list[Item]]


CHUNKS = [
    Chunk("pandalm-0-100", "compare", lambda d: pandalm_items(d, 0, 100)),
    Chunk("qags-0-60", "checklist", lambda d: load(d / QAGS, "qags")[:60]),
    Chunk("stance-150", "claims", lambda d: stance_items(d, 150)[0]),
    Chunk("pandalm-100-400", "compare", lambda d: pandalm_items(d, 100, 400)),
    Chunk("llmbar-natural", "compare", lambda d: load(d / LLMBAR, "llmbar")),
    Chunk("qags-60-235", "checklist", lambda d: load(d / QAGS, "qags")[60:]),
    Chunk("topical-10", "compare", lambda d: load(d / TOPICAL, "topical-chat")[:10]),
    Chunk("pandalm-400-460", "compare", lambda d: pandalm_items(d, 400, 460)),
]


def judgments(mode: str, item: Item) -> int:
    """Label judgments one item takes in ``mode``."""
    if mode == "compare":
        return 2 * len(item.all_pairs())
    if mode == "checklist":
        return sum(len(item.checks(r)) for r in item.responses)
    return sum(len(r.claims or ()) for r in item.responses)


def records(judge: Judge, mode: str, items: list[Item], progress: Callable[[int], None]) -> Iterator[Any]:
    if mode == "compare":
        return judge.compare(items, progress=progress)
    if mode == "checklist":
        return judge.checklist(items, progress=progress)
    return judge.claims(items, unknown=True, progress=progress)


class Exporter:
    def __init__(self, store: Path, out: Path, every_s: float) -> None:
        self.store, self.out, self.every_s = store, out, every_s
        self.last = time.monotonic()

    def __call__(self, why: str) -> None:
        t0 = time.perf_counter()
        n = write_export(self.store, self.out)
        self.last = time.monotonic()
        log(f"export ({why}): {n} outputs -> {self.out} ({self.out.stat().st_size / 1e6:.2f} MB, "
            f"{time.perf_counter() - t0:.1f} s)")

    def due(self) -> bool:
        return time.monotonic() - self.last >= self.every_s


def run_chunk(judge: Judge, chunk: Chunk, items: list[Item], export: Exporter) -> None:
    total = sum(judgments(chunk.mode, it) for it in items)
    stats = judge.stats
    calls0, stored0 = stats.label_calls + stats.generate_calls, stats.from_store
    t0 = last = time.perf_counter()
    done = [0]
    log(f"{chunk.name}: {len(items)} items, {total} judgments ({chunk.mode})")

    def progress(n: int) -> None:
        nonlocal last
        done[0] += n
        now = time.perf_counter()
        if now - last >= 60:
            last = now
            calls = stats.label_calls + stats.generate_calls - calls0
            rate = 60 * calls / (now - t0)
            left = (total - done[0]) / rate if rate else float("nan")
            log(f"  {chunk.name}: {done[0]}/{total} judgments, {calls} model calls, {stats.from_store - stored0} "
                f"from the store, {now - t0:.0f} s, {rate:.2f} calls/min, ~{left:.0f} min left")
        if export.due():
            export("periodic")

    n = sum(1 for _ in records(judge, chunk.mode, items, progress))
    elapsed = time.perf_counter() - t0
    calls = stats.label_calls + stats.generate_calls - calls0
    log(f"{chunk.name}: done, {n} records, {calls} model calls, {stats.from_store - stored0} from the store, "
        f"{elapsed:.0f} s" + (f", {60 * calls / elapsed:.2f} calls/min" if calls else ""))
    if calls:
        export(f"end of {chunk.name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--judge", default=JUDGE)
    ap.add_argument("--store", type=Path, default=STORE)
    ap.add_argument("--export", type=Path, default=EXPORT)
    ap.add_argument("--export-every", type=float, default=10.0, help="minutes between exports")
    ap.add_argument("--chunks", default="", help="comma-separated chunk names (default: all, in order)")
    ap.add_argument("--limit", type=int, default=None, help="at most this many items per chunk (smoke tests)")
    ap.add_argument("--no-import", action="store_true", help="do not import --export into an empty store")
    args = ap.parse_args()
    if not args.data.is_dir():
        sys.exit(f"no data folder {args.data} (give --data)")
    wanted = [c for c in CHUNKS if not args.chunks or c.name in args.chunks.split(",")]
    unknown = set(filter(None, args.chunks.split(","))) - {c.name for c in CHUNKS}
    if unknown:
        sys.exit(f"unknown chunk(s) {', '.join(sorted(unknown))}; chunks: {', '.join(c.name for c in CHUNKS)}")
    log(f"judge {args.judge}, store {args.store}, export {args.export}, pid {os.getpid()}, "
        f"TRUSTJUDGE_THREADS={os.environ.get('TRUSTJUDGE_THREADS', '')}")
    store = Store(args.store)
    if not args.no_import and args.export.exists() and store.count() == 0:
        added, skipped, _ = import_file(args.export, store)
        log(f"imported {args.export}: {added} outputs ({skipped} already stored)")
    judge = Judge(args.judge, store=store)
    export = Exporter(args.store, args.export, 60 * args.export_every)
    try:
        for chunk in wanted:
            items = chunk.items(args.data)[: args.limit]
            run_chunk(judge, chunk, items, export)
    finally:
        judge.close()
    log("all chunks done")


if __name__ == "__main__":
    main()
