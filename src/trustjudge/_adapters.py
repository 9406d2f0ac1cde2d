"""Adapters that read public judge-evaluation datasets, in their own formats, as trustjudge items.

Supported formats (``FORMATS``):

* ``items``: trustjudge's own JSONL / CSV (see :mod:`trustjudge._items`).
* ``pandalm``: PandaLM ``testset-v1.json``; rows are grouped into one item per prompt, responses are
  keyed by text, each row becomes one pair with its three annotators' labels.
* ``llmbar``: LLMBar ``dataset.json``; one item per row with responses ``"1"`` and ``"2"``.
* ``topical-chat``: USR Topical-Chat ``topical_chat.json``; rows are grouped by (dialogue, fact) into
  items of scored responses (``human_score`` = mean ``overall`` rating).
* ``trustjudge-demo``: TrustJudge answers JSONL; one item per question, two responses per score level.

Bad rows come out as :class:`InputError` values (not raised) so callers can skip them; a file that
cannot be read at all raises.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from ._items import Item, Pair, Response, _jsonl_records, iter_items, unicode_problem
from .errors import ConfigError, InputError

FORMATS = ("items", "pandalm", "llmbar", "topical-chat", "trustjudge-demo")
TOPICAL_CHAT_PROMPT = "Write the next turn of this conversation.\n\n"
_PANDALM_LABELS = {0: "tie", 1: "first", 2: "second"}

_Adapter = Callable[[Path, list[Any], list[str]], Iterator[Item | InputError]]


def _short_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]


def _load_array(path: Path) -> list[Any]:
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


class _Row:
    """Typed access to one JSON-array row; errors name the file, the row (1-based) and the field."""

    def __init__(self, record: Any, file: str, line: int) -> None:
        if not isinstance(record, dict):
            raise InputError(f"expected a JSON object, got {type(record).__name__}", file=file, line=line)
        self.record: dict[str, Any] = record
        self.file, self.line = file, line

    def error(self, name: str, message: str) -> InputError:
        return InputError(message, file=self.file, line=self.line, field=name)

    def text(self, name: str, *, allow_empty: bool = False, lenient: bool = False) -> str:
        """A string field; ``lenient`` also accepts booleans and numbers (converted with ``str``)."""
        value = self.record.get(name)
        if value is None:
            raise self.error(name, "is missing")
        if not isinstance(value, str):
            if not (lenient and isinstance(value, (bool, int, float))):
                raise self.error(name, f"must be a string, got {type(value).__name__}")
            value = str(value)
        problem = unicode_problem(value)
        if problem:
            raise self.error(name, problem)
        if not allow_empty and not value.strip():
            raise self.error(name, "must not be empty")
        return value

    def label(self, name: str, allowed: dict[int, str]) -> str:
        value = self.record.get(name)
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value not in allowed:
            raise self.error(name, f"must be one of {sorted(allowed)}, got {value!r:.40}")
        return allowed[value]

    def number(self, name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(name, f"must be a number, got {value!r:.40}")
        number = float(value)
        if number != number or number in (float("inf"), float("-inf")):
            raise self.error(name, "must be a finite number")
        return number


def _pandalm(path: Path, rows: list[Any], warnings: list[str]) -> Iterator[Item | InputError]:
    name = str(path)
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    out: list[tuple[int, Item | InputError]] = []
    for index, raw in enumerate(rows):
        line = index + 1
        try:
            row = _Row(raw, name, line)
            instruction = row.text("instruction", allow_empty=True)
            prompt_input = row.text("input", allow_empty=True) if row.record.get("input") is not None else ""
            if not (instruction.strip() or prompt_input.strip()):
                raise row.error("instruction", "must not be empty (nor may input be)")
            texts = (row.text("response1", allow_empty=True, lenient=True),
                     row.text("response2", allow_empty=True, lenient=True))
            systems: tuple[str | None, str | None] = (None, None)
            if row.record.get("cmp_key") is not None:
                parts = row.text("cmp_key").split("_")
                if len(parts) != 2 or not all(parts):
                    raise row.error("cmp_key", "must be '<model1>_<model2>' with one underscore")
                systems = (parts[0], parts[1])
            annotators = tuple(row.label(f"annotator{k}", _PANDALM_LABELS) for k in (1, 2, 3))
        except InputError as exc:
            out.append((line, exc))
            continue
        group = groups.setdefault((instruction, prompt_input),
                                  {"line": line, "responses": {}, "pairs": []})
        responses: dict[str, Response] = group["responses"]
        ids = []
        for text, system in zip(texts, systems):
            rid = _short_hash(text)
            responses.setdefault(text, Response(rid, text, system))
            ids.append(rid)
        if texts[0] == texts[1]:
            warnings.append(f"{name}:{line}: response1 and response2 are the same text; pair skipped")
            continue
        top, count = Counter(annotators).most_common(1)[0]
        human = top if count >= 2 else "tie"
        group["pairs"].append(Pair(ids[0], ids[1], human, annotators))
    for (instruction, prompt_input), group in groups.items():
        item_id = "pandalm-" + _short_hash(instruction + "\x00" + prompt_input)
        # One test-set prompt has a blank instruction: its input is then the whole question.
        question, context = ((instruction, prompt_input if prompt_input.strip() else None)
                             if instruction.strip() else (prompt_input, None))
        out.append((group["line"], Item(item_id, question, tuple(group["responses"].values()), context,
                                        None, tuple(group["pairs"]), group["line"])))
    yield from (value for _, value in sorted(out, key=lambda entry: entry[0]))


def _llmbar(path: Path, rows: list[Any], warnings: list[str]) -> Iterator[Item | InputError]:
    name, folder = str(path), path.resolve().parent.name
    for index, raw in enumerate(rows):
        line = index + 1
        try:
            row = _Row(raw, name, line)
            question = row.text("input")
            first = row.text("output_1", allow_empty=True, lenient=True)
            second = row.text("output_2", allow_empty=True, lenient=True)
            human = row.label("label", {1: "first", 2: "second"})
        except InputError as exc:
            yield exc
            continue
        if first == second:
            warnings.append(f"{name}:{line}: output_1 and output_2 are the same text")
        yield Item(f"{folder}-{index}", question, (Response("1", first), Response("2", second)),
                   None, None, (Pair("1", "2", human),), line)


def _topical_chat(path: Path, rows: list[Any], warnings: list[str]) -> Iterator[Item | InputError]:
    name = str(path)
    groups: dict[tuple[str, str], tuple[int, dict[str, Response]]] = {}
    out: list[tuple[int, Item | InputError]] = []
    for index, raw in enumerate(rows):
        line = index + 1
        try:
            row = _Row(raw, name, line)
            source = row.text("source")
            fact = row.text("context", allow_empty=True)
            system_id = row.text("system_id")
            output = row.text("system_output", allow_empty=True)
            scores = row.record.get("scores")
            if not isinstance(scores, dict):
                raise row.error("scores", "must be an object of rating dimensions")
            if scores.get("overall") is None:
                raise row.error("scores.overall", "is missing")
            score = row.number("scores.overall", scores["overall"])
            _, responses = groups.setdefault((source, fact), (line, {}))
            if system_id in responses:
                raise row.error("system_id", f"duplicate system {system_id!r} for this dialogue and fact")
        except InputError as exc:
            out.append((line, exc))
            continue
        responses[system_id] = Response(system_id, output, system_id, score)
    for (source, fact), (line, responses) in groups.items():
        item_id = "topical-chat-" + _short_hash(source + "\x00" + fact)
        out.append((line, Item(item_id, TOPICAL_CHAT_PROMPT + source, tuple(responses.values()),
                               fact if fact.strip() else None, None, None, line)))
    yield from (value for _, value in sorted(out, key=lambda entry: entry[0]))


def _demo_item(record: Any, file: str, line: int) -> Item:
    row = _Row(record, file, line)
    qid = row.record.get("question_id")
    if isinstance(qid, bool) or not isinstance(qid, (int, str)) or not str(qid).strip():
        raise row.error("question_id", f"must be an integer or string, got {qid!r:.40}")
    question = row.text("question")
    answers = row.record.get("answers")
    if not isinstance(answers, list) or not answers:
        raise row.error("answers", "must be a non-empty list of {score, text} objects")
    responses: list[Response] = []
    for a, answer in enumerate(answers):
        where = f"answers[{a}]"
        if not isinstance(answer, dict):
            raise row.error(where, "must be an object with score and text")
        score = row.number(f"{where}.score", answer.get("score"))
        level = str(int(score)) if score.is_integer() else str(score)
        texts = answer.get("text")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list):
            raise row.error(f"{where}.text", "must be a list of response texts")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise row.error(f"{where}.text[{i}]", f"must be a string, got {type(text).__name__}")
            responses.append(Response(f"s{level}-{i}", text, f"level{level}", score))
    repeated = [rid for rid, n in Counter(r.id for r in responses).items() if n > 1]
    if repeated:
        raise row.error("answers", f"score level repeated (response id {repeated[0]!r})")
    return Item(f"q{str(qid).strip()}", question, tuple(responses), None, None, None, line)


def _trustjudge_demo(path: Path) -> Iterator[Item | InputError]:
    for line, record in _jsonl_records(path):
        if isinstance(record, InputError):
            yield record
            continue
        try:
            yield _demo_item(record, str(path), line)
        except InputError as exc:
            yield exc


_ARRAY_ADAPTERS: dict[str, _Adapter] = {"pandalm": _pandalm, "llmbar": _llmbar, "topical-chat": _topical_chat}


_SIGNATURES = (("pandalm", {"annotator1"}), ("llmbar", {"output_1", "output_2", "label"}),
               ("topical-chat", {"system_output", "scores"}))


def _detect(path: Path) -> tuple[str, list[Any] | None]:
    with path.open("rb") as fh:
        head = fh.read(4096).decode("utf-8-sig", errors="replace").lstrip()
    # A .jsonl file is one value per line, even when its first line is a JSON array.
    if path.suffix.lower() not in (".csv", ".jsonl", ".ndjson") and head.startswith("["):
        try:
            rows = _load_array(path)
        except InputError:
            first_line = next(_jsonl_records(path), None)
            if first_line is not None and not isinstance(first_line[1], InputError):
                return "items", None  # JSON lines whose first line is an array: reported line by line
            raise
        first = rows[0] if rows else None
        for fmt, keys in _SIGNATURES:
            if isinstance(first, dict) and keys <= first.keys():
                return fmt, rows
        raise InputError("cannot tell the dataset format of this JSON array (its first row looks like no "
                         f"known dataset); pass the format explicitly, one of {', '.join(FORMATS)}",
                         file=str(path))
    for _, record in _jsonl_records(path):
        if isinstance(record, dict) and "answers" in record and "question_id" in record:
            return "trustjudge-demo", None
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
    if not p.is_file():
        raise InputError("no such file", file=str(p))
    return _detect(p)[0]


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


def iter_dataset(path: str | Path, fmt: str = "auto", *, min_responses: int = 1,
                 warnings: list[str] | None = None) -> Iterator[Item | InputError]:
    """Read a dataset file in one of :data:`FORMATS` as trustjudge items.

    The file is checked (and, for JSON arrays, decoded) when this is called; the rows are then
    streamed. Bad rows come out as :class:`InputError` values so the caller can report and skip them.

    Args:
        path: The dataset file.
        fmt: One of :data:`FORMATS`, or ``"auto"`` to detect it from the file's content.
        min_responses: Items with fewer responses come out as :class:`InputError` instead.
        warnings: If given, notes about rows that loaded with a caveat are appended to it (e.g. a
            PandaLM row comparing two identical texts, whose pair is skipped).

    Returns:
        An iterator of :class:`Item` or :class:`InputError` values, in file order.

    Raises:
        ConfigError: ``fmt`` is not a known format.
        InputError: The file is missing, is not valid JSON (for JSON-array formats), or its format
            cannot be detected.
    """
    if fmt != "auto" and fmt not in FORMATS:
        raise ConfigError(f"unknown dataset format {fmt!r}: use 'auto' or one of {', '.join(FORMATS)}")
    p = path if isinstance(path, Path) else Path(path)  # a Path subclass keeps its display name
    if not p.is_file():
        raise InputError("no such file", file=str(p))
    rows: list[Any] | None = None
    if fmt == "auto":
        fmt, rows = _detect(p)
    if fmt == "items":
        return iter_items(p, min_responses=min_responses)
    if fmt == "trustjudge-demo":
        return _checked(_trustjudge_demo(p), str(p), min_responses)
    if rows is None:
        rows = _load_array(p)
    notes = warnings if warnings is not None else []
    return _checked(_ARRAY_ADAPTERS[fmt](p, rows, notes), str(p), min_responses)


def _stratified_order(items: Sequence[Item], seed: int, key: Callable[[Item], str] | None) -> list[int]:
    """Indices of ``items`` in an order whose every prefix is a stratified sample.

    Each stratum is shuffled (seeded); its k-th item (0-based) of m gets the position (2k+1)/2m, and
    items are taken by increasing position. A prefix of n items therefore holds each stratum's share
    of n rounded to the nearest integer (Webster / Sainte-Laguë apportionment), and growing n never
    drops an item.
    """
    strata: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        strata.setdefault(key(item) if key else str(len(item.responses)), []).append(index)
    rng = random.Random(seed)
    ranked: list[tuple[Fraction, float, int]] = []
    for name in sorted(strata):
        members = strata[name]
        rng.shuffle(members)
        tiebreak = rng.random()
        ranked.extend((Fraction(2 * k + 1, 2 * len(members)), tiebreak, index)
                      for k, index in enumerate(members))
    ranked.sort()
    return [index for _, _, index in ranked]


def stratified_subset(items: Sequence[Item], n_items: int, *, seed: int = 0,
                      key: Callable[[Item], str] | None = None) -> list[Item]:
    """Choose ``n_items`` whole items so that each stratum keeps its share.

    Args:
        items: The items to choose from.
        n_items: How many to choose; all of them when it is at least ``len(items)``.
        seed: Random seed; the same seed gives the same subset.
        key: The stratum of an item; default: its number of responses.

    Returns:
        The chosen items, in their original order.

    Raises:
        ConfigError: ``n_items`` is negative.
    """
    if n_items < 0:
        raise ConfigError(f"n_items must be 0 or more, got {n_items}")
    chosen = sorted(_stratified_order(items, seed, key)[:n_items])
    return [items[i] for i in chosen]


def budget_subset(items: Sequence[Item], max_judgments: int, per_item: Callable[[Item], int], *,
                  seed: int = 0, key: Callable[[Item], str] | None = None) -> list[Item]:
    """Choose stratified whole items until a judgment budget is reached.

    Items are taken in the same stratified order as :func:`stratified_subset`; selection stops at the
    first item whose cost would exceed the budget (skipping it to take cheaper items instead would
    bias the sample towards small items).

    Args:
        items: The items to choose from.
        max_judgments: The most judgments the chosen items may need in total.
        per_item: The number of judgments an item needs (e.g. its number of pairs).
        seed: Random seed; the same seed gives the same subset.
        key: The stratum of an item; default: its number of responses.

    Returns:
        The chosen items, in their original order.

    Raises:
        ConfigError: ``max_judgments`` is negative or ``per_item`` returns a negative number.
    """
    if max_judgments < 0:
        raise ConfigError(f"max_judgments must be 0 or more, got {max_judgments}")
    chosen: list[int] = []
    spent = 0
    for index in _stratified_order(items, seed, key):
        cost = per_item(items[index])
        if cost < 0:
            raise ConfigError(f"per_item returned {cost} for item {items[index].id!r}; it must be 0 or more")
        if spent + cost > max_judgments:
            break
        spent += cost
        chosen.append(index)
    return [items[i] for i in sorted(chosen)]
