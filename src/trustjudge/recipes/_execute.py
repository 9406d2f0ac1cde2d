"""Recipes that judge what a model's code drew (``[input] execute = "response"``: VisPlotBench).

Each response is an attempt: its code (the last fenced ``python`` block, else the whole text) runs in the
sandbox (:mod:`trustjudge.execute`, results kept in the judgment store, so a rerun executes nothing), and the
PNG it wrote becomes the response's image, judged without the code. An attempt that fails, or writes no PNG,
is judged by nothing: its record is ``empty_response`` and its failure kind is kept (``execution``). Items read
from the benchmark's own results file (``--format visplotbench``) were executed by the benchmark: their item
field ``execution`` gives each attempt's kind (``ok``, ``error``, ``no_image``) and nothing runs here.

The metric then reads one row per task (:func:`attempt_rows`), as VisPlotBench's self-debug statistics do
(``vis_judge.py`` ``calculate_self_debug_stats``: the latest attempt, the benchmark retrying only until one
runs): the first attempt that executed and drew, its score and label distribution; 0 where none drew.
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

__all__ = ["KINDS_FIELD", "NO_IMAGE", "attempt_rows", "code_of", "execute_items", "given_kinds"]

NO_IMAGE = "no_image"
"""The failure kind of an attempt that ran but wrote no PNG (beside the executor's ``STATUSES``)."""
KINDS_FIELD = "execution"
"""The item field that gives, comma-separated in response order, each attempt's kind where the benchmark ran it."""
KNOWN_KINDS = ("ok", "error", NO_IMAGE)
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


def given_kinds(item: Item, file: str | None = None) -> list[str] | None:
    """The attempts' kinds the item carries (the benchmark executed them), checked; ``None``: none given."""
    given = item.fields.get(KINDS_FIELD)
    if given is None:
        return None
    kinds = [k.strip() for k in str(given).split(",")]
    if len(kinds) != len(item.responses) or any(k not in KNOWN_KINDS for k in kinds):
        raise InputError(f"must list one kind ({', '.join(KNOWN_KINDS)}) per response, in order: {len(item.responses)} "
                         f"responses, got {given!r}", file=file, line=item.line, field=KINDS_FIELD)
    return kinds


def execute_items(items: Sequence[Item], store: Store, executor: Any = None) -> tuple[list[Item], dict[str, Any]]:
    """Every response's code run (through the store); the items with each passing attempt's PNG as its image
    and its text cleared (the plot is judged, not the code), a failed one with neither; and the execution
    facts: per ``(item, response)`` its kind (``ok`` or a failure kind) and a summary. An item whose field
    ``execution`` gives its attempts' kinds (the benchmark ran them) is kept as it is: nothing runs."""
    runner = StoredExecutor(executor if executor is not None else LocalExecutor(), store)
    kinds: dict[tuple[str, str], str] = {}
    out = []
    for item in items:
        given = given_kinds(item)
        if given is not None:
            kinds.update({(item.id, r.id): k for r, k in zip(item.responses, given)})
            out.append(item)
            continue
        responses = []
        for r in item.responses:
            kind, image = _kind(runner.run(code_of(r.text)))
            kinds[(item.id, r.id)] = kind
            responses.append(dataclasses.replace(r, text="", images=(image,) if image is not None else ()))
        out.append(dataclasses.replace(item, responses=tuple(responses)))
    failures = Counter(k for k in kinds.values() if k != "ok")
    passed = [[kinds[(item.id, r.id)] == "ok" for r in item.responses] for item in items]
    # print_exec_pass.py: "Init" (the first attempt) and "Post A<k>" (after debug attempt k), each over all tasks
    by_attempt = [sum(1 for p in passed if any(p[:j + 1])) / len(items) for j in range(max(map(len, passed),
                                                                                          default=0))]
    from_file = sum(len(item.responses) for item in items if item.fields.get(KINDS_FIELD) is not None)
    summary = {"attempts": len(kinds), "executed": sum(1 for k in kinds.values() if k == "ok"),
               "runs": runner.executed, "from_store": len(kinds) - from_file - runner.executed, "from_file": from_file,
               "tasks": len(items), "pass_rate_first": by_attempt[0] if by_attempt else None,
               "pass_rate_any": by_attempt[-1] if by_attempt else None, "pass_rate_by_attempt": by_attempt,
               "failures": dict(sorted(failures.items()))}
    return out, {"kinds": kinds, "summary": summary}


def _expected(record: Mapping[str, Any]) -> float | None:
    value = (record.get("scores") or {}).get("expected")
    return float(value) if isinstance(value, (int, float)) else None


def attempt_rows(records: Sequence[Mapping[str, Any]], kinds: Mapping[tuple[str, str], str]) \
        -> list[dict[str, Any]]:
    """One row per task: ``executed`` (an attempt ran and drew), ``attempts``, and the first attempt that drew
    with its record's score and distribution: the one VisPlotBench's self-debug statistics read (it retries a
    task only until an attempt runs and takes the latest attempt's score). A task none of whose attempts drew
    scores 0 (the benchmark's ``len(plots_generated) == 0`` and ``fillna(0)``); one whose drawn attempt the judge
    left unscored keeps the reason (``judge_unscored``): it passed, and its score is unscored (or the benchmark's
    0 for an unparsed reply, the metric's ``unparsed_score``)."""
    by_item: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        by_item.setdefault(str(r.get("item_id")), []).append(r)
    rows = []
    for item_id, attempts in by_item.items():
        drawn = next((r for r in attempts if kinds.get((item_id, str(r.get("response_id")))) == "ok"), None)
        row: dict[str, Any] = {"item_id": item_id, "response_id": "task", "system": attempts[0].get("system"),
                               "executed": drawn is not None, "attempts": len(attempts), "unscored": None}
        if drawn is not None and drawn.get("unscored") is None and _expected(drawn) is not None:
            row.update(judged_response=drawn.get("response_id"), scores=drawn.get("scores"),
                       distribution=drawn.get("distribution"), label_mass=drawn.get("label_mass"))
        elif drawn is not None:  # it drew, but its judgment was not scored: the pass rate counts it, a score not
            row["judge_unscored"] = drawn.get("unscored") or "unscored"
        rows.append(row)
    return rows
