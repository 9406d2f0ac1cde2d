"""The prompt-ensemble study's judging half: the study's pairs under the explicit-steps or rubric template
(resumable).

Judges the study's PandaLM pairs (the pairs of bench/guarantee_judge.py's pandalm chunks, rows 0-459; with
``--dataset llmbar`` / ``topical`` its LLMBar Natural / Topical-Chat pairs; both presentation orders) with the
default judge under the library's G-Eval-style steps template (src/trustjudge/templates/pairwise_steps.txt;
``--template rubric`` for pairwise_rubric.txt), in a fixed, seeded order of pairs (``--seed``, default 34), so a
later session continues the same subset: every run walks the same order and the store answers what was already
judged. After every ``--batch`` pairs (default 20) the store is exported, through the library and atomically, to
bench/results/guarantee_ensemble_judgments.jsonl.gz (steps on PandaLM; other templates and sets:
guarantee_ensemble_TEMPLATE[_DATASET]_judgments.jsonl.gz, each with its own store), and with ``--commit`` that
one file is committed; an empty store imports that export first.

The default template's judgments of the same pairs are the committed bench/results/guarantee_judgments.jsonl.gz;
bench/guarantee_ensemble_study.py compares them with zero calls.

Run (background, lowest priority):
    TRUSTJUDGE_THREADS=2 nice -n 19 /work/main/.venv/bin/python bench/guarantee_ensemble.py --commit \
        > bench/results/work/guarantee_ensemble.log 2>&1 &
    .venv/bin/python bench/guarantee_ensemble.py --judge mock/hash --limit 3 --store /tmp/e.sqlite \
        --export /tmp/e.jsonl.gz                    # smoke test: 3 pairs, the hash judge
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _common import RESULTS
from guarantee_judge import DATA, JUDGE, LLMBAR, TOPICAL, load, log, pandalm_items
from trustjudge import Item, Judge
from trustjudge.engine._store import Store
from trustjudge.engine._store_io import import_file, write_export

TEMPLATES = Path(__file__).resolve().parents[1] / "src" / "trustjudge" / "templates"
STORE = RESULTS / "work" / "guarantee_ensemble.sqlite"
EXPORT = RESULTS / "guarantee_ensemble_judgments.jsonl.gz"
"""The steps template's export (the first template of the study; other templates' files carry their name)."""
ROWS = (0, 460)
"""The PandaLM rows of the study (guarantee_judge's chunks pandalm-0-100, -100-400 and -400-460)."""
NAMES = ("steps", "rubric")
"""The study's templates beside the default one (``pairwise_NAME.txt``: :func:`template_path`)."""

DATASETS: dict[str, Callable[[Path], list[Item]]] = {
    "pandalm": lambda d: pandalm_items(d, *ROWS),
    "llmbar": lambda d: load(d / LLMBAR, "llmbar"),
    "topical": lambda d: load(d / TOPICAL, "topical-chat")[:10],
}
"""The study's pairwise sets: guarantee_judge's chunks (PandaLM rows 0-459, LLMBar Natural, Topical-Chat's first
10 dialogues), whose default-template judgments are committed."""


def paths(template: str, dataset: str = "pandalm") -> tuple[Path, Path]:
    """The scratch store and the committed export of ``template``'s judgments of ``dataset``."""
    if (template, dataset) == ("steps", "pandalm"):
        return STORE, EXPORT
    name = template if dataset == "pandalm" else f"{template}_{dataset}"
    return (RESULTS / "work" / f"guarantee_ensemble_{name}.sqlite",
            RESULTS / f"guarantee_ensemble_{name}_judgments.jsonl.gz")


def template_path(name: str) -> Path:
    return TEMPLATES / f"pairwise_{name}.txt"


def study_pairs(data: Path, seed: int, dataset: str = "pandalm") -> list[Item]:
    """The study's pairs of ``dataset``, one single-pair item each, in the seeded order (a fixed subset for any
    prefix)."""
    items = DATASETS[dataset](data)
    # an item with its pairs listed becomes one item per pair; one that lists responses only (Topical-Chat: every
    # pair of its responses is compared) stays whole
    singles = [dataclasses.replace(it, pairs=(p,)) for it in items for p in it.pairs or ()]
    singles += [it for it in items if not it.pairs]
    seen: set[tuple[str, str, str]] = set()
    unique = []
    for it in singles:
        key = (it.id, it.pairs[0].first, it.pairs[0].second) if it.pairs else (it.id, "", "")
        if key not in seen:
            seen.add(key)
            unique.append(it)
    random.Random(seed).shuffle(unique)
    return unique


def commit(path: Path, message: str) -> None:
    for _ in range(5):  # another git command in the worktree may hold the index lock for a moment
        r = subprocess.run(["git", "commit", "-q", "-m", message, "--", str(path)], cwd=path.parent,
                           capture_output=True, text=True, check=False)
        if r.returncode == 0 or "nothing" in r.stdout + r.stderr:
            return
        if "untracked" in r.stderr or "did not match" in r.stderr:
            subprocess.run(["git", "add", str(path)], cwd=path.parent, capture_output=True, check=False)
        time.sleep(3)
    log(f"commit failed: {r.stderr.strip()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--judge", default=JUDGE)
    ap.add_argument("--template", default="steps", choices=NAMES)
    ap.add_argument("--dataset", default="pandalm", choices=list(DATASETS))
    ap.add_argument("--store", type=Path, default=None, help="default: the template's scratch store")
    ap.add_argument("--export", type=Path, default=None, help="default: the template's export")
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--batch", type=int, default=20, help="pairs between exports (and commits)")
    ap.add_argument("--limit", type=int, default=None, help="at most this many pairs")
    ap.add_argument("--commit", action="store_true", help="git-commit the export after each batch")
    args = ap.parse_args()
    if not args.data.is_dir():
        sys.exit(f"no data folder {args.data} (give --data)")
    pairs = study_pairs(args.data, args.seed, args.dataset)[: args.limit]
    store_path, export_path = paths(args.template, args.dataset)
    args.store, args.export = args.store or store_path, args.export or export_path
    args.store.parent.mkdir(parents=True, exist_ok=True)
    store = Store(args.store)
    if args.export.exists() and store.count() == 0:
        added, skipped, _ = import_file(args.export, store)
        log(f"imported {args.export}: {added} outputs ({skipped} already stored)")
    log(f"judge {args.judge}, template {args.template}, {len(pairs)} pairs (seed {args.seed}), store {args.store}, "
        f"pid {os.getpid()}, TRUSTJUDGE_THREADS={os.environ.get('TRUSTJUDGE_THREADS', '')}")
    judge = Judge(args.judge, store=store, templates={"pairwise": template_path(args.template)})
    t0 = time.perf_counter()
    try:
        for start in range(0, len(pairs), args.batch):
            calls0 = judge.stats.label_calls
            t1 = time.perf_counter()
            n = sum(1 for _ in judge.compare(pairs[start:start + args.batch]))
            calls = judge.stats.label_calls - calls0
            done = start + n
            log(f"pairs {start}-{done - 1}: {calls} model calls, {time.perf_counter() - t1:.0f} s "
                f"({(time.perf_counter() - t1) / max(n, 1):.1f} s/pair); {done}/{len(pairs)} done, "
                f"{time.perf_counter() - t0:.0f} s in all")
            if calls:
                outputs = write_export(args.store, args.export)
                log(f"export: {outputs} outputs -> {args.export}")
                if args.commit:
                    commit(args.export, f"bench: the {args.template}-template ensemble study, {args.dataset} pairs "
                                        f"0-{done - 1} of the seed-{args.seed} order judged ({outputs} judgments "
                                        "exported)")
    finally:
        judge.close()
    log("all pairs done")


if __name__ == "__main__":
    main()
