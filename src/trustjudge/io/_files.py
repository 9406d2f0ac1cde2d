"""Reading items and suites from files, every problem naming the file, the line and the field.

- :func:`iter_items` / :func:`load_items`: JSON lines, a file that is one JSON array of item objects
  (``items.json``; each error names the line its element starts on) or CSV (flat pairwise columns, or one
  response per row grouped by consecutive ``id``). Loaders stream: they yield one :class:`Item` (or one
  :class:`InputError`) per line.
- :func:`load_suite`: a suite file (JSON, or TOML for a ``.toml`` name).
- :func:`load_array`: a whole JSON-array file (the dataset adapters' rows), raising an error naming the file.
- :func:`decode_json`: strict JSON (no NaN/Infinity, no duplicate keys), for every loader of the package.

The records' fields are checked by :mod:`trustjudge.io._items` (:func:`~trustjudge.io._items.parse_record`).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputError
from ._items import MAX_FIELD_CHARS, Item, parse_record, unicode_problem
from ._suites import Suite as Suite  # re-exported: a suite file is read here
from ._suites import parse_suite


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid JSON number")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r:.60}")
        out[key] = value
    return out


def strict_json(text: str, constants: bool = False) -> Any:
    """JSON with no duplicate keys and no NaN/Infinity (read where ``constants``: the reader then refuses them
    naming the field): a syntax error is a ``json.JSONDecodeError`` (its line kept); a duplicate key, a constant,
    an over-long integer or too deep nesting a ``ValueError`` naming it."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates,
                          parse_constant=float if constants else _reject_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def decode_json(text: str) -> Any:
    """Strict JSON (:func:`strict_json`); every failure is a ``ValueError`` with a message (a syntax error's
    column included)."""
    try:
        return strict_json(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} (column {exc.colno})") from None


def _jsonl_records(path: Path) -> Iterator[tuple[int, Any | InputError]]:
    name = str(path)
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")  # a BOM may start the file
            except UnicodeDecodeError as exc:
                yield number, InputError(f"invalid UTF-8 at byte {exc.start}", file=name, line=number)
                continue
            if not text.strip():
                continue
            try:
                yield number, decode_json(text)
            except ValueError as exc:
                yield number, InputError(f"invalid JSON: {exc}", file=name, line=number)


class _Lines:
    """Line numbers of positions in a text, counted forward incrementally (positions mostly increase)."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.line = text, 0, 1

    def at(self, pos: int) -> int:
        if pos < self.pos:
            return self.text.count("\n", 0, pos) + 1
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line


_SPACE = re.compile(r"[ \t\n\r]*")
_STRICT = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
_LOOSE = json.JSONDecoder()


def _array_text(path: Path) -> str | None:
    """The text of a file that is one JSON array (not a ``.jsonl`` name), else ``None`` (JSON lines).

    A file that decodes as one array is one; so is one that does not decode at all but whose first line is
    not a JSON value on its own (an array with a bad element: its elements are reported one by one). A
    first line that is a whole JSON value followed by more lines is JSON lines (F33)."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return None
    try:
        with path.open("rb") as fh:
            head = fh.read(4096).decode("utf-8-sig", errors="replace").lstrip()
        if not head.startswith("["):
            return None
        text = path.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None  # read as lines: each line's problem is reported on its own
    try:
        _LOOSE.decode(text)
        return text
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            return None
    except (ValueError, RecursionError):
        pass
    first = text.lstrip().split("\n", 1)[0]
    try:
        _LOOSE.decode(first)
        return None
    except (ValueError, RecursionError):
        return text


def _array_records(name: str, text: str) -> Iterator[tuple[int, Any | InputError]]:
    """The elements of a JSON array text, each with the line it starts on; an element that is not strict JSON
    (NaN, a duplicate key, too deep) is an error of its own, a syntax error ends the reading."""
    lines = _Lines(text)
    pos = _SPACE.match(text, text.index("[") + 1).end()  # type: ignore[union-attr]
    if text.startswith("]", pos):
        return
    while True:
        line = lines.at(pos)
        try:
            value, end = _STRICT.raw_decode(text, pos)
            yield line, value
        except json.JSONDecodeError as exc:
            yield lines.at(exc.pos), InputError(f"invalid JSON: {exc.msg} (column {exc.colno}); the rest of the "
                                                "array was not read", file=name, line=lines.at(exc.pos))
            return
        except (ValueError, RecursionError) as exc:
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            try:
                _, end = _LOOSE.raw_decode(text, pos)
            except (ValueError, RecursionError):
                yield line, InputError(f"invalid JSON: {why}; the rest of the array was not read", file=name,
                                       line=line)
                return
            yield line, InputError(f"invalid JSON: {why}", file=name, line=line)
        pos = _SPACE.match(text, end).end()  # type: ignore[union-attr]
        if text.startswith(",", pos):
            pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
            continue
        if text.startswith("]", pos) and not text[pos + 1:].strip():
            return
        yield lines.at(pos), InputError("invalid JSON: expected ',' or the array's closing ']' after an element; "
                                        "the rest of the array was not read", file=name, line=lines.at(pos))
        return


def _json_records(path: Path) -> Iterator[tuple[int, Any | InputError]]:
    """JSON lines, or the elements of a file that is one JSON array."""
    text = _array_text(path)
    if text is None:
        yield from _jsonl_records(path)
    else:
        yield from _array_records(str(path), text)


_CsvRow = tuple[int, "dict[str, Any] | None", "InputError | None", list[str]]
_CSV_LINES = "\x00lines"
"""The key under which a CSV item's record carries the lines of its rows (not a field: never read as one)."""
_CSV_COLUMN = {"text": "response", "id": "response_id"}
_RESPONSE_FIELD = re.compile(r"^responses\[(\d+)\]\.(\w+)$")


def _csv_located(exc: InputError, lines: list[int], item_id: str) -> InputError:
    """An error of a CSV item of several rows: at the row and column it comes from, naming every row the item
    loses (one bad row leaves the whole item out)."""
    line, field = exc.line, exc.field
    match = _RESPONSE_FIELD.match(field or "")
    if match and int(match.group(1)) < len(lines):
        line, field = lines[int(match.group(1))], _CSV_COLUMN.get(match.group(2), match.group(2))
    return left_out(InputError(exc.reason, file=exc.file, line=line, field=field), item_id, lines)


def _csv_rows(path: Path) -> Iterator[_CsvRow]:
    """``(first line, row, problem, columns)`` for every CSV record. A record's problem (invalid UTF-8,
    an unterminated quote, a field over the limit, extra fields) names its first line; ``row`` is
    ``None`` where the record could not be read at all."""
    name = str(path)
    # Undecodable bytes are kept as surrogates so that one bad byte fails its record, not the file.
    text = path.read_bytes().decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
    csv.field_size_limit(max(csv.field_size_limit(), MAX_FIELD_CHARS + 1))
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    try:
        columns = list(reader.fieldnames or [])
    except csv.Error as exc:
        yield 1, None, InputError(f"invalid CSV header: {exc}", file=name, line=1), []
        return
    last = reader.line_num
    while True:
        first = last + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            what = str(exc)
            if "end of data" in what:
                what = "a quote opened in this record is never closed"
            elif "field larger than field limit" in what:
                what = f"a field is over {MAX_FIELD_CHARS:,} characters"
            # The reader cannot find the next record reliably after this: the rest is not read.
            yield first, None, InputError(f"invalid CSV: {what}; the lines after it were not read", file=name,
                                          line=first), columns
            return
        last = reader.line_num
        problem = None
        if None in row:
            problem = InputError(f"more fields than the header's {len(columns)} columns", file=name, line=first)
        for key, value in row.items():
            why = unicode_problem(value) if isinstance(value, str) else None
            if problem is None and why:
                problem = InputError(why, file=name, line=first, field=str(key))
        yield first, row, problem, columns


def _csv_records(path: Path) -> Iterator[tuple[int, Any | InputError]]:
    """CSV rows: flat pairwise columns, or one response per row grouped by consecutive ``id``."""
    name = str(path)
    rows = _csv_rows(path)
    head = next(rows, None)
    if head is None:
        return
    columns = set(head[3])
    rows = itertools.chain([head], rows)
    if "response" in columns and columns & {"response_a", "response_b"}:
        # One of the two would be ignored without a word: the file mixes the two forms.
        yield 1, InputError("CSV has both a response column and response_a/response_b columns: use one form "
                            "(one response per row, or one pair per row)", file=name, line=1)
        return
    if {"response_a", "response_b"} <= columns:
        for line, row, problem, _ in rows:
            if problem is not None or row is None:
                yield line, problem
            else:
                yield line, {k: v for k, v in row.items() if v not in (None, "")}
        return
    if not {"id", "question", "response"} <= columns:
        yield 1, InputError("CSV needs the columns id, question, response (one response per row) "
                            "or question, response_a, response_b", file=name, line=1)
        return
    group: dict[str, Any] | None = None
    failed: InputError | None = None
    start = 0
    lines: list[int] = []

    def finished() -> Any:
        """The group's item record, or its problem naming every row it leaves out."""
        assert group is not None
        return group if failed is None else left_out(failed, str(group["id"]), lines)

    for line, row, problem, _ in rows:
        if row is None:  # unreadable: it ends the file
            if group is not None:
                yield start, finished()
            yield line, problem
            return
        if group is None or row["id"] != group["id"]:
            if group is not None:
                yield start, finished()
            start, failed, lines = line, None, []
            group = {k: row.get(k) or None for k in ("id", "question", "context", "reference")}
            group["responses"] = []
            group[_CSV_LINES] = lines
        elif failed is None:
            for key in ("question", "context", "reference"):
                if (row.get(key) or None) != group[key]:
                    failed = InputError(f"rows of item {group['id']!r} must share one {key}, but this row's "
                                        f"differs from line {start}'s", file=name, line=line, field=key)
                    break
        failed = failed or problem  # a bad row fails its whole item
        lines.append(line)
        group["responses"].append({
            "id": row.get("response_id") or str(len(group["responses"])),
            "text": row.get("response") or "",
            "system": row.get("system") or None,
            "human_score": row.get("human_score") or None,
        })
    if group is not None:
        yield start, finished()


def left_out(problem: InputError, item_id: str, lines: list[int]) -> InputError:
    """``problem`` naming the rows of the item it leaves out (``item_id``, made of the rows on ``lines``)."""
    if len(lines) <= 1:
        return problem
    return InputError(problem.reason, file=problem.file, line=problem.line, field=problem.field,
                      rows=tuple(lines), item=item_id)


def iter_items(path: str | Path, *, min_responses: int = 1) -> Iterator[Item | InputError]:
    """Stream items from a JSONL or CSV file; problems come out as :class:`InputError` values."""
    p = path if isinstance(path, Path) else Path(path)  # a Path subclass keeps its display name
    if not p.exists():
        raise InputError("no such file", file=str(p))
    records = _csv_records(p) if p.suffix.lower() == ".csv" else _json_records(p)
    seen: dict[str, int] = {}
    for line, record in records:
        if isinstance(record, InputError):
            yield record
            continue
        try:
            item = parse_record(record, str(p), line, base=p.parent)
            if len(item.responses) < min_responses:
                raise InputError(f"needs at least {min_responses} responses, has {len(item.responses)}",
                                 file=str(p), line=line, field="responses")
            if item.id in seen:
                raise InputError(f"duplicate item id {item.id!r} (first on line {seen[item.id]}): items are not "
                                 "merged", file=str(p), line=line, field="id")
            seen[item.id] = line
            yield item
        except InputError as exc:
            rows = record.get(_CSV_LINES) if isinstance(record, dict) and p.suffix.lower() == ".csv" else None
            yield _csv_located(exc, rows, str(record.get("id"))) if rows else exc


def load_items(path: str | Path, *, min_responses: int = 1) -> list[Item]:
    """Read every item of a file, raising the first :class:`InputError`."""
    items = []
    for value in iter_items(path, min_responses=min_responses):
        if isinstance(value, InputError):
            raise value
        items.append(value)
    return items


def load_suite(path: str | Path) -> Suite:
    """Read a suite file (JSON, or TOML for a ``.toml`` name); problems name the file and field."""
    p = Path(path)
    name = str(p)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the suite: {exc.strerror or exc}", file=name) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"invalid UTF-8 at byte {exc.start}", file=name) from None
    if p.suffix.lower() == ".toml":
        try:
            import tomllib  # type: ignore[import-not-found,unused-ignore]  # Python 3.11+
        except ImportError:  # Python 3.10: tomli, the same parser under its PyPI name (a dependency there)
            import tomli as tomllib

        try:
            record: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise InputError(f"invalid TOML: {exc}", file=name) from None
        except RecursionError:
            raise InputError("invalid TOML: nested too deeply", file=name) from None
    else:
        try:
            record = decode_json(text)
        except ValueError as exc:
            try:  # where the syntax error is: the standard decoder knows the line
                json.loads(text)
                line = None
            except json.JSONDecodeError as syntax:
                line = syntax.lineno
            except (ValueError, RecursionError):  # too deep, an over-long integer: no line to name
                line = None
            raise InputError(f"invalid JSON: {exc}", file=name, line=line) from None
    return parse_suite(record, name)


def load_array(path: Path) -> list[Any]:
    """Decode a whole JSON-array file, raising :class:`InputError` naming the file if it cannot."""
    name = str(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"invalid UTF-8 at byte {exc.start}", file=name) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                         file=name) from None
    except (ValueError, RecursionError) as exc:  # over-long integers, too deep nesting
        raise InputError(f"not valid JSON: {'nested too deeply' if isinstance(exc, RecursionError) else exc}",
                         file=name) from None
    if not isinstance(data, list):
        raise InputError(f"expected a JSON array of rows, got {type(data).__name__}", file=name)
    return data


def read_json_file(path: Path, what: str, hint: str = "") -> Any:
    """A settings file's JSON value (a domain map, a ledger, a sample's key): a ConfigError naming ``what`` when
    the file cannot be read (``hint`` follows the reason), or the file and line when it is not JSON."""
    try:
        return strict_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc}{hint}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: line {exc.lineno}: not JSON ({exc.msg})") from None
    except ValueError as exc:  # a duplicate key (a domain given twice), NaN, too deep
        raise ConfigError(f"{path}: not JSON ({exc})") from None


__all__ = ["decode_json", "iter_items", "left_out", "load_array", "load_items", "load_suite", "read_json_file"]
