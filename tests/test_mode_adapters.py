"""Tests of the judging-mode dataset adapters (topical-chat-criteria, qags, summhay), on tiny fixture files
written in each dataset's own layout."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from trustjudge.errors import InputError
from trustjudge.io._adapters import FORMATS, detect_format, iter_dataset
from trustjudge.io._datasets import QAGS_QUESTION, TOPICAL_CHAT_PROMPT, USR_CRITERIA, USR_RANGES, summhay_published
from trustjudge.io._items import Check, Item, Response


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]


def _split(values: list[Item | InputError]) -> tuple[list[Item], list[InputError]]:
    return ([v for v in values if isinstance(v, Item)], [v for v in values if isinstance(v, InputError)])


def _write_json(path: Path, rows: Any) -> Path:
    path.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return path


def _write_jsonl(path: Path, lines: list[Any]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_formats_are_registered() -> None:
    assert {"topical-chat-criteria", "qags", "summhay"} <= set(FORMATS)


# --- topical-chat-criteria ---------------------------------------------------------------------------------

def _tc_row(source: str, fact: str, system: str, output: str, **scores: Any) -> dict[str, Any]:
    base = {"understandability": 1.0, "naturalness": 3.0, "coherence": 2.3333333333, "engagingness": 3.0,
            "groundedness": 0.6666666667, "overall": 4.6666666667}
    base.update(scores)
    return {"source": source, "system_id": system, "system_output": output, "context": fact, "scores": base}


@pytest.fixture
def usr_file(tmp_path: Path) -> Path:
    rows = [
        _tc_row("hi , do you like films ?", "ghibli made kaguya .", "Original Ground Truth", "i love ghibli"),
        _tc_row("hi , do you like films ?", "ghibli made kaguya .", "Argmax Decoding", "i do n't know",
                understandability=0.3333333333, naturalness=1.0, coherence=1.6666666667, engagingness=1.0,
                groundedness=0.0, overall=1.3333333333),
        _tc_row("what about music ?", "", "New Human Generated", "jazz , mostly", overall=5.0),
    ]
    return _write_json(tmp_path / "topical_chat.json", rows)


def test_topical_chat_criteria_items_field_by_field(usr_file: Path) -> None:
    items, errors = _split(list(iter_dataset(usr_file, "topical-chat-criteria")))
    assert errors == [] and len(items) == 2
    first, second = items
    assert first.id == "topical-chat-" + _sha("hi , do you like films ?\x00ghibli made kaguya .")
    # The same items as the plain topical-chat format, so results of the two can be joined.
    assert [i.id for i in items] == [i.id for i in iter_dataset(usr_file, "topical-chat") if isinstance(i, Item)]
    assert first.question == TOPICAL_CHAT_PROMPT + "hi , do you like films ?"
    assert first.knowledge == "ghibli made kaguya ." and first.context is None
    assert second.knowledge is None and second.context is None
    assert first.evidence == () and first.checklist == () and first.pairs is None and first.line == 1
    assert first.criteria == USR_CRITERIA == second.criteria
    assert [c.name for c in first.criteria] == ["understandability", "naturalness", "coherence", "engagingness",
                                                "groundedness"]
    for criterion in first.criteria:
        low, high = USR_RANGES[criterion.name]
        assert criterion.weight == 1.0 and criterion.description.strip()
        assert len(criterion.levels) == int(high - low) + 1  # 0-1: two levels, 1-3: three levels
    argmax = first.response("Argmax Decoding")
    assert (argmax.text, argmax.system, argmax.human_score) == ("i do n't know", "Argmax Decoding", 1.3333333333)
    # on the criteria's levels: the 0-1 criteria shifted to 1-2, the 1-3 ones unchanged
    assert argmax.human_criteria == pytest.approx({"understandability": 1.3333333333, "naturalness": 1.0,
                                                   "coherence": 1.6666666667, "engagingness": 1.0, "groundedness": 1.0})
    assert second.responses[0].human_score == 5.0 and second.responses[0].checklist == ()


def test_topical_chat_criteria_bad_records(tmp_path: Path) -> None:
    missing = _tc_row("s", "f", "B", "b")
    del missing["scores"]["naturalness"]
    rows = [_tc_row("s", "f", "A", "a"), missing, _tc_row("s", "f", "C", "c", groundedness=2.0),
            _tc_row("s", "f", "D", "d", coherence="high"), _tc_row("s", "f", "E", "e")]
    path = _write_json(tmp_path / "tc.json", rows)
    items, errors = _split(list(iter_dataset(path, "topical-chat-criteria")))
    assert [(e.file, e.line, e.field) for e in errors] == [
        (str(path), 2, "scores.naturalness"), (str(path), 3, "scores.groundedness"),
        (str(path), 4, "scores.coherence")]
    assert "between 0 and 1" in errors[1].reason
    assert [r.id for r in items[0].responses] == ["A", "E"]
    # The plain format ignores the per-criterion ratings.
    assert _split(list(iter_dataset(path, "topical-chat")))[1] == []


# --- qags ----------------------------------------------------------------------------------------------------

def _votes(*answers: str) -> list[dict[str, Any]]:
    return [{"worker_id": k, "response": a} for k, a in enumerate(answers)]


def _qags_line(article: str, *sentences: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"article": article, "summary_sentences": [{"sentence": s, "responses": v} for s, v in sentences]}


@pytest.fixture
def qags_file(tmp_path: Path) -> Path:
    lines = [
        _qags_line("Vitamin supplements are popular . Sales rose .",
                   ("` supplements are popular,' says author.", _votes("yes", "no", "yes")),
                   ("Sales fell .", _votes("no", "no", "yes")),
                   ("Gov.", _votes("no", "no", "no"))),
        _qags_line("The council met on Monday .", ("The council met .", _votes("yes", "yes", "yes"))),
        # The same article again on the next line: a second response of the same item.
        _qags_line("The council met on Monday .", ("The council met on Monday .", _votes("yes", "no", "yes", "no"))),
    ]
    return _write_jsonl(tmp_path / "mturk_cnndm.jsonl", lines)


def test_qags_items_field_by_field(qags_file: Path) -> None:
    items, errors = _split(list(iter_dataset(qags_file, "qags")))
    assert errors == [] and len(items) == 2
    first, second = items
    article = "Vitamin supplements are popular . Sales rose ."
    assert first.id == "qags-" + _sha(article) and first.line == 1
    assert first.question == QAGS_QUESTION and first.evidence == (article,)
    assert first.context is None and first.knowledge is None and first.checklist == () and first.criteria == ()
    (summary,) = first.responses
    text = "` supplements are popular,' says author. Sales fell . Gov."
    assert summary.id == _sha(text) and summary.text == text and summary.system is None
    assert summary.human_score is None and summary.human_criteria is None
    assert summary.checklist == (
        Check("s1", 'Is this sentence of the summary supported by the article: '
                    '"` supplements are popular,\' says author."?'),
        Check("s2", 'Is this sentence of the summary supported by the article: "Sales fell ."?'),
        Check("s3", 'Is this sentence of the summary supported by the article: "Gov."?'))
    assert summary.human_checks == {"s1": 1.0, "s2": 0.0, "s3": 0.0}
    assert first.checks(summary) == summary.checklist
    assert second.line == 2 and second.evidence == ("The council met on Monday .",)
    assert [r.text for r in second.responses] == ["The council met .", "The council met on Monday ."]
    assert [r.human_checks for r in second.responses] == [{"s1": 1.0}, {"s1": 0.5}]  # 2 of 4: a tie


def test_qags_bad_records(tmp_path: Path) -> None:
    good = _qags_line("Article A .", ("A .", _votes("yes", "yes", "yes")))
    bad_vote = _qags_line("Article A .", ("A .", _votes("yes", "yes", "yes")),
                          ("B .", _votes("yes", "no", "maybe")))
    lines = [good, bad_vote, {"summary_sentences": []}, "{not json",
             _qags_line("Article B .", ("B .", [])), _qags_line("Article C .", ("C .", _votes("no", "no", "no")))]
    path = _write_jsonl(tmp_path / "q.jsonl", lines)
    values = list(iter_dataset(path, "qags"))
    # The error inside the open item (line 2) comes out after that item, then the rest in line order.
    assert [(v.line, getattr(v, "field", "item")) for v in values] == [
        (1, "item"), (2, "summary_sentences[1].responses[2].response"), (3, "article"), (4, None),
        (5, "summary_sentences[0].responses"), (6, "item")]
    errors = [v for v in values if isinstance(v, InputError)]
    assert all(e.file == str(path) for e in errors)
    repeated = _write_jsonl(tmp_path / "r.jsonl", [good, good])
    items, errors = _split(list(iter_dataset(repeated, "qags")))
    assert len(items) == 1 and len(items[0].responses) == 1
    assert [(e.line, e.field) for e in errors] == [(2, "summary_sentences")]


# --- summhay -------------------------------------------------------------------------------------------------

_INSIGHTS = [
    {"insight_name": "blood test", "insight": "The doctor explains the blood test results.",
     "insight_id": "6656930ecfa5f926ed96add7", "query": "Were blood test results discussed?"},
    {"insight_name": "causes", "insight": "The doctor names possible causes.",
     "insight_id": "6656930ecfa5f926ed96add8", "query": "Were causes mentioned?"},
]
_COVERAGE = {"FULL": "FULL_COVERAGE", "PARTIAL": "PARTIAL_COVERAGE", "NO": "NO_COVERAGE"}


def _summhay_record(summkey: str, human: tuple[str, str], judged: tuple[str, str], *,
                    subtopic_id: str = "665692f3cfa5f926ed96adbe", subtopic: str = "diagnosis and causes",
                    insights: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    insights = _INSIGHTS if insights is None else insights
    ids = [i["insight_id"] for i in insights]
    return {
        "topic_fn": "data/topic_doctor_patient.json",
        "topic": "A meeting between a doctor and a patient.",
        "subtopic_id": subtopic_id, "subtopic": subtopic, "summkey": summkey,
        "summary": ["## Diagnoses", "- Doctors explain blood tests [3][8]."],
        "reference_insights": insights,
        "annotation": [{"insight_id": i, "coverage": c, "candidate_id": "1" if c != "not_covered" else "no_selection"}
                       for i, c in zip(ids, human)],
        "predictions_prompted_gpt-4o": [{"coverage": _COVERAGE[c], "bullet_id": 2 if c != "NO" else "NA",
                                         "insight_id": i} for i, c in zip(ids, judged)],
        # Claude 3 Haiku lists its entries in another order, with a list of bullet ids.
        "predictions_prompted_claude3-haiku": [{"coverage": "FULL_COVERAGE", "bullet_id": [1, 2], "insight_id": i}
                                               for i in reversed(ids)],
    }


@pytest.fixture
def summhay_file(tmp_path: Path) -> Path:
    records = [
        _summhay_record("summary_subtopic_dwzhu/e5-base-4k_gemini-1.5-pro", ("fully_covered", "not_covered"),
                        ("PARTIAL", "NO")),
        _summhay_record("summary_subtopic_other_topic_gpt-4o", ("partially_covered", "fully_covered"),
                        ("FULL", "FULL"), subtopic_id="aaaa", subtopic="treatment options",
                        insights=[{**_INSIGHTS[0], "insight_id": "x1"}, {**_INSIGHTS[1], "insight_id": "x2"}]),
        _summhay_record("summary_subtopic_claude3-opus", ("not_covered", "partially_covered"), ("NO", "PARTIAL")),
    ]
    return _write_json(tmp_path / "eval_benchmark_data.json", records)


def test_summhay_items_field_by_field(summhay_file: Path) -> None:
    items, errors = _split(list(iter_dataset(summhay_file, "summhay")))
    assert errors == [] and len(items) == 2
    first, second = items
    assert first.id == "summhay-" + _sha("665692f3cfa5f926ed96adbe\x00diagnosis and causes") and first.line == 1
    assert second.id == "summhay-" + _sha("aaaa\x00treatment options") and second.line == 2
    assert first.question.endswith("\n\nTopic: A meeting between a doctor and a patient.\n"
                                   "Subtopic: diagnosis and causes")
    assert first.evidence == () and first.context is None and first.knowledge is None and first.criteria == ()
    assert first.checklist == (
        Check("i1", 'Does the summary cover this reference insight: "The doctor explains the blood test results."?'),
        Check("i2", 'Does the summary cover this reference insight: "The doctor names possible causes."?'))
    assert second.checklist == first.checklist
    text = "## Diagnoses\n- Doctors explain blood tests [3][8]."
    assert first.responses == (
        Response("dwzhu/e5-base-4k_gemini-1.5-pro", text, "dwzhu/e5-base-4k_gemini-1.5-pro",
                 human_checks={"i1": "FULL", "i2": "NO"}),
        Response("claude3-opus", text, "claude3-opus", human_checks={"i1": "NO", "i2": "PARTIAL"}))
    assert [r.human_checks for r in first.responses] == [{"i1": "FULL", "i2": "NO"}, {"i1": "NO", "i2": "PARTIAL"}]
    assert second.responses[0].id == "other_topic_gpt-4o"
    assert second.responses[0].human_checks == {"i1": "PARTIAL", "i2": "FULL"}


def test_summhay_published_keys_match_the_items(summhay_file: Path) -> None:
    published = summhay_published(summhay_file)
    items = [i for i in iter_dataset(summhay_file, "summhay") if isinstance(i, Item)]
    units = {(i.id, r.id, c.id) for i in items for r in i.responses for c in i.checks(r)}
    assert set(published) == units
    first = items[0]
    assert published[(first.id, "dwzhu/e5-base-4k_gemini-1.5-pro", "i1")] == {
        "prompted_gpt-4o": "PARTIAL", "prompted_claude3-haiku": "FULL"}
    assert published[(first.id, "claude3-opus", "i2")] == {"prompted_gpt-4o": "PARTIAL",
                                                            "prompted_claude3-haiku": "FULL"}
    assert published[(items[1].id, "other_topic_gpt-4o", "i2")]["prompted_gpt-4o"] == "FULL"


def test_summhay_bad_records(tmp_path: Path) -> None:
    good = _summhay_record("summary_subtopic_a", ("fully_covered", "not_covered"), ("FULL", "NO"))
    bad_label = _summhay_record("summary_subtopic_b", ("fully_covered", "mostly"), ("FULL", "NO"))
    other_insights = _summhay_record("summary_subtopic_c", ("fully_covered", "not_covered"), ("FULL", "NO"),
                                     insights=[*_INSIGHTS[:1], {**_INSIGHTS[1], "insight": "Something else."}])
    unlabelled = _summhay_record("summary_subtopic_d", ("fully_covered", "not_covered"), ("FULL", "NO"))
    unlabelled["annotation"] = unlabelled["annotation"][:1]
    repeated = _summhay_record("summary_subtopic_a", ("fully_covered", "not_covered"), ("FULL", "NO"))
    bad_prediction = _summhay_record("summary_subtopic_e", ("fully_covered", "not_covered"), ("FULL", "NO"))
    bad_prediction["predictions_prompted_gpt-4o"][1]["coverage"] = "MAYBE"
    path = _write_json(tmp_path / "s.json", [good, bad_label, other_insights, unlabelled, repeated, 7,
                                             bad_prediction])
    items, errors = _split(list(iter_dataset(path, "summhay")))
    assert [(e.file, e.line, e.field) for e in errors] == [
        (str(path), 2, "annotation[1].coverage"), (str(path), 3, "reference_insights"), (str(path), 4, "annotation"),
        (str(path), 5, "summkey"), (str(path), 6, None)]
    assert [r.id for r in items[0].responses] == ["a", "e"]  # predictions are not the adapter's concern
    with pytest.raises(InputError) as info:
        summhay_published(path)
    assert (info.value.line, info.value.field) == (2, "annotation[1].coverage")
    found: list[InputError] = []
    published = summhay_published(path, errors=found)
    assert [(e.line, e.field) for e in found] == [(2, "annotation[1].coverage"), (3, "reference_insights"),
                                                  (4, "annotation"), (5, "summkey"), (6, None),
                                                  (7, "predictions_prompted_gpt-4o[1].coverage")]
    assert {key[1] for key in published} == {"a"}


# --- detection and stable ids ---------------------------------------------------------------------------------

def test_detection_and_stable_ids(usr_file: Path, qags_file: Path, summhay_file: Path) -> None:
    assert detect_format(qags_file) == "qags"
    assert detect_format(summhay_file) == "summhay"
    assert detect_format(usr_file) == "topical-chat"  # the criteria view is chosen explicitly
    for path, fmt in ((qags_file, "qags"), (summhay_file, "summhay")):
        assert list(iter_dataset(path)) == list(iter_dataset(path, fmt))
    for path, fmt in ((usr_file, "topical-chat-criteria"), (qags_file, "qags"), (summhay_file, "summhay")):
        once = [(i.id, [r.id for r in i.responses]) for i in iter_dataset(path, fmt) if isinstance(i, Item)]
        assert once == [(i.id, [r.id for r in i.responses]) for i in iter_dataset(path, fmt) if isinstance(i, Item)]
