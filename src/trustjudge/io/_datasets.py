"""Readers of public judge-evaluation datasets, each in its own format, as trustjudge items.

The format names are those of :data:`trustjudge.io._adapters.FORMATS`, which picks the reader
(:func:`~trustjudge.io._adapters.iter_dataset`):

* ``pandalm``: PandaLM ``testset-v1.json``; rows are grouped into one item per prompt, responses are
  keyed by text, each row becomes one pair with its three annotators' labels.
* ``llmbar``: LLMBar ``dataset.json``; one item per row with responses ``"1"`` and ``"2"``.
* ``topical-chat``: USR Topical-Chat ``topical_chat.json``; rows are grouped by (dialogue, fact) into
  items of scored responses (``human_score`` = mean ``overall`` rating).
* ``topical-chat-criteria``: the same file and items (same ids), judged on the five USR criteria: each item
  carries :data:`USR_CRITERIA`, its fact as ``knowledge`` (not ``context``), and each response its mean
  per-criterion ratings as ``human_criteria``, on the criterion's level scale. The criteria's levels follow
  the human ranges (:data:`USR_RANGES`): a 0-1 criterion has levels 1-2 (its human rating + 1 is stored, so
  that judge and human share one scale), a 1-3 criterion levels 1-3.
  Not auto-detected (the file is the ``topical-chat`` one).
* ``qags``: QAGS ``mturk_cnndm.jsonl``; one item per article (``evidence``; consecutive lines with the same
  article share an item), one response per summary with one check per summary sentence (ids ``s1``,
  ``s2``, ...) and ``human_checks`` = the workers' majority (1.0 supported, 0.0 not, 0.5 on a tie).
* ``summhay``: Summary of a Haystack ``eval_benchmark_data.json``; one item per subtopic, one response per
  summary, the subtopic's reference insights as the item's checklist (ids ``i1``, ``i2``, ...) and the
  human coverage labels as ``human_checks`` (``FULL``, ``PARTIAL`` or ``NO``). The published judges'
  predictions: :func:`summhay_published`.
* ``trustjudge-demo``: TrustJudge answers JSONL; one item per question, two responses per score level.

Rows are checked as they are read: a bad row comes out as an :class:`InputError` naming the file, the row
(1-based) and the field.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ._files import _jsonl_records, load_array
from ._items import Check, Criterion, Item, Pair, Response, shown, unicode_problem

TOPICAL_CHAT_PROMPT = "Write the next turn of this conversation.\n\n"
USR_CRITERIA = (
    Criterion("understandability", "Whether the reply can be understood as a turn of this conversation.",
              levels=("The reply cannot be understood in the context of the conversation.",
                      "The reply can be understood in the context of the conversation.")),
    Criterion("naturalness", "Whether the reply sounds like something a person would say at this point.",
              levels=("Unnatural: no person would put it this way.",
                      "Somewhat natural: plausible, but awkward or stilted.",
                      "Natural: it reads like something a person would say.")),
    Criterion("coherence", "Whether the reply follows on from what was said before and stays in its context.",
              levels=("It ignores or contradicts the conversation so far.",
                      "It partly follows on from the conversation.",
                      "It follows on fully from the conversation.")),
    Criterion("engagingness", "Whether the reply is interesting and gives the other speaker something to answer.",
              levels=("Dull: it gives the other speaker nothing to take up.",
                      "Somewhat interesting.",
                      "Interesting: it invites the other speaker to go on.")),
    Criterion("groundedness", "Whether the reply makes use of the supplied fact.",
              levels=("The reply does not use the fact.", "The reply uses the fact.")),
)
"""The five USR criteria (Mehri & Eskenazi 2020) besides ``overall``, with equal weights."""
USR_RANGES: dict[str, tuple[float, float]] = {
    "understandability": (0.0, 1.0), "naturalness": (1.0, 3.0), "coherence": (1.0, 3.0),
    "engagingness": (1.0, 3.0), "groundedness": (0.0, 1.0)}
"""The human rating range of each USR criterion (means of three annotators)."""
QAGS_QUESTION = ("Summarize the news article. Each sentence of the summary is checked on its own against the "
                 "article: it must be supported by what the article says.")
SUMMHAY_PROMPT = "Summarize, as bullet points, the insights that the documents give on this subtopic.\n\n"
SUMMHAY_LABELS = ("FULL", "PARTIAL", "NO")
"""The coverage labels of ``summhay`` checks: the insight is fully, partially or not covered."""
_COVERAGE = {"fully_covered": "FULL", "full_coverage": "FULL", "full": "FULL", "1": "FULL",
             "partially_covered": "PARTIAL", "partial_coverage": "PARTIAL", "partial": "PARTIAL", "0.5": "PARTIAL",
             "not_covered": "NO", "no_coverage": "NO", "no": "NO", "none": "NO", "0": "NO"}
_PANDALM_LABELS = {0: "tie", 1: "first", 2: "second"}

def short_hash(text: str) -> str:
    """The first 10 hex digits of the SHA-1 of ``text``: the adapters' ids of items and responses keyed by text."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]


class _Row:
    """Typed access to one JSON-array row; errors name the file, the row (1-based) and the field."""

    def __init__(self, record: Any, file: str, line: int, prefix: str = "") -> None:
        if not isinstance(record, dict):
            raise InputError(f"expected a JSON object, got {type(record).__name__}", file=file, line=line,
                             field=prefix.rstrip(".") or None)
        self.record: dict[str, Any] = record
        self.file, self.line, self.prefix = file, line, prefix

    def error(self, name: str, message: str) -> InputError:
        return InputError(message, file=self.file, line=self.line, field=self.prefix + name)

    def rows(self, name: str, what: str) -> list[Any]:
        """A non-empty list field."""
        value = self.record.get(name)
        if not isinstance(value, list) or not value:
            raise self.error(name, f"must be a non-empty list of {what}")
        return value

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
            raise self.error(name, f"must be one of {sorted(allowed)}, got {shown(value)}")
        return allowed[value]

    def number(self, name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(name, f"must be a number, got {shown(value)}")
        number = float(value)
        if number != number or number in (float("inf"), float("-inf")):
            raise self.error(name, "must be a finite number")
        return number


def pandalm(path: Path, rows: list[Any], warnings: list[str]) -> Iterator[Item | InputError]:
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
            rid = short_hash(text)
            responses.setdefault(text, Response(rid, text, system))
            ids.append(rid)
        if texts[0] == texts[1]:
            warnings.append(f"{name}:{line}: response1 and response2 are the same text; pair skipped")
            continue
        top, count = Counter(annotators).most_common(1)[0]
        human = top if count >= 2 else "tie"
        group["pairs"].append(Pair(ids[0], ids[1], human, annotators))
    for (instruction, prompt_input), group in groups.items():
        item_id = "pandalm-" + short_hash(instruction + "\x00" + prompt_input)
        # One test-set prompt has a blank instruction: its input is then the whole question.
        question, context = ((instruction, prompt_input if prompt_input.strip() else None)
                             if instruction.strip() else (prompt_input, None))
        out.append((group["line"], Item(item_id, question, tuple(group["responses"].values()), context,
                                        None, tuple(group["pairs"]), group["line"])))
    yield from (value for _, value in sorted(out, key=lambda entry: entry[0]))


def llmbar(path: Path, rows: list[Any], warnings: list[str]) -> Iterator[Item | InputError]:
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


def _usr_scores(row: _Row, scores: dict[str, Any]) -> dict[str, float]:
    out = {}
    for criterion in USR_CRITERIA:
        where = f"scores.{criterion.name}"
        if scores.get(criterion.name) is None:
            raise row.error(where, "is missing")
        value = row.number(where, scores[criterion.name])
        low, high = USR_RANGES[criterion.name]
        if not low <= value <= high:
            raise row.error(where, f"must be between {low:g} and {high:g}, got {value:g}")
        out[criterion.name] = value - low + 1  # on the levels 1..N, like the judge's scores
    return out


def topical_chat(path: Path, rows: list[Any], warnings: list[str]) -> Iterator[Item | InputError]:
    return _topical_chat_items(path, rows, criteria=False)


def topical_chat_criteria(path: Path, rows: list[Any], warnings: list[str]) -> Iterator[Item | InputError]:
    return _topical_chat_items(path, rows, criteria=True)


def _topical_chat_items(path: Path, rows: list[Any], *, criteria: bool) -> Iterator[Item | InputError]:
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
            human_criteria = _usr_scores(row, scores) if criteria else None
            _, responses = groups.setdefault((source, fact), (line, {}))
            if system_id in responses:
                raise row.error("system_id", f"duplicate system {system_id!r} for this dialogue and fact")
        except InputError as exc:
            out.append((line, exc))
            continue
        responses[system_id] = Response(system_id, output, system_id, score, human_criteria=human_criteria)
    for (source, fact), (line, responses) in groups.items():
        item_id = "topical-chat-" + short_hash(source + "\x00" + fact)
        given = fact if fact.strip() else None
        if criteria:
            item = Item(item_id, TOPICAL_CHAT_PROMPT + source, tuple(responses.values()), None, None, None, line,
                        knowledge=given, criteria=USR_CRITERIA)
        else:
            item = Item(item_id, TOPICAL_CHAT_PROMPT + source, tuple(responses.values()), given, None, None, line)
        out.append((line, item))
    yield from (value for _, value in sorted(out, key=lambda entry: entry[0]))


def _demo_item(record: Any, file: str, line: int) -> Item:
    row = _Row(record, file, line)
    qid = row.record.get("question_id")
    if isinstance(qid, bool) or not isinstance(qid, (int, str)) or not str(qid).strip():
        raise row.error("question_id", f"must be an integer or string, got {shown(qid)}")
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


def trustjudge_demo(path: Path) -> Iterator[Item | InputError]:
    for line, record in _jsonl_records(path):
        if isinstance(record, InputError):
            yield record
            continue
        try:
            yield _demo_item(record, str(path), line)
        except InputError as exc:
            yield exc


def _qags_summary(record: Any, file: str, line: int) -> tuple[str, Response]:
    """One QAGS line: its article and its summary as a response with one check per sentence."""
    row = _Row(record, file, line)
    article = row.text("article")
    checks: list[Check] = []
    human: dict[str, float | str] = {}
    sentences: list[str] = []
    for k, raw in enumerate(row.rows("summary_sentences", "{sentence, responses} objects")):
        entry = _Row(raw, file, line, f"summary_sentences[{k}].")
        sentence = entry.text("sentence")
        yes = 0
        votes = entry.rows("responses", "{worker_id, response} objects")
        for v, raw_vote in enumerate(votes):
            vote = _Row(raw_vote, file, line, f"{entry.prefix}responses[{v}].")
            answer = vote.text("response").strip().lower()
            if answer not in ("yes", "no"):
                raise vote.error("response", f"must be 'yes' or 'no', got {vote.record['response']!r:.40}")
            yes += answer == "yes"
        check_id = f"s{k + 1}"
        checks.append(Check(check_id, f'Is this sentence of the summary supported by the article: "{sentence}"?'))
        human[check_id] = 1.0 if 2 * yes > len(votes) else 0.0 if 2 * yes < len(votes) else 0.5
        sentences.append(sentence)
    summary = " ".join(sentences)
    return article, Response(short_hash(summary), summary, None, None, tuple(checks), None, human)


def qags(path: Path) -> Iterator[Item | InputError]:
    name = str(path)
    article: str | None = None
    start = 0
    responses: dict[str, tuple[int, Response]] = {}
    held: list[InputError] = []  # errors inside an open item come out after it, in line order

    def close() -> Iterator[Item | InputError]:
        if article is not None and responses:
            yield Item("qags-" + short_hash(article), QAGS_QUESTION, tuple(r for _, r in responses.values()),
                       None, None, None, start, evidence=(article,))
        yield from held
        held.clear()

    for line, record in _jsonl_records(path):
        try:
            if isinstance(record, InputError):
                raise record
            text, response = _qags_summary(record, name, line)
            if text != article:
                yield from close()
                article, start, responses = text, line, {}
            elif response.id in responses:
                raise InputError(f"repeats the summary of line {responses[response.id][0]} for the same article",
                                 file=name, line=line, field="summary_sentences")
        except InputError as exc:
            if responses:
                held.append(exc)
            else:
                yield exc
            continue
        responses[response.id] = (line, response)
    yield from close()


@dataclass(frozen=True)
class _Summary:
    """One validated SummHay record."""

    line: int
    group: str
    topic: str
    subtopic: str
    rid: str
    """The response id (and system): ``summkey`` without its ``summary_subtopic_`` prefix."""
    text: str
    insights: tuple[tuple[str, str], ...]
    """``(insight_id, insight)`` in the record's order."""
    human: dict[str, str]
    """The human coverage label of each insight id."""


def _coverage(row: _Row, name: str, value: Any) -> str:
    key = str(value).strip().lower() if isinstance(value, (str, int, float)) and not isinstance(value, bool) else ""
    if isinstance(value, float) and value.is_integer():
        key = str(int(value))
    if key not in _COVERAGE:
        raise row.error(name, f"must be a coverage label (fully_covered, partially_covered, not_covered), "
                              f"got {shown(value)}")
    return _COVERAGE[key]


def _insight_map(row: _Row, name: str, insights: dict[str, str], what: str) -> dict[str, str]:
    """``{insight_id: label}`` of a list of ``{insight_id, coverage}`` entries."""
    out: dict[str, str] = {}
    for k, raw in enumerate(row.rows(name, what)):
        entry = _Row(raw, row.file, row.line, f"{name}[{k}].")
        insight_id = entry.text("insight_id", lenient=True)
        if insight_id not in insights:
            raise entry.error("insight_id", f"names no reference insight of this record: {insight_id!r:.40}")
        if insight_id in out:
            raise entry.error("insight_id", f"repeats insight {insight_id!r}")
        out[insight_id] = _coverage(entry, "coverage", entry.record.get("coverage"))
    return out


def _summhay_record(raw: Any, file: str, line: int) -> _Summary:
    row = _Row(raw, file, line)
    topic, subtopic = row.text("topic"), row.text("subtopic")
    group = row.text("subtopic_id", lenient=True)
    summkey = row.text("summkey")
    lines = row.rows("summary", "lines")
    for k, value in enumerate(lines):
        if not isinstance(value, str):
            raise row.error(f"summary[{k}]", f"must be a string, got {type(value).__name__}")
        problem = unicode_problem(value)
        if problem:
            raise row.error(f"summary[{k}]", problem)
    text = "\n".join(lines)
    if not text.strip():
        raise row.error("summary", "must not be empty")
    insights: dict[str, str] = {}
    for k, raw_insight in enumerate(row.rows("reference_insights", "{insight_id, insight} objects")):
        entry = _Row(raw_insight, file, line, f"reference_insights[{k}].")
        insight_id = entry.text("insight_id", lenient=True)
        if insight_id in insights:
            raise entry.error("insight_id", f"repeats insight {insight_id!r}")
        insights[insight_id] = entry.text("insight")
    human = _insight_map(row, "annotation", insights, "{insight_id, coverage} objects")
    missing = [i for i in insights if i not in human]
    if missing:
        raise row.error("annotation", f"labels no coverage for insight {missing[0]!r}")
    rid = summkey.removeprefix("summary_subtopic_") or summkey
    return _Summary(line, group, topic, subtopic, rid, text, tuple(insights.items()), human)


def _summhay_scan(path: Path, rows: list[Any]) -> Iterator[tuple[_Summary, Any] | InputError]:
    """Every record validated against its subtopic's first one, with its raw row; or its error."""
    name = str(path)
    first: dict[str, _Summary] = {}
    seen: dict[tuple[str, str], int] = {}
    for index, raw in enumerate(rows):
        line = index + 1
        try:
            summary = _summhay_record(raw, name, line)
            head = first.setdefault(summary.group, summary)
            for field in ("topic", "subtopic", "insights"):
                if getattr(summary, field) != getattr(head, field):
                    raise InputError(f"differs from row {head.line}'s, which has the same subtopic_id", file=name,
                                     line=line, field="reference_insights" if field == "insights" else field)
            key = (summary.group, summary.rid)
            if key in seen:
                raise InputError(f"repeats row {seen[key]}'s summary key for the same subtopic", file=name,
                                 line=line, field="summkey")
            seen[key] = line
        except InputError as exc:
            yield exc
            continue
        yield summary, raw


def _summhay_ids(summary: _Summary) -> tuple[str, dict[str, str]]:
    """The item id and the check id of each insight id."""
    return ("summhay-" + short_hash(summary.group + "\x00" + summary.subtopic),
            {insight_id: f"i{k + 1}" for k, (insight_id, _) in enumerate(summary.insights)})


def summhay(path: Path, rows: list[Any], warnings: list[str]) -> Iterator[Item | InputError]:
    groups: dict[str, list[_Summary]] = {}
    out: list[tuple[int, Item | InputError]] = []
    for value in _summhay_scan(path, rows):
        if isinstance(value, InputError):
            out.append((value.line or 0, value))
        else:
            groups.setdefault(value[0].group, []).append(value[0])
    for members in groups.values():
        head = members[0]
        item_id, check_ids = _summhay_ids(head)
        checks = tuple(Check(check_ids[insight_id], f'Does the summary cover this reference insight: "{insight}"?')
                       for insight_id, insight in head.insights)
        responses = tuple(Response(m.rid, m.text, m.rid, human_checks={check_ids[i]: m.human[i] for i, _ in m.insights})
                          for m in members)
        question = f"{SUMMHAY_PROMPT}Topic: {head.topic}\nSubtopic: {head.subtopic}"
        out.append((head.line, Item(item_id, question, responses, None, None, None, head.line,
                                    checklist=checks)))
    yield from (value for _, value in sorted(out, key=lambda entry: entry[0]))


def summhay_published(path: str | Path, *, errors: list[InputError] | None = None
                      ) -> dict[tuple[str, str, str], dict[str, str]]:
    """The published LLM judges' coverage labels of a SummHay ``eval_benchmark_data.json``.

    Every ``predictions_<judge>`` list of a record is read; the judge's name is ``<judge>`` (e.g.
    ``prompted_gpt-4o``, ``9fs_gpt-4o``) and each label is one of :data:`SUMMHAY_LABELS`.

    Args:
        path: The SummHay file.
        errors: If given, bad records are appended to it and skipped; otherwise the first one raises.

    Returns:
        ``{(item_id, response_id, check_id): {judge: label}}`` for every check of every record the
        ``summhay`` adapter loads (the ids are the adapter's); a judge with no entry for a check is absent
        from its dict.

    Raises:
        InputError: The file cannot be read, or (without ``errors``) a record is malformed.
    """
    p = path if isinstance(path, Path) else Path(path)
    if not p.is_file():
        raise InputError("no such file", file=str(p))
    out: dict[tuple[str, str, str], dict[str, str]] = {}
    for value in _summhay_scan(p, load_array(p)):
        try:
            if isinstance(value, InputError):
                raise value
            summary, raw = value
            row = _Row(raw, str(p), summary.line)
            insights = dict(summary.insights)
            item_id, check_ids = _summhay_ids(summary)
            found: dict[str, dict[str, str]] = {i: {} for i in insights}
            for key in raw:
                if isinstance(key, str) and key.startswith("predictions_"):
                    judge = key.removeprefix("predictions_")
                    for insight_id, label in _insight_map(row, key, insights, "{insight_id, coverage}").items():
                        found[insight_id][judge] = label
        except InputError as exc:
            if errors is None:
                raise
            errors.append(exc)
            continue
        for insight_id, labels in found.items():
            out[(item_id, summary.rid, check_ids[insight_id])] = labels
    return out


__all__ = ["QAGS_QUESTION", "SUMMHAY_LABELS", "SUMMHAY_PROMPT", "TOPICAL_CHAT_PROMPT", "USR_CRITERIA", "USR_RANGES",
           "llmbar", "pandalm", "qags", "short_hash", "summhay", "summhay_published", "topical_chat",
           "topical_chat_criteria", "trustjudge_demo"]
