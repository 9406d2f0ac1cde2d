"""The data model (items, responses, pairs, human labels, suites) and the validation of its fields.

An item is one question with two or more responses::

    {"id": "q1", "question": "...", "context": "...", "reference": "...",
     "responses": [{"id": "a", "text": "...", "system": "model-x", "human_score": 4}],
     "pairs": [{"first": "a", "second": "b", "human": "first"}]}

The flat pairwise form ``{"question", "response_a", "response_b", "label"}`` is accepted too.

Judging modes add optional fields (docs/modes.md)::

    {"profile": "...", "knowledge": "...", "evidence": ["passage 1", "passage 2"],
     "criteria": [{"name": "accuracy", "description": "...", "weight": 2, "levels": ["wrong", ..., "exact"]}],
     "checklist": [{"id": "c1", "text": "Does it name the capital?", "weight": 1}],
     "responses": [{"id": "a", "text": "...", "checklist": [...],
                    "human_criteria": {"accuracy": 4}, "human_checks": {"c1": true}}]}

The files these records come from are read by :mod:`trustjudge.io._files`.

Coercions, all of them: a number where a text is expected is read as its JSON text (``"id": 3`` is ``"3"``);
a number field (``human_score``, ``weight``, ``scale``) takes a number or a string holding one in plain
decimal notation (``"4"``, ``"4.5"``, ``"1e3"``: CSV holds nothing else), and refuses any other string
(``"4 stars"``, ``"1_000"``, ``"nan"``). Numbers must be finite; weights are at most :data:`MAX_WEIGHT`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._images import MAX_IMAGES, Image, Sources, load_image
from ..errors import InputError
from ._item_types import HUMAN_ALIASES as HUMAN_ALIASES
from ._item_types import MAX_FIELD_CHARS as MAX_FIELD_CHARS
from ._item_types import MAX_LEVELS as MAX_LEVELS
from ._item_types import MAX_TURNS as MAX_TURNS
from ._item_types import MAX_WEIGHT as MAX_WEIGHT
from ._item_types import TRANSCRIPT_TAGS as TRANSCRIPT_TAGS
from ._item_types import TURN_FIELDS as TURN_FIELDS
from ._item_types import TURN_ROLES as TURN_ROLES
from ._item_types import Check as Check
from ._item_types import Claim as Claim
from ._item_types import Criterion as Criterion
from ._item_types import HumanCheck as HumanCheck
from ._item_types import Item as Item
from ._item_types import Pair as Pair
from ._item_types import Response as Response
from ._item_types import Turn as Turn
from ._item_types import _text_arg as _text_arg
from ._item_types import render_turn as render_turn
from ._item_types import shown as shown
from ._item_types import transcript as transcript
from ._item_types import turns_digest as turns_digest
from ._item_types import unicode_problem as unicode_problem

_DECIMAL = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
"""A number written in plain decimal notation (what a number field accepts as a string)."""


def looks_like_item(record: Any) -> bool:
    """Whether a decoded record has the shape of an item (a question with responses, or a flat pair)."""
    return isinstance(record, dict) and "question" in record and (
        "responses" in record or "response_a" in record or "response_b" in record)


class _Fields:
    """Typed access to one record's fields with errors that name file, line and field."""

    def __init__(self, record: Any, file: str, line: int, prefix: str = "") -> None:
        if not isinstance(record, dict):
            raise InputError(f"expected a JSON object, got {type(record).__name__}", file=file, line=line,
                             field=prefix.rstrip(".") or None)
        self.record, self.file, self.line, self.prefix = record, file, line, prefix

    def error(self, name: str, message: str) -> InputError:
        return InputError(message, file=self.file, line=self.line, field=self.prefix + name)

    def text(self, name: str, *, required: bool = True, allow_empty: bool = False,
             default: str | None = None) -> str | None:
        value = self.record.get(name)
        if value is None:
            if required:
                raise self.error(name, "is missing")
            return default
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.error(name, f"must be a string, got {type(value).__name__}")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(name, f"must be a string, got the number {value!r}")
        text = str(value)
        problem = unicode_problem(text)
        if problem:
            raise self.error(name, problem)
        if not allow_empty and not text.strip():
            raise self.error(name, "must not be empty")
        if len(text) > MAX_FIELD_CHARS:
            raise self.error(name, f"is {len(text):,} characters long (limit {MAX_FIELD_CHARS:,})")
        return text

    def number(self, name: str) -> float | None:
        value = self.record.get(name)
        if value is None or value == "":
            return None
        if isinstance(value, bool):
            raise self.error(name, "must be a number, got a boolean")
        if isinstance(value, str):
            if not _DECIMAL.fullmatch(value.strip()):
                raise self.error(name, f"must be a number (a string must hold one in decimal notation), "
                                       f"got {shown(value)}")
            value = value.strip()
        elif not isinstance(value, (int, float)):
            raise self.error(name, f"must be a number, got {type(value).__name__} {shown(value)}")
        try:
            number = float(value)
        except OverflowError:  # an integer beyond any float
            number = math.inf
        if not math.isfinite(number):
            raise self.error(name, f"must be a finite number, got {shown(value)}")
        return number

    def human(self, name: str, value: Any = None) -> str | None:
        if value is None:
            value = self.record.get(name)
        if value is None or value == "":
            return None
        # str() only of a scalar: a deeply nested list has no str() (RecursionError)
        key = str(value).strip().lower() if isinstance(value, (str, int, float)) and not isinstance(value, bool) else ""
        if isinstance(value, float) and value.is_integer():
            key = str(int(value))
        if key not in HUMAN_ALIASES:
            raise self.error(name, f"must be first/second/tie (or A/B/C, 1/2/0), got {shown(value)}")
        return HUMAN_ALIASES[key]


def _weight(f: _Fields) -> float:
    weight = f.number("weight")
    if weight is None:
        return 1.0
    if weight < 0:
        raise f.error("weight", f"must be 0 or more, got {weight:g}")
    if weight > MAX_WEIGHT:
        raise f.error("weight", f"must be at most {MAX_WEIGHT:g} (weights are relative: scale them down), "
                                f"got {weight:g}")
    return weight


def _list(f: _Fields, name: str, what: str) -> list[Any]:
    raw = f.record.get(name)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise f.error(name, f"must be a list of {what}")
    return raw


def parse_criteria(raw: Any, file: str, line: int, prefix: str = "") -> tuple[Criterion, ...]:
    """Validate a list of criteria (an item's or a suite's ``criteria``)."""
    f = _Fields({"criteria": raw}, file, line, prefix)
    out: list[Criterion] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(_list(f, "criteria", "{name, description} objects")):
        cf = _Fields(entry, file, line, f"{prefix}criteria[{i}].")
        name, description = cf.text("name"), cf.text("description")
        assert name is not None and description is not None
        if name in seen:
            raise cf.error("name", f"repeats criteria[{seen[name]}]'s name {name!r}")
        seen[name] = i
        levels, values, labels = _levels(cf)
        weight = _weight(cf)
        try:
            out.append(Criterion(name, description, weight, levels, values, labels))
        except InputError as exc:
            raise cf.error(exc.field or "levels", exc.reason) from None
    if out and sum(c.weight for c in out) <= 0:
        raise f.error("criteria", "the weights add up to 0: give at least one criterion a positive weight")
    return tuple(out)


def _element(f: _Fields, where: str, value: Any) -> str:
    """One string element of a list field, validated like a field named ``where``."""
    text = _Fields({where: value}, f.file, f.line, f.prefix).text(where)
    assert text is not None
    return text


def _level(f: _Fields, k: int, value: Any) -> str:
    return _element(f, f"levels[{k}]", value)


def _levels(cf: _Fields) -> tuple[tuple[str, ...], tuple[int, ...], tuple[str, ...]]:
    """A criterion's ``levels`` (texts, lowest first, numbered from ``scale_min``, default 1; or objects
    ``{"value", "description", "label"?}``) as its level texts, values and labels."""
    raw = _list(cf, "levels", "level descriptions, lowest first")
    start = cf.number("scale_min")
    if start is not None and start != int(start):
        raise cf.error("scale_min", f"must be an integer, got {start:g}")
    if not raw and start is not None:
        raise cf.error("scale_min", "numbers the levels: give \"levels\" too (or the task's scale a range)")
    if not raw or not any(isinstance(v, dict) for v in raw):
        levels = tuple(_level(cf, k, v) for k, v in enumerate(raw))
        if levels and not 2 <= len(levels) <= MAX_LEVELS:
            raise cf.error("levels", f"must describe 2 to {MAX_LEVELS} levels, got {len(levels)}")
        values = tuple(range(int(start), int(start) + len(levels))) if start is not None and start != 1 else ()
        return levels, values, ()
    if start is not None:
        raise cf.error("scale_min", "levels given as objects carry their own values: leave scale_min out")
    texts: list[str] = []
    values_: list[int] = []
    labels: list[str] = []
    for k, entry in enumerate(raw):
        lf = _Fields(entry, cf.file, cf.line, f"{cf.prefix}levels[{k}].")
        unknown = set(entry) - {"value", "description", "label"}
        if unknown:
            raise lf.error(sorted(unknown)[0], "is not a level field (known: value, description, label)")
        value = lf.number("value")
        if value is None:
            raise lf.error("value", "is missing (each level object gives its integer value)")
        if value != int(value):
            raise lf.error("value", f"must be an integer, got {value:g}")
        description = lf.text("description")
        assert description is not None
        texts.append(description)
        values_.append(int(value))
        label = lf.text("label", required=False)
        if label is not None:
            labels.append(label)
    if labels and len(labels) != len(raw):
        raise cf.error("levels", "give every level a label, or none")
    if not 2 <= len(texts) <= MAX_LEVELS:
        raise cf.error("levels", f"must describe 2 to {MAX_LEVELS} levels, got {len(texts)}")
    return tuple(texts), tuple(values_), tuple(labels)


def parse_checklist(raw: Any, file: str, line: int, prefix: str = "") -> tuple[Check, ...]:
    """Validate a list of checks (an item's, a response's or a suite's ``checklist``)."""
    f = _Fields({"checklist": raw}, file, line, prefix)
    out: list[Check] = []
    for i, entry in enumerate(_list(f, "checklist", "{id, text} objects or strings")):
        if isinstance(entry, str):
            entry = {"text": entry}
        cf = _Fields(entry, file, line, f"{prefix}checklist[{i}].")
        text = cf.text("text")
        assert text is not None
        out.append(Check(cf.text("id", required=False) or str(i + 1), text, _weight(cf)))
    return tuple(out)


def _human_map(f: _Fields, name: str, numbers_only: bool) -> dict[str, Any] | None:
    raw = f.record.get(name)
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise f.error(name, "must be an object mapping a name to a label")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        where = f"{name}.{key}"
        if isinstance(value, bool):
            if numbers_only:
                raise f.error(where, "must be a number, got a boolean")
            out[key] = 1.0 if value else 0.0
        elif isinstance(value, (int, float)):
            number = float(value) if isinstance(value, float) or abs(value) < 2**1023 else math.inf
            if not math.isfinite(number):
                raise f.error(where, "must be a finite number")
            if not numbers_only and not 0 <= number <= 1:
                raise f.error(where, f"must be between 0 and 1 (or true/false, or a label), got {number:g}")
            out[key] = number
        elif isinstance(value, str) and not numbers_only and value.strip():
            out[key] = value.strip()
        elif value is not None:
            raise f.error(where, f"must be a {'number' if numbers_only else 'boolean, number or label'}, "
                                 f"got {shown(value)}")
    return out


def parse_images(f: _Fields, name: str, base: Path | None, sources: Sources) -> tuple[Image, ...]:
    """A field of images: one (a string) or a list of paths, ``data:`` URIs or URLs, each read and checked."""
    raw = f.record.get(name)
    if raw is None or raw == "" or raw == []:
        return ()
    entries = [raw] if isinstance(raw, str) else raw
    if not isinstance(entries, list):
        raise f.error(name, "must be an image (a path, data: URI or URL) or a list of them")
    if len(entries) > MAX_IMAGES:
        raise f.error(name, f"lists {len(entries):,} images (limit {MAX_IMAGES})")
    out = []
    for k, value in enumerate(entries):
        where = name if isinstance(raw, str) else f"{name}[{k}]"
        try:
            out.append(load_image(value, where, base=base, sources=sources))
        except InputError as exc:
            raise f.error(exc.field or where, exc.reason) from None
    return tuple(out)


def _response(raw: Any, file: str, line: int, index: int, base: Path | None = None,
              sources: Sources = "any") -> Response:
    f = _Fields(raw, file, line, f"responses[{index}].")
    rid = f.text("id", required=False) or str(index)
    turns: tuple[Turn, ...] | None = None
    if raw.get("turns") is not None:
        if raw.get("text") is not None:
            raise f.error("turns", "cannot be combined with text: give the response as text or as turns")
        turns = parse_turns(raw["turns"], file, line, f"responses[{index}].")
        text = transcript(turns)
        if len(text) > MAX_FIELD_CHARS:
            raise f.error("turns", f"make a transcript of {len(text):,} characters (limit {MAX_FIELD_CHARS:,})")
    else:
        given = f.text("text", allow_empty=True)
        assert given is not None
        text = given
    return Response(rid, text, f.text("system", required=False), f.number("human_score"),
                    parse_checklist(raw.get("checklist"), file, line, f"responses[{index}]."),
                    _human_map(f, "human_criteria", numbers_only=True),
                    _human_map(f, "human_checks", numbers_only=False), _claims(f), turns,
                    parse_images(f, "images", base, sources))


def parse_turns(raw: Any, file: str, line: int, prefix: str = "") -> tuple[Turn, ...]:
    """Validate a response's ``turns``: a non-empty list of ``{role, content, tool_output?, name?}`` objects."""
    f = _Fields({"turns": raw}, file, line, prefix)
    entries = _list(f, "turns", "{role, content} objects")
    if not entries:
        raise f.error("turns", "must hold at least one turn")
    if len(entries) > MAX_TURNS:
        raise f.error("turns", f"holds {len(entries):,} turns (limit {MAX_TURNS:,})")
    out = []
    for i, entry in enumerate(entries):
        tf = _Fields(entry, file, line, f"{prefix}turns[{i}].")
        unknown = set(entry) - set(TURN_FIELDS)
        if unknown:
            raise tf.error(sorted(unknown)[0], f"is not a turn field (known: {', '.join(TURN_FIELDS)})")
        role = tf.text("role")
        tool_output = tf.text("tool_output", required=False, allow_empty=True)
        content = tf.text("content", allow_empty=tool_output is not None)
        name = tf.text("name", required=False)
        try:
            out.append(Turn(str(role), str(content), tool_output, name))
        except InputError as exc:
            raise tf.error(exc.field or "role", exc.reason) from None
    return tuple(out)


CLAIM_LABELS = ("SUPPORTED", "PARTIAL", "UNSUPPORTED", "UNKNOWN")


def _claims(f: _Fields) -> tuple[Claim, ...] | None:
    raw = f.record.get("claims")
    if raw is None:
        return None
    out = []
    for i, entry in enumerate(_list(f, "claims", "claims (strings or {text, human} objects)")):
        if isinstance(entry, str):
            entry = {"text": entry}
        cf = _Fields(entry, f.file, f.line, f"{f.prefix}claims[{i}].")
        text = cf.text("text")
        human = cf.text("human", required=False)
        source = cf.text("source", required=False)
        if human is not None and human.strip().upper() not in CLAIM_LABELS:
            raise cf.error("human", f"must be one of {', '.join(CLAIM_LABELS)}, got {shown(human)}")
        assert text is not None
        out.append(Claim(text, human.strip().upper() if human else None, source))
    return tuple(out)


def _gold_claims(f: _Fields) -> tuple[str, ...] | None:
    raw = f.record.get("gold_claims")
    if raw is None:
        return None
    return tuple(_element(f, f"gold_claims[{i}]", v) for i, v in enumerate(_list(f, "gold_claims", "strings")))


def _sources(f: _Fields) -> dict[str, str] | None:
    raw = f.record.get("sources")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise f.error("sources", "must be an object mapping a source id to its text")
    return {str(key): _element(f, f"sources.{key}", value) for key, value in raw.items()}


def _check_cited(f: _Fields, responses: tuple[Response, ...], sources: dict[str, str] | None) -> None:
    """Every claim's ``source`` names one of the item's sources."""
    for i, r in enumerate(responses):
        for j, c in enumerate(r.claims or ()):
            if c.source is not None and c.source not in (sources or {}):
                known = f"its sources: {', '.join(sources)}" if sources else "the item has no sources"
                raise f.error(f"responses[{i}].claims[{j}].source",
                              f"names no source of this item: {c.source!r} ({known})")


def _evidence(f: _Fields) -> tuple[str, ...]:
    raw = f.record.get("evidence")
    if raw is None:
        return ()
    if isinstance(raw, str):
        text = f.text("evidence")
        return (text,) if text else ()
    if not isinstance(raw, list):
        raise f.error("evidence", "must be a string or a list of passages")
    out = []
    for i, value in enumerate(raw):
        out.append(_element(f, f"evidence[{i}]", value))
    return tuple(out)


def _modes(f: _Fields) -> dict[str, Any]:
    """The judging-mode fields of an item (grounding blocks, criteria, checklist)."""
    return dict(profile=f.text("profile", required=False), knowledge=f.text("knowledge", required=False),
                evidence=_evidence(f), criteria=parse_criteria(f.record.get("criteria"), f.file, f.line),
                checklist=parse_checklist(f.record.get("checklist"), f.file, f.line), gold_claims=_gold_claims(f),
                sources=_sources(f))


def parse_record(record: Any, file: str, line: int, *, base: Path | None = None,
                 sources: Sources = "any") -> Item:
    """Validate one decoded record (nested or flat pairwise form) into an :class:`Item`.

    ``base``: the folder image paths are relative to (the items file's; default the working folder);
    ``sources``: ``data`` takes images as ``data:`` URIs only (the service)."""
    f = _Fields(record, file, line)
    question = f.text("question")
    assert question is not None
    context = f.text("context", required=False) or f.text("input", required=False)
    reference = f.text("reference", required=False)
    if "response_a" in record or "response_b" in record:
        for other in ("responses", "pairs"):
            if record.get(other) is not None:
                raise f.error(other, "cannot be combined with response_a/response_b: use one form")
        a = f.text("response_a", allow_empty=True)
        b = f.text("response_b", allow_empty=True)
        assert a is not None and b is not None
        flat_id = f.text("id", required=False) or f"line-{line}"
        flat = (Response("a", a, f.text("system_a", required=False),
                         images=parse_images(f, "images_a", base, sources)),
                Response("b", b, f.text("system_b", required=False),
                         images=parse_images(f, "images_b", base, sources)))
        return Item(flat_id, question, flat, context, reference, (Pair("a", "b", f.human("label")),), line,
                    **_modes(f), images=parse_images(f, "images", base, sources),
                    reference_images=parse_images(f, "reference_images", base, sources))
    item_id = f.text("id")
    assert item_id is not None
    raw_responses = record.get("responses")
    if not isinstance(raw_responses, list):
        raise f.error("responses",
                      "must be a list of {id, text} objects" if raw_responses is not None else "is missing")
    if not raw_responses:
        raise f.error("responses", "must hold at least one response")
    responses = tuple(_response(r, file, line, i, base, sources) for i, r in enumerate(raw_responses))
    seen: set[str] = set()
    for i, r in enumerate(responses):
        if r.id in seen:
            raise f.error(f"responses[{i}].id", f"duplicate response id {r.id!r}")
        seen.add(r.id)
    pairs: tuple[Pair, ...] | None = None
    if record.get("pairs") is not None:
        raw_pairs = record["pairs"]
        if not isinstance(raw_pairs, list):
            raise f.error("pairs", "must be a list of {first, second} objects")
        if not raw_pairs:
            raise f.error("pairs", "must hold at least one pair (omit it to compare every pair of responses)")
        built = []
        where: dict[frozenset[str], int] = {}
        for i, raw in enumerate(raw_pairs):
            pf = _Fields(raw, file, line, f"pairs[{i}].")
            first, second = pf.text("first"), pf.text("second")
            for name, rid in (("first", first), ("second", second)):
                if rid not in seen:
                    raise pf.error(name, f"names no response of this item: {rid!r}")
            if first == second:
                raise pf.error("second", "must differ from first")
            both = frozenset((str(first), str(second)))
            if both in where:  # each pair is judged in both orders already
                raise pf.error("first", f"repeats pairs[{where[both]}] (every pair is judged in both orders)")
            where[both] = i
            annotators = raw.get("annotators") or []
            if not isinstance(annotators, list):
                raise pf.error("annotators", "must be a list")
            for k, v in enumerate(annotators):
                if v is None or v == "":  # a missing label is left out of the list, not written as null
                    raise pf.error(f"annotators[{k}]", f"must be first/second/tie (or A/B/C, 1/2/0), got {shown(v)}")
            ann = tuple(pf.human(f"annotators[{k}]", v) or "" for k, v in enumerate(annotators))
            built.append(Pair(str(first), str(second), pf.human("human"), ann))
        pairs = tuple(built)
    modes = _modes(f)
    _check_cited(f, responses, modes["sources"])
    return Item(item_id, question, responses, context, reference, pairs, line, **modes, fields=_other_fields(record),
                images=parse_images(f, "images", base, sources),
                reference_images=parse_images(f, "reference_images", base, sources))


_PARSED = frozenset({"id", "question", "context", "input", "reference", "responses", "pairs", "profile", "knowledge",
                     "evidence", "criteria", "checklist", "gold_claims", "sources", "images", "reference_images"})


def _other_fields(record: dict[str, Any]) -> dict[str, str | int | float | bool]:
    """The record's top-level scalar fields that no item field holds (a benchmark's ``subset``, ...): numbers,
    booleans and strings of up to 200 characters (a label, not a text)."""
    out: dict[str, str | int | float | bool] = {}
    for key, value in record.items():
        if key in _PARSED or not isinstance(value, (str, int, float, bool)):
            continue
        if not isinstance(value, str) or len(value) <= 200:
            out[key] = value
    return out


def items_from_dicts(records: Iterable[dict[str, Any]], *, source: str = "<memory>", base: Path | None = None,
                     sources: Sources = "any") -> list[Item]:
    """Validate in-memory records (the same schema as a JSONL line); two records with one id are refused
    (their judgments would be merged under that id). ``base``: the folder image paths are relative to;
    ``sources="data"``: images as ``data:`` URIs only."""
    out: list[Item] = []
    seen: dict[str, int] = {}
    for i, record in enumerate(records, start=1):
        item = parse_record(record, source, i, base=base, sources=sources)
        if item.id in seen:
            raise InputError(f"duplicate item id {item.id!r} (also record {seen[item.id]}): items are not merged",
                             file=source, line=i, field="id")
        seen[item.id] = i
        out.append(item)
    return out
