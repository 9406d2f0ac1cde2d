"""Records written as tables: :func:`flatten` turns a record (or its ``to_dict()``) into one flat row, with one
column per method, criterion and check (``scores.trustjudge``, ``criteria.accuracy.expected``,
``checks.c1.p_pass``, ``orders.1.A``); :func:`to_pandas` makes a DataFrame of records, :func:`write_parquet` a
Parquet file and :func:`write_csv` a CSV file. pandas and pyarrow (the ``data`` extra) are imported only when used.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from ..errors import ConfigError
from ._frames import PARQUET_SUFFIXES, _import, _pyarrow

__all__ = ["flatten", "is_csv", "is_parquet", "require_parquet", "to_arrow", "to_pandas", "write_csv", "write_parquet"]


def _as_dict(record: Any) -> Mapping[str, Any]:
    if isinstance(record, Mapping):
        return record
    to_dict = getattr(record, "to_dict", None)
    if to_dict is None:
        raise ConfigError(f"expected a trustjudge record or its to_dict(), got {type(record).__name__}")
    result: Mapping[str, Any] = to_dict()
    return result


def _keyed(entries: list[Mapping[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """A list of objects by name (criteria), id (checks) or position from 1 (orders)."""
    for key in ("name", "id"):
        names = [e.get(key) for e in entries]
        if all(isinstance(n, str) and n for n in names) and len(set(names)) == len(names):
            return [(str(e[key]), {k: v for k, v in e.items() if k != key}) for e in entries]
    return [(str(k), dict(e)) for k, e in enumerate(entries, start=1)]


def flatten(record: Any, prefix: str = "") -> dict[str, Any]:
    """One flat row of a record (or its ``to_dict()``): nested objects become dotted columns, a list of
    criteria, checks or orders one group of columns each (by name, id, or position from 1), and a criterion's
    ``scores`` its own columns (``criteria.accuracy.expected``). Lists of plain values stay lists."""
    out: dict[str, Any] = {}
    for key, value in _as_dict(record).items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for sub, entry in _keyed(value):
                scores = entry.pop("scores", None) if prefix == "" else None
                if isinstance(scores, Mapping):
                    entry = {**scores, **entry}
                out.update(flatten(entry, f"{name}.{sub}."))
        else:
            out[name] = value
    return out


def _columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every column in first-seen order, less a nested field's own column where it is null in every row
    (an unscored record's ``probabilities: null`` beside others' ``probabilities.first``)."""
    names = list(dict.fromkeys(c for row in rows for c in row))
    return [c for c in names
            if not (any(o.startswith(c + ".") for o in names) and all(row.get(c) is None for row in rows))]


def to_pandas(records: Iterable[Any]) -> Any:
    """A pandas DataFrame of records, one row each and one column per method, criterion and check.

    Args:
        records: :class:`~trustjudge.ScoreRecord`, :class:`~trustjudge.CompareRecord`,
            :class:`~trustjudge.CriteriaRecord`, :class:`~trustjudge.ChecklistRecord` or
            ``CriteriaCompareRecord`` objects, or their ``to_dict()`` dicts (e.g. read from a JSONL output).

    Returns:
        A ``pandas.DataFrame`` whose columns are :func:`flatten`'s (``scores.trustjudge``,
        ``verdicts.likelihood``, ``criteria.accuracy.expected``, ``checks.c1.p_pass``...).

    Raises:
        PrerequisiteError: pandas is not installed (``pip install 'trustjudge[data]'``).
    """
    pd = _import("pandas", "to_pandas", ["pandas"], "data")
    rows = [flatten(r) for r in records]
    return pd.DataFrame.from_records(rows, columns=_columns(rows))


def _arrow_column(pa: Any, values: list[Any]) -> Any:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # mixed types: the column as JSON text
        return pa.array([None if v is None else json.dumps(v) for v in values], type=pa.string())


def to_arrow(rows: Iterable[Any]) -> Any:
    """A ``pyarrow.Table`` of records or flat rows (:func:`flatten`)."""
    pa, _ = _pyarrow("Writing Parquet files")
    flat = [flatten(r) for r in rows]
    names = _columns(flat)
    return pa.table({c: _arrow_column(pa, [row.get(c) for row in flat]) for c in names})


def write_parquet(rows: Iterable[Any], fh: IO[bytes]) -> None:
    """Write records (or their dicts) to an open binary file as one Parquet table (:func:`to_arrow`)."""
    _, pq = _pyarrow("Writing Parquet files")
    pq.write_table(to_arrow(rows), fh)


def write_csv(rows: Iterable[Any], fh: IO[str]) -> None:
    """Write records (or their dicts) to an open text file as CSV with :func:`to_pandas`'s columns (a list is
    written as its JSON text, ``None`` as an empty cell)."""
    import csv

    flat = [flatten(r) for r in rows]
    names = _columns(flat)
    writer = csv.writer(fh)
    writer.writerow(names)
    for row in flat:
        writer.writerow(["" if (v := row.get(c)) is None else json.dumps(v) if isinstance(v, (list, dict)) else v
                         for c in names])


def require_parquet() -> None:
    """Raise :class:`~trustjudge.errors.PrerequisiteError` now if Parquet cannot be written."""
    _pyarrow("Writing Parquet files")


def is_csv(path: Path | str) -> bool:
    """Whether an output path asks for CSV (by its extension)."""
    return Path(path).suffix.lower() == ".csv"


def is_parquet(path: Path | str) -> bool:
    """Whether an output path asks for Parquet (by its extension)."""
    return Path(path).suffix.lower() in PARQUET_SUFFIXES
