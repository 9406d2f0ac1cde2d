"""Writes store.jsonl and records.jsonl with trustjudge as it was before any-range scales, pairwise label
sets and the system option (main at 880ee12): tests/test_scales.py reruns the same judgments on today's code
and checks that the store answers every one (zero model calls) with the same records.

    PYTHONPATH=<a checkout of main>/src python tests/data/main_store/make.py
"""

import json
import tempfile
from pathlib import Path

from trustjudge import Criterion, Item, Judge, Response
from trustjudge.engine._store_io import write_export

HERE = Path(__file__).parent
ITEMS = [Item("q1", "What is 2+2?", (Response("a", "4"), Response("b", "5"), Response("c", "four"))),
         Item("q2", "Name a prime.", (Response("a", "7"), Response("b", "9")))]
CRITERIA = (Criterion("correct", "Is it right?", 2.0, ("wrong", "partly", "right")),
            Criterion("clear", "Is it clear?"))


def judge_all(j: Judge) -> list[dict]:
    rows = []
    for points in (5, 10, 100):
        rows += [r.to_dict() for r in j.run(j.score_task(points), ITEMS)]
    rows += [r.to_dict() for r in j.compare(ITEMS)]
    rows += [r.to_dict() for r in j.criteria(ITEMS, CRITERIA, scale=5)]
    rows += [r.to_dict() for r in j.criteria(ITEMS, CRITERIA, scale=10)]
    return rows


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        j = Judge("mock/hash", store=Path(tmp) / "s.sqlite")
        rows = judge_all(j)
        j.close()
        write_export(Path(tmp) / "s.sqlite", HERE / "store.jsonl")
    with open(HERE / "records.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, sort_keys=True) + "\n" for r in rows)
