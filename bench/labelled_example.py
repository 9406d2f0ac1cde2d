"""Build the labelled example of examples/ (calibrate -> select -> cascade) from the guarantee study.

Writes, from the PandaLM test set (Apache-2.0, ../shared/data/pandalm-testset) and the study's committed
judgments (bench/results/guarantee_judgments.jsonl.gz, no model call):

  examples/labelled.jsonl        the study's PandaLM pairs of the first items, with the human majority label
  examples/new.jsonl             the pairs of the other items, labels removed (what a new batch looks like)
  examples/qwen_verdicts.jsonl   the default judge's (Qwen2.5-Coder-1.5B) stored probabilities on every pair,
                                 both presentation orders, as a recorded-verdicts file (docs/formats.md)
  examples/gpt35_verdicts.jsonl  gpt-3.5-turbo's published verdicts on the same pairs (PandaLM's judge outputs)

Run: .venv/bin/python bench/labelled_example.py   (--data DIR for another ../shared/data)
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import math
import re
from pathlib import Path
from typing import Any

from guarantee import write_recorded
from guarantee_judge import DATA, EXPORT, JUDGE, pandalm_items
from trustjudge import Item

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CALIBRATION_PAIRS = 300
"""Pairs of the first items go to labelled.jsonl until it holds at least this many; the rest are new.jsonl."""
_TAG = re.compile(r"<(response_a|response_b)>\n(.*?)\n</\1>", re.S)


def item_row(item: Item, labelled: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"id": item.id, "question": item.question}
    if item.context:
        row["context"] = item.context
    row["responses"] = [{"id": r.id, "text": r.text, **({"system": r.system} if r.system else {})}
                        for r in item.responses]
    row["pairs"] = [{"first": p.first, "second": p.second,
                     **({"human": p.human, "annotators": list(p.annotators)} if labelled else {})}
                    for p in item.pairs or ()]
    return row


def unique_pairs(item: Item) -> Item:
    """``item`` with one pair per two responses (PandaLM rates a few pairs in both orders: the first row is kept;
    the items format judges every pair in both orders anyway)."""
    seen: set[frozenset[str]] = set()
    pairs = []
    for pair in item.pairs or ():
        if frozenset((pair.first, pair.second)) not in seen:
            seen.add(frozenset((pair.first, pair.second)))
            pairs.append(pair)
    return dataclasses.replace(item, pairs=tuple(pairs))


def stored_probabilities() -> dict[tuple[str, str], list[float]]:
    """The default judge's label probabilities (A, B, tie) by the two texts shown (A's, B's)."""
    out: dict[tuple[str, str], list[float]] = {}
    with gzip.open(EXPORT, "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row["kind"] != "labels" or not row["backend"].startswith("llamacpp:"):
                continue
            shown = dict(m.groups() for m in _TAG.finditer(row["request"]["prompt"]))
            if {"response_a", "response_b"} <= shown.keys():
                out[(shown["response_a"], shown["response_b"])] = [math.exp(x) for x in row["result"]["logprobs"]]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args()
    items = [unique_pairs(it) for it in pandalm_items(args.data, 0, 460)]  # the study's PandaLM chunks, in order
    probs = stored_probabilities()
    verdicts: list[dict[str, Any]] = []
    missing = 0
    for item in items:
        text = {r.id: r.text for r in item.responses}
        for pair in item.pairs or ():
            for a, b in ((pair.first, pair.second), (pair.second, pair.first)):
                p = probs.get((text[a].strip(), text[b].strip()), probs.get((text[a], text[b])))
                if p is None:  # an empty response is never asked (unscored: empty response)
                    missing += bool(text[a].strip() and text[b].strip())
                    continue
                verdicts.append({"item_id": item.id, "a": a, "b": b,
                                 "probabilities": {"A": round(p[0], 6), "B": round(p[1], 6), "tie": round(p[2], 6)}})
    if missing:
        raise SystemExit(f"{missing} pair orders have no stored judgment of {JUDGE} in {EXPORT}")
    cut, n = 0, 0
    while n < CALIBRATION_PAIRS:
        n += len(items[cut].pairs or ())
        cut += 1
    write(EXAMPLES / "labelled.jsonl", [item_row(it, True) for it in items[:cut]])
    write(EXAMPLES / "new.jsonl", [item_row(it, False) for it in items[cut:]])
    write(EXAMPLES / "qwen_verdicts.jsonl", verdicts)
    gpt = write_recorded(args.data, "gpt-3.5-turbo", EXAMPLES / "gpt35_verdicts.tmp.jsonl")
    wanted = {(it.id, p.first, p.second) for it in items for p in it.pairs or ()}
    rows = [json.loads(line) for line in gpt.read_text().splitlines()]
    gpt.unlink()
    write(EXAMPLES / "gpt35_verdicts.jsonl", [{k: r[k] for k in ("item_id", "a", "b", "verdict")} for r in rows
                                                if (r["item_id"], r["a"], r["b"]) in wanted])
    print(f"{n} labelled pairs in {cut} items, {sum(len(it.pairs or ()) for it in items[cut:])} new pairs in "
          f"{len(items) - cut} items, {len(verdicts)} recorded orders")


def write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


if __name__ == "__main__":
    main()
