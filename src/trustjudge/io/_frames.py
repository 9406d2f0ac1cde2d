"""Tables in: other people's tables read as items (records written as tables: :mod:`trustjudge.io._tables`).

In: a table in someone else's schema (Parquet, a Hugging Face ``datasets`` dataset, JSON / JSON lines / CSV)
is judged as it is, through a column mapping ``{field: column}`` (``--map question=prompt,response=output``).
Each row is one of:

* one response: ``response`` (its text) with the item's ``question`` and optional ``id``, ``response_id``,
  ``system``, ``human_score``, ``context``, ``reference``...; rows with the same ``id`` make one item (in the
  order of their first row), and without an ``id`` column each row is an item of its own (``row-N``);
* a flat pair: ``response_a``, ``response_b`` and optional ``label``, ``system_a``, ``system_b``;
* a whole item: a ``responses`` column holding ``{id, text, ...}`` objects (and optionally ``pairs``).

Columns already named like a field (:data:`TARGETS`) are used as they are; mapping a field to nothing
(``context=``) ignores such a column. A column may be a dotted path into a nested one (``meta.prompt``),
and a float NaN (pandas' missing value) counts as missing. The built rows go through the same validation
as a JSON line (:func:`~trustjudge.io._items.parse_record`); every problem names the file, the row
(1-based; the line of a JSON-lines or CSV file) and the column.

Out (records written as tables): :mod:`trustjudge.io._tables`.

pyarrow and pandas (the ``data`` extra) and ``datasets`` (the ``datasets`` extra) are imported only when
used; a missing one is a :class:`~trustjudge.errors.PrerequisiteError` naming the extra.
"""

from __future__ import annotations

import importlib
import math
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputError, pip_dependency_error
from ._files import _csv_rows, _jsonl_records, decode_json, left_out
from ._items import Item, parse_record

ITEM_TARGETS = ("id", "question", "context", "reference", "profile", "knowledge", "evidence", "criteria",
                "checklist")
RESPONSE_TARGETS = {"response": "text", "response_id": "id", "system": "system", "human_score": "human_score",
                    "human_criteria": "human_criteria", "human_checks": "human_checks"}
"""The fields of a one-response row, and the name each has in an item's ``responses`` entries."""
PAIR_TARGETS = ("response_a", "response_b", "label", "system_a", "system_b")
NESTED_TARGETS = ("responses", "pairs")
TARGETS = (*ITEM_TARGETS, *RESPONSE_TARGETS, *PAIR_TARGETS, *NESTED_TARGETS)
"""The fields a column can be mapped to."""
PARQUET_SUFFIXES = (".parquet", ".pq")
DATASETS_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".json": "json", ".jsonl": "json",
                     ".ndjson": "json", ".csv": "csv", ".tsv": "csv", ".arrow": "arrow"}
_BATCH = 1024
_RESPONSE_FIELD = {v: k for k, v in RESPONSE_TARGETS.items()}
_HEAD = re.compile(r"^([^.\[]+)(.*)$", re.S)


# -- optional dependencies ---------------------------------------------------------------------------------


def _import(module: str, feature: str, packages: list[str], extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise pip_dependency_error(feature, packages, extra) from None


def _pyarrow(feature: str) -> tuple[Any, Any]:
    """``(pyarrow, pyarrow.parquet)``."""
    return (_import("pyarrow", feature, ["pyarrow"], "data"), _import("pyarrow.parquet", feature, ["pyarrow"], "data"))


def _datasets() -> Any:
    """The ``datasets`` package, told never to contact the Hugging Face hub (only local files are read)."""
    if "datasets" not in sys.modules:  # the library reads these once, when it is imported
        os.environ["HF_DATASETS_OFFLINE"] = "1"
        os.environ["HF_HUB_OFFLINE"] = "1"
    return _import("datasets", "Reading Hugging Face datasets", ["datasets"], "datasets")


# -- column mappings ---------------------------------------------------------------------------------------


def parse_mapping(spec: str | Mapping[str, str] | Iterable[str] | None) -> dict[str, str]:
    """A column mapping ``{field: column}`` from ``"question=prompt,response=output"`` (or several such
    strings, or a mapping). An empty column (``context=``) means: ignore the column of that name.

    Raises:
        ConfigError: an entry is not ``field=column``, names no field of :data:`TARGETS`, or repeats one.
    """
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        entries = [(str(k), str(v) if v is not None else "") for k, v in spec.items()]
    else:
        texts = [spec] if isinstance(spec, str) else list(spec)
        entries = []
        for text in texts:
            for part in (p.strip() for p in text.split(",")):
                if not part:
                    continue
                if "=" not in part:
                    raise ConfigError(f"column mapping entry {part!r} is not field=column "
                                      "(e.g. question=prompt,response=output)")
                target, source = part.split("=", 1)
                entries.append((target.strip(), source.strip()))
    out: dict[str, str] = {}
    for target, source in entries:
        if target not in TARGETS:
            raise ConfigError(f"cannot map a column to {target!r}: the fields are {', '.join(TARGETS)}")
        if target in out:
            raise ConfigError(f"the column mapping names {target!r} twice")
        out[target] = source
    return out


def _lookup(row: Mapping[str, Any], column: str) -> Any:
    """A row's value of ``column`` (or of a dotted path into nested objects); NaN and absence are ``None``."""
    if column in row:
        value = row[column]
    else:
        value = row
        for part in column.split("."):
            if not isinstance(value, Mapping) or part not in value:
                return None
            value = value[part]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _has_column(columns: Iterable[str], column: str) -> bool:
    names = set(columns)
    return column in names or column.split(".", 1)[0] in names


def _ident(value: Any) -> Any:
    """An id read from a float column (pandas makes integer columns with gaps float) as an integer."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class _Columns:
    """Where each field comes from: the mapping given, then columns named like a field."""

    def __init__(self, name: str, mapping: Mapping[str, str], columns: Sequence[str] | None,
                 labels: Sequence[str] | None = None) -> None:
        self.name, self.given = name, dict(mapping)
        self.labels = labels
        """Each row's own name (an in-memory table's index), by row number from 1; ``None``: ``row-N``."""
        self.known = columns is not None
        self.source: dict[str, str] = {t: c for t, c in mapping.items() if c}
        for target in TARGETS:
            if target not in mapping and (columns is None or target in columns):
                self.source[target] = target
        if columns is not None:
            self.check(columns)

    def check(self, columns: Sequence[str]) -> None:
        """Refuse a mapped column the table lacks, or a table with no question or response column."""
        shown = ", ".join(columns[:40]) + (", ..." if len(columns) > 40 else "")
        for target, column in self.given.items():
            if column and not _has_column(columns, column):
                raise InputError(f"no such column (mapped to {target}; the columns are: {shown})", file=self.name,
                                 field=column)
        if not any(t in self.source for t in ("response", "response_a", "response_b", "responses")):
            raise InputError("has no response column: map one with --map response=COLUMN (or response_a= and "
                             f"response_b= for pairs); the columns are: {shown}", file=self.name)
        if "question" not in self.source:
            raise InputError(f"has no question column: map one with --map question=COLUMN; the columns are: {shown}",
                             file=self.name)

    def values(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The row's value of every field it has."""
        out = {}
        for target, column in self.source.items():
            value = _lookup(row, column)
            if value is not None:
                out[target] = _ident(value) if target in ("id", "response_id") else value
        return out

    def column(self, target: str) -> str:
        return self.source.get(target, target)

    def label(self, line: int) -> str | None:
        """The source's own index of row ``line`` (from 1), where it has one."""
        if self.labels is None or not 0 < line <= len(self.labels):
            return None
        return self.labels[line - 1]

    def locate(self, exc: InputError, lines: Sequence[int] | None = None) -> InputError:
        """``exc`` (raised on a built record) re-addressed to the row and column it came from; ``lines``: the
        rows of a grouped item's responses, in order."""
        field, line = exc.field or "", exc.line
        grouped = re.match(r"^responses\[(\d+)\]\.?(.*)$", field) if lines is not None else None
        if grouped and lines is not None:
            k = int(grouped.group(1))
            line = lines[k] if k < len(lines) else line
            head = _HEAD.match(grouped.group(2))
            if head and head.group(1) in _RESPONSE_FIELD:
                field = self.column(_RESPONSE_FIELD[head.group(1)]) + head.group(2)
        else:
            head = _HEAD.match(field)
            if head and head.group(1) in TARGETS:
                field = self.column(head.group(1)) + head.group(2)
        return InputError(exc.reason, file=self.name, line=line, field=field or None)


# -- rows to items -----------------------------------------------------------------------------------------

Rows = Iterable[tuple[int, "Mapping[str, Any] | InputError"]]
"""``(row number, row or the problem that row has)``, in file order."""


def _peek_columns(name: str, mapping: Mapping[str, str], rows: Rows) -> Iterator[tuple[int, Any]]:
    """Rows of a file without a fixed schema (JSON lines), after checking that each mapped column is in some
    row: rows are read ahead only until each is found (on a well-formed file, the first row)."""
    wanted = {c for c in mapping.values() if c}
    head: list[tuple[int, Any]] = []
    it = iter(rows)
    while wanted:
        entry = next(it, None)
        if entry is None:
            column = sorted(wanted)[0]
            raise InputError(f"no row has this column (mapped to {next(t for t, c in mapping.items() if c == column)})",
                             file=name, field=column)
        head.append(entry)
        if isinstance(entry[1], Mapping):
            wanted = {c for c in wanted if not _has_column(entry[1], c)}
    yield from head
    yield from it


def table_items(name: str, rows: Rows, mapping: Mapping[str, str] | str | None = None, *,
                columns: Sequence[str] | None = None, labels: Sequence[str] | None = None
                ) -> Iterator[Item | InputError]:
    """The items of a table's rows, through a column mapping (see the module docstring).

    Args:
        name: The file's name, for errors.
        rows: ``(row number, row)`` pairs; a row that could not be read is an :class:`InputError`.
        mapping: ``{field: column}`` or ``"field=column,..."``.
        columns: The table's columns where the file has a schema: checked now (a mapped column that is not
            there, or no question or response column, raises); ``None`` (JSON lines): checked against the
            rows, when the iterator starts.
        labels: Each row's index in an in-memory source (a DataFrame's index, a list's position), by row
            number from 1: the id of an item without an id column (instead of ``row-N``), and of a response
            grouped by id without a ``response_id`` column; a record then names its source row.

    Returns:
        Items and per-row :class:`InputError` values, in the order of each item's first row.

    Raises:
        ConfigError: The mapping is malformed.
        InputError: A mapped column is not in the table, or the table has no question or response column.
    """
    given = parse_mapping(mapping)
    cols = _Columns(name, given, columns, labels)
    if columns is None:
        rows = _peek_columns(name, given, rows)
    return _items(cols, rows)


def _items(cols: _Columns, rows: Rows) -> Iterator[Item | InputError]:
    groups: dict[str, dict[str, Any]] = {}
    out: list[tuple[int, Item | InputError]] = []
    for line, row in rows:
        if isinstance(row, InputError):
            out.append((line, row))
        elif not isinstance(row, Mapping):
            out.append((line, InputError(f"expected an object, got {type(row).__name__}", file=cols.name,
                                         line=line)))
        else:
            value = _row(cols, line, row, groups)
            if value is not None:
                out.append((line, value))
        if not groups:  # nothing can come before what is already listed: stream it
            yield from (value for _, value in out)
            out.clear()
    for key, group in groups.items():
        value = _group_item(cols, group) if group["error"] is None else group["error"]
        if isinstance(value, InputError):  # one bad row leaves the whole item out: say which rows
            value = left_out(value, key, group["lines"])
        out.append((group["line"], value))
    yield from (value for _, value in sorted(out, key=lambda entry: entry[0]))


def _row(cols: _Columns, line: int, row: Mapping[str, Any], groups: dict[str, dict[str, Any]]
         ) -> Item | InputError | None:
    """A row's item or problem; ``None`` when the row joined a group (items with several rows)."""
    values = cols.values(row)
    item = {t: values[t] for t in ITEM_TARGETS if t in values}
    try:
        if "responses" in values or "pairs" in values or "response_a" in values or "response_b" in values:
            item.setdefault("id", cols.label(line) or f"row-{line}")
            for target in (*NESTED_TARGETS, *PAIR_TARGETS):
                if target in values:
                    item[target] = values[target]
            return parse_record(item, cols.name, line)
        response = {field: values[t] for t, field in RESPONSE_TARGETS.items() if t in values}
        if "text" not in response and "response" not in cols.source:
            raise InputError("has no response: map a column to response (or response_a/response_b, or responses)",
                             file=cols.name, line=line)
        response.setdefault("text", None)
        if "id" not in item:
            if "id" in cols.given or ("id" in cols.source and cols.known):
                raise InputError("is missing", file=cols.name, line=line, field=cols.column("id"))
            response.setdefault("id", "0")
            try:
                return parse_record({**item, "id": cols.label(line) or f"row-{line}", "responses": [response]},
                                    cols.name, line)
            except InputError as exc:  # its response's fields are this row's columns
                return cols.locate(exc, [line])
    except InputError as exc:
        return cols.locate(exc)
    key = str(item["id"])
    group = groups.get(key)
    if group is None:
        groups[key] = {"line": line, "item": item, "responses": [], "lines": [], "error": None}
        group = groups[key]
    elif group["error"] is None:
        for target in ITEM_TARGETS:
            if item.get(target) != group["item"].get(target):
                group["error"] = InputError(f"differs from row {group['line']}'s, which has the same id",
                                            file=cols.name, line=line, field=cols.column(target))
                break
    response.setdefault("id", cols.label(line) or str(len(group["responses"])))
    group["responses"].append(response)
    group["lines"].append(line)
    return None


def _group_item(cols: _Columns, group: dict[str, Any]) -> Item | InputError:
    try:
        return parse_record({**group["item"], "responses": group["responses"]}, cols.name, group["line"])
    except InputError as exc:
        return cols.locate(exc, group["lines"])


# -- table files -------------------------------------------------------------------------------------------


def table_format(path: Path) -> str | None:
    """``"datasets"`` for a folder or an ``.arrow`` file, ``"parquet"`` for a Parquet file, else ``None``."""
    if path.is_dir() or path.suffix.lower() == ".arrow":
        return "datasets"
    if path.suffix.lower() in PARQUET_SUFFIXES:
        return "parquet"
    try:
        with path.open("rb") as fh:
            return "parquet" if fh.read(4) == b"PAR1" else None
    except OSError:
        return None


def _csv_table_rows(path: Path) -> Iterator[tuple[int, Mapping[str, Any] | InputError]]:
    for line, row, problem, _ in _csv_rows(path):
        if problem is not None or row is None:
            yield line, problem or InputError("cannot be read", file=str(path), line=line)
        else:
            yield line, {k: v for k, v in row.items() if v not in (None, "")}


def row_table(path: Path) -> tuple[list[str] | None, Rows]:
    """The columns (where the file has them: CSV, a JSON array) and rows of a JSON-lines, JSON-array or CSV
    file; an empty CSV field is missing."""
    name = str(path)
    if path.suffix.lower() == ".csv":
        head = next(_csv_rows(path), None)
        return (head[3] if head is not None else []), _csv_table_rows(path)
    try:
        with path.open("rb") as fh:
            head_text = fh.read(4096).decode("utf-8-sig", errors="replace").lstrip()
        if path.suffix.lower() in (".jsonl", ".ndjson") or not head_text.startswith("["):
            return None, _jsonl_records(path)
        data = decode_json(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise InputError(f"invalid UTF-8 at byte {exc.start}", file=name) from None
    except ValueError as exc:
        raise InputError(f"not valid JSON: {exc}", file=name) from None
    if not isinstance(data, list):
        raise InputError(f"expected a JSON array of rows, got {type(data).__name__}", file=name)
    return sorted({k for r in data if isinstance(r, dict) for k in r}), enumerate(data, start=1)


def _arrow_rows(batches: Iterable[Any]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    line = 0
    for batch in batches:
        for row in batch.to_pylist():
            line += 1
            yield line, row


def parquet_table(path: Path) -> tuple[list[str], Rows]:
    """A Parquet file's columns and rows (read in batches by pyarrow)."""
    _, pq = _pyarrow("Reading Parquet files")
    try:
        reader = pq.ParquetFile(os.fspath(path))
    except Exception as exc:  # pyarrow raises its own error types for a file that is not Parquet
        raise InputError(f"cannot read as Parquet: {exc}", file=str(path)) from None
    return list(reader.schema_arrow.names), _arrow_rows(reader.iter_batches(batch_size=_BATCH))


def _load_dataset(path: Path) -> Any:
    ds_lib = _datasets()
    name = str(path)
    bars = ds_lib.is_progress_bar_enabled()
    ds_lib.disable_progress_bars()  # a progress bar per read would clutter the command's own
    try:
        if path.is_dir():
            data = ds_lib.load_from_disk(os.fspath(path))
            if isinstance(data, ds_lib.DatasetDict):
                splits = list(data)
                if len(splits) != 1:
                    raise InputError(f"holds the splits {', '.join(splits)}: name one, e.g. {path / splits[0]}",
                                     file=name)
                data = data[splits[0]]
            return data
        builder = DATASETS_SUFFIXES.get(path.suffix.lower())
        if builder is None:
            raise InputError("datasets reads a save_to_disk folder or a .parquet, .json, .jsonl, .csv, .tsv or "
                             ".arrow file", file=name)
        if builder == "arrow":
            return ds_lib.Dataset.from_file(os.fspath(path))
        extra = {"delimiter": "\t"} if path.suffix.lower() == ".tsv" else {}
        return ds_lib.load_dataset(builder, data_files=os.fspath(path), split="train", **extra)
    except InputError:
        raise
    except Exception as exc:  # datasets raises many types (FileNotFoundError, DatasetGenerationError, ...)
        raise InputError(f"cannot read with datasets: {type(exc).__name__}: {exc}", file=name) from None
    finally:
        if bars:
            ds_lib.enable_progress_bars()


def dataset_table(path: Path) -> tuple[list[str], Rows]:
    """The columns and rows of a ``datasets`` dataset saved on disk, or of a local file it reads."""
    data = _load_dataset(path)
    return list(data.column_names), _arrow_rows(data.with_format("arrow").iter(batch_size=_BATCH))


def _kind(value: Any) -> str | None:
    """``"pandas"`` for a pandas DataFrame, ``"datasets"`` for a Hugging Face ``Dataset``, ``"datasets-dict"``
    for a ``DatasetDict``, else ``None`` (by type, without importing either package)."""
    for cls in type(value).__mro__:
        module, name = cls.__module__.split(".", 1)[0], cls.__name__
        if module == "pandas" and name == "DataFrame":
            return "pandas"
        if module == "datasets" and name == "Dataset":
            return "datasets"
        if module == "datasets" and name in ("DatasetDict", "IterableDatasetDict"):
            return "datasets-dict"
    return None


def is_table(value: Any) -> bool:
    """Whether ``value`` is an in-memory table :func:`memory_table` reads (a DataFrame or a ``Dataset``)."""
    return _kind(value) in ("pandas", "datasets")


def memory_table(value: Any) -> tuple[str, list[str], Rows, list[str]]:
    """``(name, columns, rows, labels)`` of a pandas DataFrame or a Hugging Face ``Dataset``: ``labels`` are
    the DataFrame's index (a ``Dataset``'s row positions from 0), as text."""
    kind = _kind(value)
    if kind == "pandas":
        columns = [str(c) for c in value.columns]
        records = value.to_dict(orient="records")  # native Python values (numpy ones boxed)
        frame_rows = [(n, {str(k): v for k, v in r.items()}) for n, r in enumerate(records, start=1)]
        return "<DataFrame>", columns, frame_rows, [str(label) for label in value.index]
    if kind == "datasets":
        rows = _arrow_rows(value.with_format("arrow").iter(batch_size=_BATCH))
        return "<Dataset>", list(value.column_names), rows, [str(k) for k in range(len(value))]
    raise TypeError(f"not an in-memory table: {type(value).__name__}")


def refuse_splits(value: Any) -> None:
    """Raise ``TypeError`` for a ``DatasetDict`` (several splits), naming them; nothing for anything else."""
    if _kind(value) == "datasets-dict":
        raise TypeError(f"a {type(value).__name__} holds several splits ({', '.join(map(str, value))}): "
                        "pass one of them (data['train'])")
