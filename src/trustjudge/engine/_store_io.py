"""Moving judgments between stores: the export's JSON lines (plain or gzip-compressed) and their import.

One exported row is one stored output::

    {"key", "kind", "backend", "request", "result", "prompt_tokens", "completion_tokens", "latency_s",
     "created", "created_at"}

(``request`` and ``result`` as JSON values, ``created`` the readable form of ``created_at``). A name
ending in ``.gz`` is gzip-compressed. :func:`write_parquet_export` writes the same rows as a Parquet table
(one column per nested field, as ``--out x.parquet`` elsewhere) in row groups, never holding the store.
:func:`import_file` validates every row before it writes anything and writes them all in one transaction;
a row whose key the store already holds is skipped when its content is the same and refused when it differs.
An import is untrusted input checked as far as content can be: each key is recomputed from its request, the
request must name the row's kind and backend, each result must be what the engine accepts from a backend, and
lines and the whole file are bounded in bytes. What it cannot check is whether the judge really gave that
result: each output it adds is recorded with the file it came from (``imports`` and ``imported``), and
``store stats`` shows them.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import math
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, NamedTuple

from ..errors import InputError, StoreError
from ..io._items import shown
from ..io._outputs import replacing
from ._engine import stored_problem
from ._store import Store, canonical_json, content_key

COLUMNS = "key, kind, backend, request, result, prompt_tokens, completion_tokens, latency_s, created_at"
KINDS = ("labels", "generate")
_FIELDS = ("key", "kind", "backend", "request", "result", "prompt_tokens", "completion_tokens", "latency_s",
           "created_at")
_OPTIONAL = ("created",)


def open_read_only(path: Path) -> sqlite3.Connection:
    """The store at ``path`` opened read-only.

    Raises:
        StoreError: there is no store there, or it is not a trustjudge store.
    """
    if not path.is_file():
        raise StoreError(f"no judgment store at {path} (nothing has been judged with this --store)")
    uri = path.resolve().as_uri()
    try:
        db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=60.0)
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        # A WAL store in a folder this process cannot write (no -shm file can be made): read it as it is on disk.
        db = sqlite3.connect(f"{uri}?immutable=1", uri=True)
    try:
        found = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'outputs'").fetchone()
    except sqlite3.DatabaseError as exc:
        db.close()
        raise StoreError(f"cannot read the judgment store {path}: {exc}") from None
    if found is None:
        db.close()
        raise StoreError(f"{path} is not a trustjudge judgment store (it has no outputs table)")
    return db


def decode(text: str) -> Any:
    """A stored JSON value; a non-finite number (rows written before they were stored as null) is null."""
    return json.loads(text, parse_constant=lambda _: None)


def when(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec="seconds")


def output_row(row: Sequence[Any]) -> dict[str, Any]:
    """One stored output (a row of :data:`COLUMNS`) as a JSON object."""
    key, kind, backend, request, result, pt, ct, latency, created = row
    return {"key": key, "kind": kind, "backend": backend, "request": decode(request), "result": decode(result),
            "prompt_tokens": pt, "completion_tokens": ct, "latency_s": latency, "created": when(created),
            "created_at": created}


def iter_outputs(db: sqlite3.Connection, where: str = "", params: Sequence[Any] = ()) -> Iterator[dict[str, Any]]:
    """Every stored output matching ``where`` (an SQL clause starting with `` WHERE``), oldest first."""
    for row in db.execute(f"SELECT {COLUMNS} FROM outputs{where} ORDER BY created_at, key", list(params)):
        yield output_row(row)


def is_gzip(path: Path) -> bool:
    return path.name.endswith(".gz")


def _write_rows(db: sqlite3.Connection, where: str, params: Sequence[Any], write: Callable[[bytes], object]) -> int:
    n = 0
    for output in iter_outputs(db, where, params):
        write((json.dumps(output, ensure_ascii=False) + "\n").encode("utf-8"))
        n += 1
    return n


def write_export(store: Path, out: Path, where: str = "", params: Sequence[Any] = ()) -> int:
    """Export the store's outputs to ``out`` (gzip-compressed for a ``.gz`` name), replacing it atomically:
    the rows go to a temporary file in the same folder, renamed onto ``out`` once complete (as every output,
    :func:`trustjudge.io._outputs.replacing`; a killed export's temporary file is removed by the next write).
    Returns the number of rows written.

    Raises:
        StoreError: the store cannot be read.
        ConfigError: ``out`` cannot be written.
    """
    db = open_read_only(store)
    try:
        with replacing(out, "--out", binary=True) as raw:
            if is_gzip(out):
                with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
                    n = _write_rows(db, where, params, gz.write)
            else:
                n = _write_rows(db, where, params, raw.write)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the judgment store {store}: {exc}") from None
    finally:
        db.close()
    return n


# -- Parquet ----------------------------------------------------------------------------------------------

PARQUET_BATCH = 1000
"""Rows per Parquet row group of an export (what is held in memory at once)."""


def _kind(value: Any) -> str:
    """The Arrow-relevant kind of one flat value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int" if -(2**63) <= value < 2**63 else "other"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        kinds = {_kind(v) for v in value} - {"null"}
        if not kinds:
            return "list_empty"
        if kinds <= {"int", "float"}:
            return "list_float" if "float" in kinds else "list_int"
        if kinds == {"str"}:
            return "list_str"
    return "other"


def _arrow_type(pa: Any, kinds: set[str]) -> tuple[Any, bool]:
    """The Arrow type of a column whose values have ``kinds``, and whether it is written as JSON text (mixed
    kinds, as :func:`trustjudge.io._tables.to_arrow` does)."""
    kinds = kinds - {"null"}
    simple = {frozenset(): pa.null(), frozenset({"bool"}): pa.bool_(), frozenset({"int"}): pa.int64(),
              frozenset({"float"}): pa.float64(), frozenset({"int", "float"}): pa.float64(),
              frozenset({"str"}): pa.string()}
    if frozenset(kinds) in simple:
        return simple[frozenset(kinds)], False
    lists = kinds - {"list_empty"}
    if kinds and kinds <= {"list_empty", "list_int", "list_float", "list_str"}:
        if not lists:
            return pa.list_(pa.null()), False
        if lists <= {"list_int", "list_float"}:
            return pa.list_(pa.float64() if "list_float" in lists else pa.int64()), False
        if lists == {"list_str"}:
            return pa.list_(pa.string()), False
    return pa.string(), True


def write_parquet_export(store: Path, fh: IO[bytes], where: str = "", params: Sequence[Any] = ()) -> int:
    """Write the store's outputs matching ``where`` to ``fh`` as one Parquet table, in row groups of
    :data:`PARQUET_BATCH` rows; returns the number of rows.

    The columns are :func:`trustjudge.io._tables.flatten`'s of each exported row (``request.prompt``,
    ``result.logprobs``...). Two passes over one read snapshot of the store: the first finds every column
    and its type, the second writes the rows, so memory holds one row group, not the store (a 192 MB store
    took 986 MB written in one piece).

    Raises:
        StoreError: the store cannot be read.
        PrerequisiteError: pyarrow is missing (the ``data`` extra).
    """
    from ..io import _frames, _tables

    pa, pq = _frames._pyarrow("Writing Parquet files")
    db = open_read_only(store)
    try:
        db.execute("BEGIN")  # one snapshot for both passes: rows written meanwhile are in neither
        kinds: dict[str, set[str]] = {}
        for output in iter_outputs(db, where, params):
            for column, value in _tables.flatten(output).items():
                kinds.setdefault(column, set()).add(_kind(value))
        names = list(kinds)
        # As _tables._columns: a nested field's own column goes where it is null in every row.
        names = [c for c in names if not (kinds[c] == {"null"} and any(o.startswith(c + ".") for o in names))]
        types = {c: _arrow_type(pa, kinds[c]) for c in names}
        schema = pa.schema([(c, types[c][0]) for c in names])
        n = 0
        with pq.ParquetWriter(fh, schema) as writer:
            batch: list[dict[str, Any]] = []

            def flush() -> None:
                arrays = []
                for c in names:
                    values = [row.get(c) for row in batch]
                    if types[c][1]:
                        values = [None if v is None else json.dumps(v) for v in values]
                    arrays.append(pa.array(values, type=types[c][0]))
                writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
                batch.clear()

            for output in iter_outputs(db, where, params):
                batch.append(_tables.flatten(output))
                n += 1
                if len(batch) >= PARQUET_BATCH:
                    flush()
            if batch or not n:
                flush()
        return n
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the judgment store {store}: {exc}") from None
    finally:
        db.close()


# -- import -----------------------------------------------------------------------------------------------

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line an import reads (bytes, after decompression): a prompt is at most a few megabytes."""
MAX_IMPORT_BYTES = 4 * 1024 * 1024 * 1024
"""The most an import reads in all (bytes, after decompression): a gzip file can expand a thousandfold."""

Row = tuple[str, str, str, str, str, int, int, float, float]
"""One exported output as the store's column values (request and result as stored text)."""


def _lines(path: Path, max_line: int, max_total: int) -> Iterator[tuple[int, str]]:
    """The file's lines (decompressed), each at most ``max_line`` bytes and ``max_total`` in all."""
    total = 0
    try:
        with (gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")) as fh:
            for line in itertools.count(1):
                raw = fh.readline(max_line + 1)
                if not raw:
                    return
                total += len(raw)
                if len(raw) > max_line:
                    raise InputError(f"is longer than {max_line:,} bytes (the import's --max-line-bytes)",
                                     file=str(path), line=line)
                if total > max_total:
                    raise InputError(f"the import holds more than {max_total:,} bytes (after decompression; "
                                     "the import's --max-bytes): split it, or raise the limit", file=str(path),
                                     line=line)
                try:
                    yield line, raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise InputError(f"is not valid UTF-8 ({exc.reason} at byte {exc.start})", file=str(path),
                                     line=line) from None
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        # a truncated or damaged gzip file, or one that cannot be opened
        raise InputError(f"cannot be read: {exc}", file=str(path)) from None


def _check(record: Any, file: str, line: int) -> Row:
    """One exported row, validated, as the store's column values (request and result as stored text).

    Beyond field names and types: the key must be the content key of the request (the store finds a row by
    it), the request must name the row's kind and backend, and the result must be what the engine accepts
    from a backend (:func:`~trustjudge.engine._engine.stored_problem`)."""
    def bad(field: str | None, message: str) -> InputError:
        return InputError(message, file=file, line=line, field=field)

    if not isinstance(record, dict):
        raise bad(None, f"expected a JSON object (one exported output), got {type(record).__name__}")
    for name in _FIELDS:
        if name not in record:
            raise bad(name, "is missing")
    for name in record:
        if name not in _FIELDS and name not in _OPTIONAL:
            raise bad(name, f"is not a field of an exported output (expected {', '.join(_FIELDS)})")
    for name in ("key", "backend"):
        if not isinstance(record[name], str) or not record[name]:
            raise bad(name, f"must be a non-empty string, got {shown(record[name])}")
    if record["kind"] not in KINDS:
        raise bad("kind", f"must be one of {', '.join(KINDS)}, got {shown(record['kind'])}")
    for name in ("request", "result"):
        if not isinstance(record[name], dict):
            raise bad(name, f"must be a JSON object, got {type(record[name]).__name__}")
    for name in ("prompt_tokens", "completion_tokens"):
        value = record[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad(name, f"must be a non-negative integer, got {shown(value)}")
    for name in ("latency_s", "created_at"):
        value = record[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise bad(name, f"must be a non-negative finite number, got {shown(value)}")
    created = record.get("created")
    if created is not None and not isinstance(created, str):
        raise bad("created", f"must be a string or null, got {type(created).__name__}")
    request, kind = record["request"], record["kind"]
    for name, want in (("kind", kind), ("backend", record["backend"])):
        if request.get(name) != want:
            raise bad(f"request.{name}", f"must be the row's {name} {shown(want)}, got {shown(request.get(name))}")
    if not isinstance(request.get("prompt"), str):
        raise bad("request.prompt", f"must be a string, got {shown(request.get('prompt'))}")
    labels = request.get("labels")
    if kind == "labels" and (not isinstance(labels, list) or not all(isinstance(x, str) for x in labels)):
        raise bad("request.labels", f"must be a list of strings, got {shown(labels)}")
    texts = []
    for name in ("request", "result"):
        try:
            texts.append(canonical_json(record[name]) if name == "request" else json.dumps(record[name]))
        except (ValueError, RecursionError):  # nesting too deep to be written back
            raise bad(name, "cannot be stored: nested too deeply") from None
    try:
        key = content_key(request)
    except UnicodeEncodeError:  # a lone surrogate in the request
        raise bad("request", "holds a lone surrogate (not text)") from None
    if record["key"] != key:
        raise bad("key", f"does not match the row's request (whose key is {key}): the row was edited, or it is "
                         "not an export of a trustjudge store")
    problem = stored_problem(kind, request, record["result"], record["prompt_tokens"])
    if problem is not None:
        raise bad("result", f"is not a valid {kind} output of the judge: {problem}")
    return (record["key"], kind, record["backend"], texts[0], texts[1], record["prompt_tokens"],
            record["completion_tokens"], float(record["latency_s"]), float(record["created_at"]))


def read_export(path: Path, *, max_line_bytes: int = MAX_LINE_BYTES,
                max_bytes: int = MAX_IMPORT_BYTES) -> list[tuple[int, Row]]:
    """Every row of an export, validated: ``(line, column values)``; blank lines are skipped.

    Raises:
        InputError: naming the file, the line and the field of the first bad row; a line longer than
            ``max_line_bytes`` or a file of more than ``max_bytes`` (both after decompression), naming the line
            that went over.
    """
    rows = []
    for line, text in _lines(path, max_line_bytes, max_bytes):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"is not valid JSON ({exc.msg} at column {exc.colno})", file=str(path),
                             line=line) from None
        except (ValueError, RecursionError) as exc:  # an over-long integer, nesting too deep
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise InputError(f"is not valid JSON ({why})", file=str(path), line=line) from None
        rows.append((line, _check(record, str(path), line)))
    return rows


def _same(a: Sequence[Any], b: Sequence[Any]) -> str | None:
    """The first content field in which two rows differ (latency and time are not content), or ``None``."""
    for name, x, y in zip(("kind", "backend", "request", "result", "prompt_tokens", "completion_tokens"), a, b):
        if name in ("request", "result"):
            x, y = decode(x), decode(y)
        if x != y:
            return name
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class Imported(NamedTuple):
    """What :func:`import_file` did."""

    added: int
    """Outputs written into the store."""
    stored: int
    """Rows the store (or an earlier line) already held with the same content: skipped."""
    other_judges: int = 0
    """Rows of other backends left out (``only_backend``)."""


def import_file(path: Path, store: Store, *, only_backend: str | None = None, max_line_bytes: int = MAX_LINE_BYTES,
                max_bytes: int = MAX_IMPORT_BYTES) -> Imported:
    """Import an export into ``store`` in one transaction.

    Every row is validated first (:func:`read_export`: its key recomputed from its request, its result checked
    as the engine checks a backend's); a key the store (or an earlier line) already holds is skipped if the
    content (kind, backend, request, result, token counts) is the same. With ``only_backend`` (a backend
    fingerprint), rows of other backends are left out. Each output added is recorded with the import that
    added it (the file's name and SHA-256: ``store stats`` lists them).

    Raises:
        InputError: a bad row, a row that conflicts with a stored one (naming the line), or a file holding no
            output: nothing imported.
        StoreError: the store cannot be written.
    """
    rows = read_export(path, max_line_bytes=max_line_bytes, max_bytes=max_bytes)
    if not rows:
        raise InputError("holds no exported output (an empty export: nothing to import)", file=str(path))
    others = 0
    if only_backend is not None:
        kept = [(line, row) for line, row in rows if row[2] == only_backend]
        others = len(rows) - len(kept)
        if not kept:
            raise InputError(f"holds no output of the judge {only_backend} (--only-judge): "
                             f"{others:,} output(s) of other judges", file=str(path))
        rows = kept
    digest = _sha256(path)
    seen: dict[str, tuple[int, Sequence[Any]]] = {}
    fresh: list[tuple[Any, ...]] = []
    skipped = 0
    db = store._db
    with store._lock:
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                for line, row in rows:
                    key = row[0]
                    if key in seen:
                        first, earlier = seen[key]
                        field = _same(row[1:7], earlier)
                        if field is not None:
                            raise InputError(f"key {key} is also on line {first} with another {field}",
                                             file=str(path), line=line, field=field)
                        skipped += 1
                        continue
                    seen[key] = (line, row[1:7])
                    stored = db.execute("SELECT kind, backend, request, result, prompt_tokens, completion_tokens "
                                        "FROM outputs WHERE key = ?", (key,)).fetchone()
                    if stored is not None:
                        field = _same(row[1:7], stored)
                        if field is not None:
                            raise InputError(f"key {key} is already in the store {store.path} with another {field} "
                                             "(nothing imported)", file=str(path), line=line, field=field)
                        skipped += 1
                        continue
                    fresh.append(row)
                db.executemany(f"INSERT INTO outputs ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)", fresh)
                if fresh:
                    source = db.execute("INSERT INTO imports (source, sha256, imported_at, outputs) VALUES (?,?,?,?)",
                                        (str(path), digest, time.time(), len(fresh))).lastrowid
                    db.executemany("INSERT INTO imported (key, import_id) VALUES (?, ?)",
                                   [(row[0], source) for row in fresh])
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"cannot import into the judgment store {store.path}: {exc}") from exc
    return Imported(len(fresh), skipped, others)
