"""Dataset formats: which reader a file goes to, guessed from its content or named.

Supported formats (``FORMATS``):

* ``items``: trustjudge's own JSONL / CSV (see :mod:`trustjudge.io._files`).
* ``pandalm``, ``llmbar``, ``topical-chat``, ``topical-chat-criteria``, ``qags``, ``summhay``,
  ``trustjudge-demo``: public judge-evaluation datasets in their own formats, read by
  :mod:`trustjudge.io._datasets` (which says how each becomes items). ``topical-chat-criteria`` is not
  auto-detected (the file is the ``topical-chat`` one).
* ``parquet``: a Parquet table (read by pyarrow, the ``data`` extra), in trustjudge's fields or another
  schema through a column mapping (:mod:`trustjudge.io._frames`).
* ``datasets``: a Hugging Face ``datasets`` dataset saved on disk (``save_to_disk`` folder), or a local
  .parquet/.json/.jsonl/.csv/.arrow file read by ``datasets`` (the ``datasets`` extra; never the hub).

With a column mapping (``mapping=``, ``--map``), ``items`` files (JSON lines, a JSON array, CSV) are read as
tables in another schema too.

Bad rows come out as :class:`InputError` values (not raised) so callers can skip them; a file that
cannot be read at all raises. Subsets of the items for a study: :mod:`trustjudge.io._subsets`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from . import _datasets, _frames
from ._files import _array_records, _jsonl_records, iter_items, load_array
from ._items import Item, looks_like_item
from ..errors import ConfigError, InputError

FORMATS = ("items", "pandalm", "llmbar", "topical-chat", "topical-chat-criteria", "qags", "summhay",
           "trustjudge-demo", "parquet", "datasets")
TABLE_FORMATS = ("items", "parquet", "datasets")
"""The formats a column mapping applies to."""

_Adapter = Callable[[Path, list[Any], list[str]], Iterator[Item | InputError]]


_ARRAY_ADAPTERS: dict[str, _Adapter] = {
    "pandalm": _datasets.pandalm, "llmbar": _datasets.llmbar, "topical-chat": _datasets.topical_chat,
    "topical-chat-criteria": _datasets.topical_chat_criteria, "summhay": _datasets.summhay,
}
"""The readers of the formats whose file is one JSON array of rows (decoded whole)."""


_SIGNATURES = (("pandalm", {"annotator1"}), ("llmbar", {"output_1", "output_2", "label"}),
               ("topical-chat", {"system_output", "scores"}),
               ("summhay", {"summary", "reference_insights", "annotation"}))


def _detect(path: Path) -> tuple[str, list[Any] | None]:
    with path.open("rb") as fh:
        head = fh.read(4096).decode("utf-8-sig", errors="replace").lstrip()
    # A .jsonl file is one value per line, even when its first line is a JSON array.
    if path.suffix.lower() not in (".csv", ".jsonl", ".ndjson") and head.startswith("["):
        try:
            rows = load_array(path)
        except InputError:
            first_line = next(_jsonl_records(path), None)
            if first_line is not None and not isinstance(first_line[1], InputError):
                return "items", None  # JSON lines whose first line is an array: reported line by line
            # An array of items with a bad element further on: the items reader reports each element.
            text = path.read_bytes().decode("utf-8-sig", errors="replace")
            first_row = next(_array_records(str(path), text), None)
            if first_row is not None and looks_like_item(first_row[1]):
                return "items", None
            raise
        first = rows[0] if rows else None
        for fmt, keys in _SIGNATURES:
            if isinstance(first, dict) and keys <= first.keys():
                return fmt, rows
        if not rows or looks_like_item(first):
            return "items", None  # an array of trustjudge items (read by iter_items, with true line numbers)
        raise InputError("cannot tell the dataset format of this JSON array (its first row looks like no "
                         "known dataset, nor like a trustjudge item with question and responses); pass the "
                         f"format explicitly, one of {', '.join(FORMATS)}", file=str(path))
    for _, record in _jsonl_records(path):
        if isinstance(record, dict) and "answers" in record and "question_id" in record:
            return "trustjudge-demo", None
        if isinstance(record, dict) and "article" in record and "summary_sentences" in record:
            return "qags", None
        break
    return "items", None


def detect_format(path: str | Path) -> str:
    """Guess a file's dataset format from its content.

    Args:
        path: The dataset file.

    Returns:
        One of :data:`FORMATS`.

    Raises:
        InputError: The file is missing, or it is a JSON array that is invalid or matches no format.
    """
    p = path if isinstance(path, Path) else Path(path)  # a Path subclass keeps its display name
    if p.is_dir():
        return "datasets"
    if not p.is_file():
        raise InputError("no such file", file=str(p))
    return _frames.table_format(p) or _detect(p)[0]


def _checked(values: Iterator[Item | InputError], file: str,
             min_responses: int) -> Iterator[Item | InputError]:
    seen: set[str] = set()
    for value in values:
        if isinstance(value, Item):
            if len(value.responses) < min_responses:
                value = InputError(f"needs at least {min_responses} responses, has {len(value.responses)}",
                                   file=file, line=value.line, field="responses")
            elif value.id in seen:
                value = InputError(f"duplicate item id {value.id!r}", file=file, line=value.line, field="id")
            else:
                seen.add(value.id)
        yield value


def _table(p: Path, fmt: str, mapping: Mapping[str, str] | str | None) -> Iterator[Item | InputError]:
    """The items of a table file in ``fmt`` (one of :data:`TABLE_FORMATS`) through a column mapping."""
    columns: list[str] | None
    if fmt == "parquet":
        columns, rows = _frames.parquet_table(p)
    elif fmt == "datasets":
        columns, rows = _frames.dataset_table(p)
    else:
        columns, rows = _frames.row_table(p)
    return _frames.table_items(str(p), rows, mapping, columns=columns)


def iter_dataset(path: str | Path, fmt: str = "auto", *, min_responses: int = 1,
                 warnings: list[str] | None = None,
                 mapping: Mapping[str, str] | str | None = None) -> Iterator[Item | InputError]:
    """Read a dataset file in one of :data:`FORMATS` as trustjudge items.

    The file is checked (and, for JSON arrays, decoded) when this is called; the rows are then
    streamed. Bad rows come out as :class:`InputError` values so the caller can report and skip them.

    Args:
        path: The dataset file.
        fmt: One of :data:`FORMATS`, or ``"auto"`` to detect it from the file's content.
        min_responses: Items with fewer responses come out as :class:`InputError` instead.
        warnings: If given, notes about rows that loaded with a caveat are appended to it (e.g. a
            PandaLM row comparing two identical texts, whose pair is skipped).
        mapping: A column mapping for a table in another schema, ``{field: column}`` or
            ``"question=prompt,response=output"`` (see :mod:`trustjudge.io._frames`): with it an ``items``
            file is read as such a table; ``parquet`` and ``datasets`` tables are read through it (or
            through their columns named like trustjudge's fields) anyway.

    Returns:
        An iterator of :class:`Item` or :class:`InputError` values, in file order.

    Raises:
        ConfigError: ``fmt`` is not a known format, or a mapping is given for a format it does not apply
            to, or is malformed.
        InputError: The file is missing, is not valid JSON (for JSON-array formats), or its format
            cannot be detected; a mapped column is not in the table.
        PrerequisiteError: Parquet needs pyarrow (the ``data`` extra), ``datasets`` the ``datasets`` extra.
    """
    if fmt != "auto" and fmt not in FORMATS:
        raise ConfigError(f"unknown dataset format {fmt!r}: use 'auto' or one of {', '.join(FORMATS)}")
    if mapping is not None and fmt not in ("auto", *TABLE_FORMATS):
        raise ConfigError(f"a column mapping (--map) applies to the formats {', '.join(TABLE_FORMATS)}, "
                          f"not to {fmt}")
    p = path if isinstance(path, Path) else Path(path)  # a Path subclass keeps its display name
    if p.is_dir() and fmt in ("auto", "datasets"):
        return _checked(_table(p, "datasets", mapping), str(p), min_responses)
    if not p.is_file():
        raise InputError("is a folder (a datasets folder is read with --format datasets or auto)"
                         if p.is_dir() else "no such file", file=str(p))
    rows: list[Any] | None = None
    if fmt == "auto":
        table = _frames.table_format(p)
        if table is not None or mapping is not None:
            fmt = table or "items"
        else:
            fmt, rows = _detect(p)
    if fmt in ("parquet", "datasets") or (fmt == "items" and mapping is not None):
        return _checked(_table(p, fmt, mapping), str(p), min_responses)
    if fmt == "items":
        return iter_items(p, min_responses=min_responses)
    if fmt == "trustjudge-demo":
        return _checked(_datasets.trustjudge_demo(p), str(p), min_responses)
    if fmt == "qags":
        return _checked(_datasets.qags(p), str(p), min_responses)
    if rows is None:
        rows = load_array(p)
    notes = warnings if warnings is not None else []
    return _checked(_ARRAY_ADAPTERS[fmt](p, rows, notes), str(p), min_responses)


__all__ = ["FORMATS", "TABLE_FORMATS", "detect_format", "iter_dataset"]
