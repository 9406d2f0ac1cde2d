"""Items judged with other options of the recipe's mode: ``[groups.NAME]`` (LiveDRBench grades the keys of its
flights and novel-datasets items 0-3 with its own prompt, and matches the other categories' claims with
another)::

    [groups]
    by = "subset"                                   # the item field that picks the group
    [groups.keyed]
    values = ["flights", "novel-datasets-"]          # its values (one ending in "-": a prefix)
    options = { match_labels = "3=1,2=1,1=0,0=0", templates = { match = "grade.txt" } }
    [groups.keyed.benchmark]                         # optional: the benchmark's prompt of these items, read
    kind = "match"                                   # with --benchmark-dir as [benchmark_prompt] is
    file = "src/evals/datasets_flights.py"
    ...

An item of no group is judged with the recipe's own options. Each record says which group judged it and with
which prompt.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..io._items import Item
from ._prompt import parse_benchmark_prompt

__all__ = ["group_items", "merged_options", "parse_groups"]

GROUP_FIELDS = {"values", "options", "benchmark"}


def parse_groups(raw: Any, path: Path, options: Callable[[Mapping[str, Any], str], dict[str, Any]]) \
        -> tuple[str, dict[str, dict[str, Any]]]:
    """``[groups]``: its ``by`` and per group its values, its options (read by ``options(raw, prefix)``, as the
    recipe's) and its benchmark prompt (checked as ``[benchmark_prompt]``; empty: none)."""
    file = str(path)
    if not raw:
        return "", {}
    if not isinstance(raw, dict):
        raise InputError("must be a table ([groups])", file=file, field="groups")
    by = raw.get("by")
    if not isinstance(by, str) or not re.fullmatch(r"[A-Za-z_][\w-]*", by):
        raise InputError("must name the item field that picks the group (subset)", file=file, field="groups.by")
    out: dict[str, dict[str, Any]] = {}
    for name, table in raw.items():
        if name == "by":
            continue
        where = f"groups.{name}"
        if not isinstance(table, dict):
            raise InputError(f"must be a table ([{where}])", file=file, field=where)
        unknown = sorted(set(table) - GROUP_FIELDS)
        if unknown:
            raise InputError(f"is not a group field (known: {', '.join(sorted(GROUP_FIELDS))})", file=file,
                             field=f"{where}.{unknown[0]}")
        values = table.get("values")
        if not isinstance(values, list) or not values or not all(isinstance(v, str) and v for v in values):
            raise InputError("must list the values of groups.by this group judges", file=file,
                             field=f"{where}.values")
        opts = table.get("options", {})
        if not isinstance(opts, dict):
            raise InputError("must be a table of the mode's options", file=file, field=f"{where}.options")
        benchmark: dict[str, Any] = {}
        if "benchmark" in table:
            try:
                benchmark = parse_benchmark_prompt(table["benchmark"], path)
            except InputError as exc:
                raise InputError(exc.reason, file=file,
                                 field=str(exc.field).replace("benchmark_prompt", f"{where}.benchmark")) from None
        out[str(name)] = {"values": tuple(values), "options": options(opts, f"{where}."), "benchmark": benchmark}
    if not out:
        raise InputError("names no group ([groups.NAME] with its values and options)", file=file, field="groups")
    return by, out


def _of(groups: Mapping[str, Mapping[str, Any]], value: Any) -> str | None:
    if value is None:
        return None
    text = str(value)
    for name, group in groups.items():
        if any(text == v or (v.endswith("-") and text.startswith(v)) for v in group["values"]):
            return name
    return None


def group_items(by: str, groups: Mapping[str, Mapping[str, Any]], items: Sequence[Item]) \
        -> list[tuple[str | None, list[Item]]]:
    """The items by the group that judges them (``None``: the recipe's own options), in file order."""
    out: dict[str | None, list[Item]] = {}
    for item in items:
        out.setdefault(_of(groups, item.fields.get(by)), []).append(item)
    return list(out.items())


def merged_options(options: Mapping[str, Any], group: Mapping[str, Any]) -> dict[str, Any]:
    """The recipe's options with the group's over them (stage templates merged stage by stage)."""
    own = dict(group["options"])
    templates = {**(options.get("templates") or {}), **(own.pop("templates", None) or {})}
    return {**options, **own, **({"templates": templates} if templates else {})}
