"""Recipes that judge what a model's code drew (``[input] execute = "response"``: VisPlotBench).

Each response is an attempt: its code (the last fenced ``python`` block, else the whole text) runs in the
sandbox (:mod:`trustjudge.execute`, results kept in the judgment store, so a rerun executes nothing), and the
PNG it wrote becomes the response's image, judged without the code. An attempt that fails, or writes no PNG,
is judged by nothing: its record is ``empty_response`` and its failure kind is kept (``execution``).

The metric then reads one row per task, the best of its attempts (self-debug keeps the best of k): whether any
attempt executed, and the best attempt's expected score and label distribution (:func:`best_of_attempts`).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from .._images import Image, image_from_bytes
from ..engine._store import Store
from ..errors import InputError
from ..execute import ExecutionResult, LocalExecutor, StoredExecutor
from ..io._items import Item

__all__ = ["NO_IMAGE", "best_of_attempts", "code_of", "execute_items"]

NO_IMAGE = "no_image"
"""The failure kind of an attempt that ran but wrote no PNG (beside the executor's ``STATUSES``)."""
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


def code_of(text: str) -> str:
    """The code of an attempt: its last fenced block (```python ... ```), else the whole text."""
    blocks = _FENCE.findall(text)
    return blocks[-1] if blocks else text


def _kind(result: ExecutionResult) -> tuple[str, Image | None]:
    if not result.ok:
        return result.status, None
    png = result.file(".png")
    if png is None:
        return NO_IMAGE, None
    try:
        return "ok", image_from_bytes(png.data, f"{png.path} (written by the attempt)")
    except InputError:
        return NO_IMAGE, None  # what it wrote is not an image Pillow reads


def execute_items(items: Sequence[Item], store: Store, executor: Any = None) -> tuple[list[Item], dict[str, Any]]:
    """Every response's code run (through the store); the items with each passing attempt's PNG as its image
    and its text cleared (the plot is judged, not the code), a failed one with neither; and the execution
    facts: per ``(item, response)`` its kind (``ok`` or a failure kind) and a summary."""
    runner = StoredExecutor(executor if executor is not None else LocalExecutor(), store)
    kinds: dict[tuple[str, str], str] = {}
    out = []
    for item in items:
        responses = []
        for r in item.responses:
            kind, image = _kind(runner.run(code_of(r.text)))
            kinds[(item.id, r.id)] = kind
            responses.append(dataclasses.replace(r, text="", images=(image,) if image is not None else ()))
        out.append(dataclasses.replace(item, responses=tuple(responses)))
    failures = Counter(k for k in kinds.values() if k != "ok")
    first = [next(iter(kinds[(item.id, r.id)] for r in item.responses), "") for item in items]
    summary = {"attempts": len(kinds), "executed": sum(1 for k in kinds.values() if k == "ok"),
               "runs": runner.executed, "from_store": len(kinds) - runner.executed,
               "tasks": len(items),
               "pass_rate_first": sum(1 for k in first if k == "ok") / len(items) if items else None,
               "pass_rate_any": (sum(1 for item in items if any(kinds[(item.id, r.id)] == "ok"
                                                                for r in item.responses)) / len(items)
                                 if items else None),
               "failures": dict(sorted(failures.items()))}
    return out, {"kinds": kinds, "summary": summary}


def _expected(record: Mapping[str, Any]) -> float | None:
    value = (record.get("scores") or {}).get("expected")
    return float(value) if isinstance(value, (int, float)) else None


def best_of_attempts(records: Sequence[Mapping[str, Any]], kinds: Mapping[tuple[str, str], str]) \
        -> list[dict[str, Any]]:
    """One row per task: ``executed`` (any attempt ran and drew), ``attempts``, the best attempt (highest
    expected score among those judged) and its record's score and distribution; a task none of whose attempts
    drew scores 0 (the benchmark's convention for code that does not run)."""
    by_item: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        by_item.setdefault(str(r.get("item_id")), []).append(r)
    rows = []
    for item_id, attempts in by_item.items():
        judged = [r for r in attempts if kinds.get((item_id, str(r.get("response_id")))) == "ok"
                  and r.get("unscored") is None and _expected(r) is not None]
        best = max(judged, key=lambda r: _expected(r) or 0.0, default=None)
        executed = any(kinds.get((item_id, str(r.get("response_id")))) == "ok" for r in attempts)
        row: dict[str, Any] = {"item_id": item_id, "response_id": "best", "system": attempts[0].get("system"),
                               "executed": executed, "attempts": len(attempts), "unscored": None}
        if best is not None:
            row.update(best_response=best.get("response_id"), scores=best.get("scores"),
                       distribution=best.get("distribution"), label_mass=best.get("label_mass"))
        elif executed:  # it drew, but no judgment of it was scored (the judge's own failure): unscored
            row["unscored"] = next((r.get("unscored") for r in attempts if r.get("unscored")), "unscored")
        rows.append(row)
    return rows

