"""``trustjudge store``: what the judgment store holds, read-only (in the manner of ``llm logs``).

* ``store stats``: per backend fingerprint and kind, how many outputs (and how many of them imported), first
  and last time, tokens, latency; then every import (file, SHA-256, outputs added);
* ``store export``: every stored output (key, kind, backend fingerprint, request, result, tokens, latency,
  time) as JSON lines or Parquet;
* ``store show ITEMS ITEM_ID``: the stored outputs of one item's judgments. The store is keyed by content
  (a hash of the prompt and the judge), not by item: the item's prompts are rebuilt with the judge options
  given (as ``score``, ``compare``, ``criteria`` and ``checklist`` would build them) and looked up by their keys;
* ``store search TEXT``: the stored outputs whose request contains TEXT (prompt text, or a key's start).

* ``store import FILE``: load an export (JSON lines, gzip-compressed for a ``.gz`` name) into the store, all
  rows validated first (keys recomputed, results checked as the engine checks a backend's) and written in one
  transaction with a record of where they came from; rows already stored (same key, same content) are skipped.

Except ``store import``, these commands open the store file read-only (an SQLite ``mode=ro`` URI): they never
write it, never create it. None makes a model call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .._judge import Judge
from .._settings import JUDGE_ENV, project_settings
from ..backends import get_backend
from ..engine._asking import Question
from ..engine._engine import Job
from ..engine._store import Store, default_store_path
from ..engine._store_io import (
    COLUMNS,
    MAX_IMPORT_BYTES,
    MAX_LINE_BYTES,
    import_file,
    is_gzip,
    open_read_only,
    output_row,
    when,
    write_export,
    write_parquet_export,
)
from ..errors import InputError, StoreError
from ..io._adapters import iter_dataset
from ..io._files import load_suite
from ..io._items import Item
from ..io._outputs import check_outputs, readable_input, record_output, replacing
from ..io._suites import Suite
from ..io._tables import is_parquet, require_parquet
from ..modes._registry import MODES, Mode, get_mode
from ._common import is_utf8
from ._inputs import InputFormat
from ._mode_command import registered_modes, suite_values
from ._options import SCALE_RANGE, STORE, JudgeOptions, input_options, judge_options

_COLUMNS = COLUMNS
_output = output_row
_when = when


# -- reading the store ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def _reading(path: Path | None) -> Iterator[sqlite3.Connection]:
    db = open_read_only(path if path is not None else default_store_path())
    try:
        yield db
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the judgment store {path}: {exc}") from None
    finally:
        db.close()


def _filters(backend: str | None, kind: str | None) -> tuple[str, list[Any]]:
    clauses, params = [], []
    if backend is not None:
        clauses.append("backend = ?")
        params.append(backend)
    if kind is not None:
        clauses.append("kind = ?")
        params.append(kind)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _fingerprint(judge: str | None, backend: str | None) -> str | None:
    """The backend fingerprint to select: ``--backend`` as given, or ``--judge``'s (the judge is built for it)."""
    if judge is None:
        return backend
    if backend is not None:
        raise click.UsageError("give --judge or --backend, not both")
    built = get_backend(judge)
    try:
        return built.fingerprint
    finally:
        built.close()


# -- commands ---------------------------------------------------------------------------------------------

JUDGE_FILTER = click.option("--judge", "-j", default=None,
                            help="Only this judge's outputs (a judge name; it is loaded to read its fingerprint).")
BACKEND_FILTER = click.option("--backend", default=None,
                              help="Only outputs of this backend fingerprint (as `store stats` shows it).")
KIND_FILTER = click.option("--kind", type=click.Choice(["labels", "generate"]), default=None,
                           help="Only label distributions, or only generated critiques.")


@click.group("store")
def store() -> None:
    """Inspect the judgment store (read-only): stats, export, show an item's judgments, search; import an export."""


@store.command("stats")
@STORE
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def stats(store: Path | None, as_json: bool) -> None:
    """What the store holds, per backend fingerprint and kind: outputs (and how many were imported by `store
    import`, not computed here), first and last time, tokens; then each import: its file, SHA-256 and outputs."""
    with _reading(store) as db:
        tracked = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'imported'").fetchone()
        imported = "COUNT(i.key)" if tracked else "0"
        join = " LEFT JOIN imported i ON i.key = o.key" if tracked else ""
        rows = db.execute(
            "SELECT o.backend, o.kind, COUNT(*), MIN(o.created_at), MAX(o.created_at), SUM(o.prompt_tokens), "
            f"SUM(o.completion_tokens), SUM(o.latency_s), {imported} FROM outputs o{join} "
            "GROUP BY o.backend, o.kind ORDER BY o.backend, o.kind"
        ).fetchall()
        sources = db.execute("SELECT source, sha256, imported_at, outputs FROM imports ORDER BY id").fetchall() \
            if tracked else []
    groups = [{"backend": b, "kind": k, "outputs": n, "imported": int(imp), "first": _when(first),
               "last": _when(last), "prompt_tokens": int(pt or 0), "completion_tokens": int(ct or 0),
               "latency_s": float(lat or 0.0)}
              for b, k, n, first, last, pt, ct, lat, imp in rows]
    imports = [{"source": src, "sha256": digest, "imported_at": _when(at), "outputs": int(n)}
               for src, digest, at, n in sources]
    path = store if store is not None else default_store_path()
    if as_json:
        click.echo(json.dumps({"store": str(path), "outputs": sum(g["outputs"] for g in groups),
                               "imported": sum(g["imported"] for g in groups), "groups": groups,
                               "imports": imports}, indent=2))
        return
    table = Table(title=escape(f"Judgment store {path}"))
    for col in ("backend", "kind", "outputs", "imported", "first", "last", "prompt tokens", "completion tokens",
                "model s"):
        table.add_column(col, justify="left" if col in ("backend", "kind", "first", "last") else "right")
    for g in groups:
        table.add_row(escape(g["backend"]), escape(g["kind"]), f"{g['outputs']:,}", f"{g['imported']:,}", g["first"],
                      g["last"], f"{g['prompt_tokens']:,}", f"{g['completion_tokens']:,}", f"{g['latency_s']:,.1f}")
    Console(width=max(Console().width, 150)).print(table)
    total = sum(g["imported"] for g in groups)
    click.echo(f"{sum(g['outputs'] for g in groups):,} outputs" + (f", {total:,} of them imported" if total else ""))
    for entry in imports:
        click.echo(f"imported {entry['outputs']:,} outputs from {entry['source']} (sha256 {entry['sha256']}) at "
                   f"{entry['imported_at']}")


@store.command("export")
@STORE
@click.option("--out", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write here: JSON lines (gzip-compressed for a .gz name, as .jsonl.gz), or Parquet for a "
                   ".parquet name (default: standard output).")
@JUDGE_FILTER
@BACKEND_FILTER
@KIND_FILTER
@click.option("--quiet", "-q", is_flag=True, help="Do not say on standard error how many outputs were written where.")
def export(store: Path | None, out: Path | None, judge: str | None, backend: str | None, kind: str | None,
           quiet: bool) -> None:
    """Every stored output: key, kind, backend fingerprint, request, result, tokens, latency, time.

    Then says on standard error how many outputs it wrote and where (unless --quiet), as `store import` says
    how many it imported.
    """
    path = store if store is not None else default_store_path()
    check_outputs({"--out": out}, store=path)
    fingerprint = _fingerprint(judge, backend)
    where, params = _filters(fingerprint, kind)
    written = _export(path, out, where, params)
    if not quiet:
        click.echo(f"exported {written:,} outputs from {path} to {out if out is not None else 'standard output'}",
                   err=True)


def _export(path: Path, out: Path | None, where: str, params: list[Any]) -> int:
    """Write the selected outputs of store ``path`` to ``out`` (standard output when None); returns how many."""
    if out is not None and is_gzip(out):
        try:
            return write_export(path, out, where, params)
        except OSError as exc:
            raise click.ClickException(f"--out {out}: cannot be written: {exc.strerror or exc}") from None
    if out is not None and is_parquet(out):
        require_parquet()
        with replacing(out, "--out", binary=True) as raw:  # a temporary file, renamed once complete
            return write_parquet_export(path, raw, where, params)
    written = 0
    with _reading(path) as db, record_output(out, "--out") as fh:
        ascii_only = not is_utf8(fh)
        for row in db.execute(f"SELECT {_COLUMNS} FROM outputs{where} ORDER BY created_at, key", params):
            fh.write(json.dumps(_output(row), ensure_ascii=ascii_only) + "\n")
            written += 1
    return written


@store.command("import")
@STORE
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--only-judge", default=None,
              help="Import only this judge's outputs (a judge name; it is loaded to read its fingerprint); the "
                   "others are left out and counted.")
@click.option("--max-line-bytes", type=click.IntRange(min=1), default=MAX_LINE_BYTES, show_default=True,
              help="Refuse a line longer than this (bytes, after decompression).")
@click.option("--max-bytes", type=click.IntRange(min=1), default=MAX_IMPORT_BYTES, show_default=True,
              help="Refuse a file holding more than this (bytes, after decompression).")
def import_(store: Path | None, file: Path, only_judge: str | None, max_line_bytes: int, max_bytes: int) -> None:
    """Load FILE, an export of `store export` (JSON lines; gzip-compressed for a .gz name), into the store.

    Every row is checked first: field names and types, its key recomputed from its request, the request's kind
    and backend equal to the row's, its result checked as the judge's own results are (one log-probability per
    label, each a number <= 0; a generation's text); a bad row is refused with its line and field, and then
    nothing is imported (one transaction). An empty file is refused. Outputs the store already holds are skipped
    when their content is the same; one whose content differs is refused, naming its line. Each output added is
    recorded with the file it came from (`store stats` lists the imports). This is the only `store` command that
    writes the store.
    """
    path = store if store is not None else default_store_path()
    if file.resolve() in {path.resolve(), Path(f"{path}-wal").resolve()}:
        raise click.UsageError(f"FILE {file} is the judgment store itself: give an export")
    only = _fingerprint(only_judge, None)
    with Store(path) as target:
        done = import_file(file, target, only_backend=only, max_line_bytes=max_line_bytes, max_bytes=max_bytes)
    others = f"; {done.other_judges:,} of other judges left out" if only is not None else ""
    click.echo(f"imported {done.added:,} outputs into {path} ({done.stored:,} already stored{others})")


@store.command("search")
@STORE
@click.argument("text")
@JUDGE_FILTER
@BACKEND_FILTER
@KIND_FILTER
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1), help="Show at most this many.")
@click.option("--prompt", "show_prompt", is_flag=True, help="Print each prompt in full.")
@click.option("--json", "as_json", is_flag=True, help="Print each output as a JSON line (as `store export`).")
def search(store: Path | None, text: str, judge: str | None, backend: str | None, kind: str | None, limit: int,
           show_prompt: bool, as_json: bool) -> None:
    """Stored outputs whose request contains TEXT (a prompt's text), or whose key starts with TEXT."""
    where, params = _filters(_fingerprint(judge, backend), kind)
    escaped = json.dumps(text, ensure_ascii=False)[1:-1]  # as the request's canonical JSON holds it
    match = "(instr(request, ?) > 0 OR substr(key, 1, ?) = ?)"
    where = f"{where} AND {match}" if where else f" WHERE {match}"
    with _reading(store) as db:
        rows = db.execute(f"SELECT {_COLUMNS} FROM outputs{where} ORDER BY created_at, key LIMIT ?",
                          [*params, escaped, len(text), text, limit]).fetchall()
    for row in rows:
        output = _output(row)
        if as_json:
            click.echo(json.dumps(output))
        else:
            click.echo(_describe(output, show_prompt) + "\n")
    if not as_json:
        click.echo(f"{len(rows)} stored output(s){' (the first ' + str(limit) + ')' if len(rows) == limit else ''}",
                   err=True)


def _mode_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """``--kind``: ``all`` or a registered mode's name (checked when the command runs: plug-ins load lazily)."""
    if value != "all" and value not in MODES:
        raise click.BadParameter(f"{value!r} is not a mode; the modes are {', '.join(MODES)} (or all)")
    return value


@store.command("show")
@input_options
@click.argument("item_id")
@judge_options("score", "compare")
@click.option("--scale", type=SCALE_RANGE, default="10", show_default=True,
              help="The pointwise scale to look up, as score's --scale: a top value (10: 1..10) or a range (0-5).")
@click.option("--kind", "judgment", default="all", show_default=True, callback=_mode_name,
              help=f"Which judgments of the item to show: a mode ({', '.join(m.name for m in registered_modes())}, "
                   "or a plug-in's), or all (score and compare, and criteria and checklist where the item or suite "
                   "has them).")
@click.option("--suite", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The suite file the criteria/checklist run used (for items carrying no criteria/checklist).")
@click.option("--criteria-scale", type=SCALE_RANGE, default=None,
              help="The criteria run's --scale (a top value or a range) [default: the suite's, else 5].")
@click.option("--labels", default=None, help="The checklist run's --labels [default: the suite's, else YES/NO].")
@click.option("--prompt", "show_prompt", is_flag=True, help="Print each prompt in full.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON line per judgment.")
def show(items: Path, fmt: str, skip_invalid: bool, quiet: bool, item_id: str, judging: JudgeOptions,
         scale: int | str, judgment: str, suite: Path | None, criteria_scale: int | str | None, labels: str | None,
         show_prompt: bool,
         as_json: bool) -> None:
    """The stored outputs of item ITEM_ID's judgments in ITEMS, under the judge options given.

    The item's prompts are rebuilt as `score`, `compare`, `criteria` and `checklist` build them (same --judge,
    --scale, --protocol, --closing, templates, sampling options, suite and labels; criteria and checklist
    prompts with the bundled templates) and looked up by their store keys; nothing is judged. Any other mode
    (--kind) lists its task's questions with its default options (the suite's criteria, checklist and labels
    where it takes them); claims list the questions of given claims (extractions are not shown).
    """
    s = load_suite(suite) if suite is not None else Suite()
    # --criteria-scale and --labels stand in for the suite's scale and labels: every mode's options come from
    # the suite through its fields' metadata["suite"], as its command's do.
    s = dataclasses.replace(s, scale=criteria_scale if criteria_scale is not None else s.scale,
                            labels=labels or s.labels)
    item = _find(readable_input(items), fmt, item_id)
    path = judging.store if judging.store is not None else default_store_path()
    if not _judge_asked():
        _show_by_text(path, item, show_prompt, as_json)
        return
    with _reading(path) as db, tempfile.TemporaryDirectory(prefix="trustjudge-show-") as tmp:
        # The judge only renders prompts and computes keys: its own store is a scratch file, never the real one.
        j = dataclasses.replace(judging, store=Path(tmp) / "keys.sqlite").make(scale=scale)
        try:
            for entry in _judgments(j, item, judgment, s):
                entry["outputs"] = _stored(db, j, entry.pop("question"), entry["protocol"])
                click.echo(json.dumps(entry) if as_json else _describe_judgment(entry, show_prompt))
        finally:
            j.close()


# -- store show ---------------------------------------------------------------------------------------------


def _judge_asked() -> bool:
    """Whether this command was given a judge (``--judge``, ``TRUSTJUDGE_JUDGE`` or the project's ``judge``)."""
    ctx = click.get_current_context()
    return (ctx.get_parameter_source("judge") not in (None, ParameterSource.DEFAULT)
            or bool(os.environ.get(JUDGE_ENV)) or project_settings().judge is not None)


def _show_by_text(path: Path, item: Item, show_prompt: bool, as_json: bool) -> None:
    """``store show`` with no judge given: every stored output whose prompt quotes the item's question, of any
    judge, with no judge built (a read-only command loads no model nobody asked for)."""
    escaped = json.dumps(item.question, ensure_ascii=False)[1:-1]  # as the request's canonical JSON holds it
    with _reading(path) as db:
        rows = db.execute(f"SELECT {_COLUMNS} FROM outputs WHERE instr(request, ?) > 0 ORDER BY created_at, key",
                          [escaped]).fetchall()
    for row in rows:
        output = _output(row)
        click.echo(json.dumps(output) if as_json else _describe(output, show_prompt) + "\n")
    click.echo(f"{len(rows)} stored output(s) whose prompt holds item {item.id!r}'s question, of any judge (no "
               "judge was given, so none was built: give --judge NAME to list its judgments by mode and response, "
               "with the prompts rebuilt)", err=True)


def _find(path: Path, fmt: str, item_id: str) -> Item:
    bad = 0
    mapping = fmt.mapping if isinstance(fmt, InputFormat) else None
    for value in iter_dataset(path, fmt, mapping=mapping):
        if isinstance(value, InputError):
            bad += 1
        elif value.id == item_id:
            return value
    raise InputError(f"holds no valid item with id {item_id!r}" + (f" ({bad} invalid rows skipped)" if bad else ""),
                     file=str(path))


def _task(j: Judge, name: str, suite: Suite) -> Any:
    """The task of mode ``name`` with its default options, the suite's where it takes them (the mode's own
    methods are used: store show lists each mode's questions in its own terms)."""
    mode = MODES[name]
    return mode.task_of(j, mode.options(**suite_values(mode, suite)))


def _entries(j: Judge, item: Item, mode: Mode, suite: Suite, asked: bool) -> Iterator[dict[str, Any]]:
    """Each judgment of ``item`` under ``mode`` as it declares them (``Mode.stored``), named by the mode."""
    task = _task(j, mode.name, suite)
    for entry in mode.stored.entries(task, item, j.backend.format_prompt, asked):
        yield {"judgment": mode.name, **entry}


def _judgments(j: Judge, item: Item, judgment: str, suite: Suite) -> Iterator[dict[str, Any]]:
    """Each judgment of ``item`` that mode ``judgment`` (``all``: those the modes list there, ``Mode.stored``)
    would make, with its question (with ``all``, criteria and checklist only where the item or the suite gives
    some)."""
    if judgment != "all":
        yield from _entries(j, item, get_mode(judgment), suite, True)
        return
    for mode in registered_modes():
        if mode.stored.listed:
            yield from _entries(j, item, mode, suite, False)


def _get(db: sqlite3.Connection, key: str) -> dict[str, Any] | None:
    row = db.execute(f"SELECT {_COLUMNS} FROM outputs WHERE key = ?", (key,)).fetchone()
    return _output(row) if row is not None else None


def _stored(db: sqlite3.Connection, j: Judge, question: Question | str, protocol: str) -> list[dict[str, Any]]:
    """The stored outputs of one question asked under ``protocol``: its label distribution, after its critique
    with ``cot``; a question with none stored is a ``{"key", "stored": false}`` entry, and one judged without a
    call its reason."""
    if isinstance(question, str):
        return [{"unscored": question, "stored": False}]
    engine = j.engine
    prompt = question.prompt
    found: list[dict[str, Any]] = []
    if protocol == "cot":
        key = engine.generate_key(j.sampling("cot").request(question))
        generation = _get(db, key)
        found.append(generation or {"key": key, "kind": "generate", "stored": False})
        if generation is None or generation["result"].get("finish_reason") == "length":
            return found
        prompt = prompt + str(generation["result"].get("text", "")) + question.marker
    key = engine.label_key(Job(prompt, question.labels))
    found.append(_get(db, key) or {"key": key, "kind": "labels", "stored": False})
    return found


def _labels(output: dict[str, Any], top: int = 5) -> str:
    labels = output["request"].get("labels") or []
    logprobs = output["result"].get("logprobs") or []
    probs = [(lab, math.exp(lp)) for lab, lp in zip(labels, logprobs) if lp is not None]
    mass = sum(p for _, p in probs)
    best = sorted(probs, key=lambda entry: -entry[1])[:top]
    method = output["result"].get("label_method", output["result"].get("method", "exact"))
    return "  ".join(f"{lab} {p:.3f}" for lab, p in best) + f"   (label mass {mass:.3f}, {method})"


def _describe(output: dict[str, Any], show_prompt: bool, indent: str = "") -> str:
    """A stored output as text: key, backend, time, tokens, and the labels' top probabilities or the critique."""
    if output.get("stored") is False:
        if "unscored" in output:
            return f"{indent}no model call: {output['unscored']}"
        return f"{indent}{output['kind']} {output['key']}: not in the store"
    lines = [f"{indent}{output['kind']} {output['key']}",
             f"{indent}  backend {output['backend']}; stored {output['created']}; {output['prompt_tokens']} prompt + "
             f"{output['completion_tokens']} completion tokens; {output['latency_s']:.3f} s"]
    if show_prompt:
        lines += [f"{indent}  prompt:", *(f"{indent}    {line}" for line in output["request"]["prompt"].splitlines())]
    if output["kind"] == "labels":
        lines.append(f"{indent}  labels: {_labels(output)}")
    else:
        result = output["result"]
        lines.append(f"{indent}  critique ({result.get('finish_reason')}): {result.get('text', '')!r}")
    return "\n".join(lines)


def _describe_judgment(entry: dict[str, Any], show_prompt: bool) -> str:
    head = get_mode(entry["judgment"]).stored.heading(entry)
    return "\n".join([head, *(_describe(o, show_prompt, "  ") for o in entry["outputs"])]) + "\n"
