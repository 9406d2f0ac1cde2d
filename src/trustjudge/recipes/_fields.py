"""The fields of ``recipe.toml`` besides the mode, its options and the metric: reading the file, the texts and
tables, the template paths (inside the recipe's folder), ``requires``, ``[provenance]``, ``[benchmark_prompt]``,
``[input]``, ``[rubrics]`` and ``[metric] by``. Every problem is an InputError naming the file and field."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputError
from ..modes._registry import get_mode
from ..modes._templates import read_template
from ._prompt import parse_benchmark_prompt

RESPONSE_NEEDS = ("claims", "human_score", "human_criteria", "system")
"""What ``requires`` may name of each response, as ``responses.NAME``."""
RUBRIC_KINDS = ("pointwise", "check", "criterion")
"""The templates that judge one response on its own: what a per-item rubric replaces."""


def _toml(path: Path) -> dict[str, Any]:
    name = str(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise InputError(f"cannot read the recipe: {exc.strerror or exc}", file=name) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"invalid UTF-8 at byte {exc.start}", file=name) from None
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]  # Python 3.11+
    except ImportError:  # Python 3.10
        import tomli as tomllib
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"invalid TOML: {exc}", file=name) from None
    return data


def _text(data: Mapping[str, Any], key: str, file: str, *, required: bool = True) -> str:
    value = data.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise InputError("must be a non-empty string" if key in data else "is missing", file=file, field=key)
    return value.strip()


def _table(data: Mapping[str, Any], key: str, file: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise InputError(f"must be a table ([{key}]), got {type(value).__name__}", file=file, field=key)
    return value



def _inside(recipe_file: Path, name: str, where: str) -> Path:
    """The template file ``name`` of a recipe, resolved (links followed) inside the recipe's own folder: an
    absolute path, or one that leaves the folder (``..``, a link out), is refused, since a template's text goes
    into every prompt, the store and a remote judge."""
    file = str(recipe_file)
    if Path(name).is_absolute() or re.match(r"^[A-Za-z]:[\\/]", name) or name.startswith(("\\", "~")):
        raise InputError(f"must be a path relative to the recipe's folder, got the absolute path {name!r}", file=file,
                         field=where)
    folder = recipe_file.parent.resolve()
    t = (folder / name).resolve()
    if not t.is_relative_to(folder):
        raise InputError(f"names {name!r}, which resolves outside the recipe's folder ({t} is not under {folder}): "
                         "a template must be a file in the recipe's folder", file=file, field=where)
    if not t.is_file():
        raise InputError(f"names {name!r}, which is not a file beside the recipe ({t})", file=file, field=where)
    return t



def _requires(data: Mapping[str, Any], file: str) -> tuple[str, ...]:
    raw = data.get("requires", [])
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise InputError('must be a list of field names (["reference"], ["gold_claims"], ["responses.claims"])',
                         file=file, field="requires")
    for need in raw:
        if need.startswith("responses."):
            if need.split(".", 1)[1] not in RESPONSE_NEEDS:
                raise InputError(f"names no response field a recipe can require: {need!r} (known: "
                                 f"{', '.join('responses.' + n for n in RESPONSE_NEEDS)})", file=file, field="requires")
        elif not re.fullmatch(r"[A-Za-z_][\w-]*", need):
            raise InputError(f"must be an item field's name, got {need!r}", file=file, field="requires")
    return tuple(raw)


PROVENANCE_FIELDS = {"paper", "repository", "commit", "license", "data", "data_license", "judge", "files",
                     "prompt", "formula", "notes"}


def _settings(data: Mapping[str, Any], section: str, known: set[str], noun: str, file: str,
              check: Callable[[str, Any], str]) -> dict[str, Any]:
    """The table ``[section]``, each key one of ``known`` (else "is not a NOUN (known: ...)") and each value
    passing ``check``, which gives the problem of a bad one ("must be a string") or an empty string."""
    raw = _table(data, section, file)
    for key, value in raw.items():
        if key not in known:
            raise InputError(f"is not {noun} (known: {', '.join(sorted(known))})", file=file,
                             field=f"{section}.{key}")
        problem = check(key, value)
        if problem:
            raise InputError(problem, file=file, field=f"{section}.{key}")
    return dict(raw)


def _provenance_value(key: str, value: Any) -> str:
    """``files``: a table of protocol element -> file of the repository; the others: strings."""
    if key == "files":
        ok = isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        return "" if ok else "must be a table of element -> file"
    return "" if isinstance(value, str) else "must be a string"


def _provenance(data: Mapping[str, Any], file: str) -> dict[str, Any]:
    """``[provenance]``: strings, and ``files``: a table of protocol element -> file of the repository."""
    return _settings(data, "provenance", PROVENANCE_FIELDS, "a provenance field", file, _provenance_value)


def _benchmark_prompt(data: Mapping[str, Any], path: Path) -> dict[str, Any]:
    return parse_benchmark_prompt(_table(data, "benchmark_prompt", str(path)), path)


INPUT_FIELDS = {"format", "checklist_from", "split", "execute"}


def _input(data: Mapping[str, Any], file: str) -> dict[str, Any]:
    raw = _settings(data, "input", INPUT_FIELDS, "an input setting", file,
                    lambda _, value: "" if isinstance(value, str) and value else "must be a non-empty string")
    for key, allowed in (("split", ("lines", "numbered")), ("execute", ("response",))):  # execute: its code runs
        if key in raw and raw[key] not in allowed:
            raise InputError(f"must be {' or '.join(allowed)}", file=file, field=f"input.{key}")
    if "checklist_from" in raw and raw["checklist_from"] != "reference":
        raise InputError("must be reference (one check per step of the item's reference)", file=file,
                         field="input.checklist_from")
    return dict(raw)


def rubric_kind(mode: str) -> str:
    """The template a per-item rubric replaces in ``mode``: the first of the mode's templates that judges one
    response on its own (``pointwise``, ``check``, ``criterion``); empty where the mode has none."""
    try:
        templates = get_mode(mode).templates
    except ConfigError:
        return ""
    return next((name for name in templates if name in RUBRIC_KINDS), "")


def staged(mode: str) -> bool:
    """Whether ``mode`` takes its prompts per stage (its ``templates`` option: claims' extract, verify, match)."""
    try:
        return "templates" in {f.name for f in dataclasses.fields(get_mode(mode).options)}
    except ConfigError:
        return False


def _rubrics(data: Mapping[str, Any], path: Path
             ) -> tuple[dict[str, Path], str, dict[str, dict[str, Any]]]:
    """``[rubrics]``: ``by`` (an item field), ``files`` (value -> template file inside the recipe's folder) and
    ``benchmark`` (value -> the benchmark's own prompt for those items, a ``[benchmark_prompt]`` table whose
    ``kind`` is the rubric's, read only with ``--benchmark-dir``)."""
    file = str(path)
    raw = _table(data, "rubrics", file)
    if not raw:
        return {}, "", {}
    for key in raw:
        if key not in ("by", "files", "benchmark"):
            raise InputError("is not a rubrics field (known: benchmark, by, files)", file=file, field=f"rubrics.{key}")
    by, files = raw.get("by"), raw.get("files")
    if not isinstance(by, str) or not re.fullmatch(r"[A-Za-z_][\w-]*", by):
        raise InputError("must name the item field that picks the rubric (task)", file=file, field="rubrics.by")
    if not isinstance(files, dict) or not files or not all(isinstance(v, str) for v in files.values()):
        raise InputError('must be a table of value -> template file ({ celltype = "celltype.txt" })', file=file,
                         field="rubrics.files")
    kind = rubric_kind(str(data.get("mode", "")))
    if not kind:
        raise InputError("applies to a mode that judges each response on one template (score, checklist, criteria)",
                         file=file, field="rubrics")
    fields = get_mode(str(data["mode"])).templates[kind].fields
    out = {}
    for k, v in files.items():
        out[str(k)] = _inside(path, v, f"rubrics.files.{k}")
        try:
            read_template(out[str(k)], f"{kind}.txt", fields)
        except ConfigError as exc:
            raise InputError(str(exc), file=file, field=f"rubrics.files.{k}") from None
    return out, by, _rubric_benchmark(raw.get("benchmark", {}), out, kind, path)


def _rubric_benchmark(raw: Any, files: Mapping[str, Path], kind: str, path: Path) -> dict[str, dict[str, Any]]:
    """``[rubrics.benchmark.VALUE]``: the benchmark's prompt of each rubric (checked as ``[benchmark_prompt]``)."""
    file = str(path)
    if not isinstance(raw, dict):
        raise InputError("must be a table of value -> benchmark prompt ([rubrics.benchmark.celltype])", file=file,
                         field="rubrics.benchmark")
    out: dict[str, dict[str, Any]] = {}
    for value, spec in raw.items():
        where = f"rubrics.benchmark.{value}"
        if value not in files:
            raise InputError(f"names no rubric of rubrics.files (its values: {', '.join(files)}): the recipe's own "
                             "rubric stays the default where the user has no checkout", file=file, field=where)
        if not isinstance(spec, dict):
            raise InputError(f"must be a table ([{where}])", file=file, field=where)
        if spec.get("kind", kind) != kind:
            raise InputError(f"must be {kind} (the template a rubric replaces) or left out", file=file,
                             field=f"{where}.kind")
        try:
            out[str(value)] = parse_benchmark_prompt({**spec, "kind": kind}, path)
        except InputError as exc:
            raise InputError(exc.reason, file=file, field=str(exc.field).replace("benchmark_prompt", where)) from None
    return out


def _by(data: Mapping[str, Any], file: str) -> str:
    """``[metric] by``: the item field to break the metric down by (empty: none)."""
    raw = data.get("metric")
    by = raw.get("by", "") if isinstance(raw, dict) else ""
    if not isinstance(by, str) or (by and not re.fullmatch(r"[A-Za-z_][\w-]*", by)):
        raise InputError(f"must be an item field's name (subset, category), got {by!r}", file=file, field="metric.by")
    return by
