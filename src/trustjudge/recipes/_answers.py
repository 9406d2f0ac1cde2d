"""What a benchmark's evaluator sends its judge of a model's output: the answer its code extracts.

A recipe's ``[answers]`` table says, per value of an item field (``by``, SC-Arena's ``task``), how the
benchmark's code reads the answer out of a model's whole output before judging it::

    [answers]
    by = "task"
    # cell_type_annotation.py: re.search of the marker, group 1 stripped; no marker: the judge gets "Unknown"
    celltype = { pattern = '\\[Predicted_Cell_Type:\\s*([^\\]]+?)\\]', missing = "Unknown" }
    # captioning.py: the marker's group, else the whole output (``missing`` left out)
    captioning = { pattern = '\\[Captioning:\\s*([^\\]]+?)\\]' }
    # several markers (perturbation_prediction.py): each searched in the output (``append`` added to it first),
    # the judged text laid out from them; a missing one is ``missing``
    perturbation = { patterns = { up = '...', down = '...' }, append = "]", missing = "Unknown",
                     layout = "up: {up}; down: {down}" }

:func:`extract_answers` gives the items with each such response's text replaced by what is sent, and per
``(item, response)`` the record's ``answer``: the text sent and how it was found (the marker, or the fallback
where there was none). Items of other values are judged on their whole output, as before.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InputError
from ..io._items import Item

__all__ = ["extract_answers", "parse_answers"]

SPEC_KEYS = {"pattern", "patterns", "missing", "append", "layout"}


def _compile(pattern: Any, file: str, where: str) -> str:
    if not isinstance(pattern, str) or not pattern:
        raise InputError("must be a regular expression (the benchmark's answer marker)", file=file, field=where)
    try:
        re.compile(pattern)
    except re.error as exc:
        raise InputError(f"is not a valid regular expression: {exc}", file=file, field=where) from None
    return pattern


def _spec(value: str, raw: Any, file: str) -> dict[str, Any]:
    where = f"answers.{value}"
    if not isinstance(raw, dict):
        raise InputError("must be a table { pattern = '...', missing = '...' }", file=file, field=where)
    unknown = sorted(set(raw) - SPEC_KEYS)
    if unknown:
        raise InputError(f"is not an answers field (known: {', '.join(sorted(SPEC_KEYS))})", file=file,
                         field=f"{where}.{unknown[0]}")
    if ("pattern" in raw) == ("patterns" in raw):
        raise InputError("needs one of pattern (one marker) or patterns (several, with a layout)", file=file,
                         field=where)
    for key in ("missing", "append", "layout"):
        if key in raw and not isinstance(raw[key], str):
            raise InputError("must be a string", file=file, field=f"{where}.{key}")
    out = dict(raw)
    if "pattern" in raw:
        out["pattern"] = _compile(raw["pattern"], file, f"{where}.pattern")
        return out
    patterns = raw["patterns"]
    if not isinstance(patterns, dict) or not patterns:
        raise InputError("must be a table of name -> regular expression", file=file, field=f"{where}.patterns")
    for name, pattern in patterns.items():
        _compile(pattern, file, f"{where}.patterns.{name}")
    if "missing" not in raw:
        raise InputError("is missing: what the benchmark sends for a marker it does not find", file=file,
                         field=f"{where}.missing")
    layout = raw.get("layout")
    if not isinstance(layout, str) or any("{" + name + "}" not in layout for name in patterns):
        raise InputError("must place each of the patterns' names ({name})", file=file, field=f"{where}.layout")
    return out


def parse_answers(raw: Any, file: str) -> dict[str, Any]:
    """The recipe's ``[answers]`` table, checked (empty: every response is judged whole)."""
    if not raw:
        return {}
    if not isinstance(raw, dict):
        raise InputError("must be a table ([answers])", file=file, field="answers")
    by = raw.get("by")
    if not isinstance(by, str) or not re.fullmatch(r"[A-Za-z_][\w-]*", by):
        raise InputError("must name the item field that picks the extraction (task)", file=file, field="answers.by")
    specs = {str(k): _spec(str(k), v, file) for k, v in raw.items() if k != "by"}
    if not specs:
        raise InputError("names no value of answers.by (celltype = { pattern = '...' })", file=file, field="answers")
    return {"by": by, "specs": specs}


def _search(pattern: str, text: str) -> str | None:
    found = re.search(pattern, text)
    if found is None:
        return None
    return (found.group(1) if found.re.groups else found.group(0)).strip()


def _sent(spec: Mapping[str, Any], output: str) -> dict[str, Any]:
    """What the benchmark sends of ``output`` and how it was found."""
    if "pattern" in spec:
        got = _search(spec["pattern"], output + spec.get("append", ""))
        if got is not None:
            return {"sent": got, "found": "marker"}
        if "missing" in spec:
            return {"sent": spec["missing"], "found": "no marker: the benchmark's fallback"}
        return {"sent": output, "found": "no marker: the whole output"}
    parts, missing = {}, []
    for name, pattern in spec["patterns"].items():
        got = _search(pattern, output + spec.get("append", ""))
        parts[name] = spec["missing"] if got is None else got
        if got is None:
            missing.append(name)
    text = spec["layout"]
    for name, value in parts.items():
        text = text.replace("{" + name + "}", value)
    return {"sent": text, "found": "marker" if not missing else f"no marker for {', '.join(missing)}: the "
            f"benchmark's fallback {spec['missing']!r}"}


def extract_answers(answers: Mapping[str, Any], items: Sequence[Item]) \
        -> tuple[list[Item], dict[tuple[str, str], dict[str, Any]]]:
    """``items`` with each response whose item has an ``[answers]`` extraction replaced by what the benchmark
    sends its judge, and per ``(item id, response id)`` the record's ``answer`` (the text sent, how found)."""
    if not answers:
        return list(items), {}
    by, specs = answers["by"], answers["specs"]
    out: list[Item] = []
    said: dict[tuple[str, str], dict[str, Any]] = {}
    for item in items:
        value = item.fields.get(by)
        spec = specs.get(str(value)) if value is not None else None
        if spec is None:
            out.append(item)
            continue
        responses = []
        for r in item.responses:
            sent = _sent(spec, r.text)
            said[(item.id, r.id)] = {**sent, "by": f"{by}={value}"}
            responses.append(dataclasses.replace(r, text=sent["sent"]))
        out.append(dataclasses.replace(item, responses=tuple(responses)))
    return out, said
