"""What every recipe reader does with a released file's rows: read the file (one JSON value or JSON lines), require
a row's fields, and take its model answers; each problem an InputError naming file, line and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import InputError

SCHEMA = "the benchmark's published schema"
"""Who says a required field is there (``need``'s message): a reader of one file names it."""


def load_json_or_lines(path: Path) -> Any:
    """A JSON file's value, or a JSON lines file's rows (``.jsonl``, ``.ndjson``, or any file that is not one JSON
    value); a bad line is an InputError naming file and line. Every recipe reader reads its files with it."""
    text = path.read_bytes().decode("utf-8-sig")
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc.msg}", file=str(path), line=n) from None
    return rows


def need(row: Any, keys: tuple[str, ...], file: str, line: int, schema: str = SCHEMA) -> dict[str, Any]:
    """``row`` when it is an object holding every one of ``keys`` (``schema`` has them)."""
    if not isinstance(row, dict):
        raise InputError(f"must be an object, got {type(row).__name__}", file=file, line=line)
    for key in keys:
        if key not in row:
            raise InputError(f"is missing ({schema} has it)", file=file, line=line, field=key)
    return row


def model_answers(row: dict[str, Any], single: str, file: str, line: int, hint: str = "") -> list[dict[str, Any]]:
    """A row's model answers: ``responses`` ({model: answer}), or its one answer in the field ``single``; none is
    an InputError (``hint``: another way the reader takes them)."""
    if isinstance(row.get("responses"), dict):
        return [{"id": str(k), "system": str(k), "text": str(v)} for k, v in row["responses"].items()]
    if isinstance(row.get(single), str):
        return [{"id": "model", "text": row[single]}]
    raise InputError(f"holds no model answer: add {single!r} (the answer) or 'responses' ({{model: answer}}){hint}",
                     file=file, line=line, field=single)
