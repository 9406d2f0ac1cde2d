"""Tests of the dataset adapters, on tiny fixture files written in each dataset's own format."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from trustjudge.errors import ConfigError, InputError
from trustjudge.io._adapters import FORMATS, detect_format, iter_dataset
from trustjudge.io._items import Item, Pair, Response
from trustjudge.io._subsets import budget_subset, stratified_subset


def _write_json(path: Path, rows: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return path


def _split(values: list[Item | InputError]) -> tuple[list[Item], list[InputError]]:
    items = [v for v in values if isinstance(v, Item)]
    errors = [v for v in values if isinstance(v, InputError)]
    return items, errors


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]


def _panda_row(idx: int, cmp_key: str, r1: Any, r2: Any, labels: tuple[int, int, int],
               instruction: str = "Rewrite the sentence.", input_: str = "It is what it is.") -> dict[str, Any]:
    return {"idx": idx, "motivation_app": "Grammarly", "cmp_key": cmp_key, "instruction": instruction,
            "input": input_, "response1": r1, "response2": r2,
            "annotator1": labels[0], "annotator2": labels[1], "annotator3": labels[2]}


@pytest.fixture
def pandalm_file(tmp_path: Path) -> Path:
    rows = [
        _panda_row(0, "bloom-7b_llama-7b", "It is.", "Things are as they are.", (2, 2, 1)),
        _panda_row(1, "cerebras-gpt-6.7B_pythia-6.9b", True, "", (1, 1, 1)),
        # llama-7b gives the same text as bloom-7b did in row 0: deduplicated by text.
        _panda_row(2, "llama-7b_opt-7b", "It is.", "Whatever.", (1, 0, 2)),
        _panda_row(3, "opt-7b_pythia-6.9b", "Whatever.", "Whatever.", (0, 0, 0)),
        _panda_row(4, "bloom-7b_opt-7b", "Hi.", "Hello.", (0, 0, 2), instruction="Greet.", input_=""),
    ]
    return _write_json(tmp_path / "testset-v1.json", rows)


def test_pandalm_groups_by_prompt_and_keys_responses_by_text(pandalm_file: Path) -> None:
    warnings: list[str] = []
    items, errors = _split(list(iter_dataset(pandalm_file, "pandalm", warnings=warnings)))
    assert errors == []
    assert [len(i.responses) for i in items] == [5, 2]
    first, second = items
    assert first.question == "Rewrite the sentence." and first.context == "It is what it is."
    assert second.question == "Greet." and second.context is None
    texts = [r.text for r in first.responses]
    assert Counter(texts) == Counter(["It is.", "Things are as they are.", "True", "", "Whatever."])
    assert all(r.id == _sha(r.text) for r in first.responses)
    assert first.id == "pandalm-" + _sha("Rewrite the sentence.\x00It is what it is.")
    assert first.line == 1 and second.line == 5


def test_pandalm_quirks_boolean_and_empty_texts(pandalm_file: Path) -> None:
    item = _split(list(iter_dataset(pandalm_file, "pandalm")))[0][0]
    by_text = {r.text: r for r in item.responses}
    assert "True" in by_text and by_text["True"].system == "cerebras-gpt-6.7B"
    assert "" in by_text and by_text[""].system == "pythia-6.9b"
    assert item.pairs is not None
    assert Pair(_sha("True"), _sha(""), "first", ("first", "first", "first")) in item.pairs


def test_pandalm_cmp_key_with_hyphens_and_dots(pandalm_file: Path) -> None:
    item = _split(list(iter_dataset(pandalm_file, "pandalm")))[0][0]
    systems = {r.text: r.system for r in item.responses}
    assert systems["It is."] == "bloom-7b"  # first model seen with this text
    assert systems["Things are as they are."] == "llama-7b"
    assert systems["Whatever."] == "opt-7b"


def test_pandalm_pairs_majority_annotators_and_identical_skip(pandalm_file: Path) -> None:
    warnings: list[str] = []
    first, second = _split(list(iter_dataset(pandalm_file, "pandalm", warnings=warnings)))[0]
    assert first.pairs == (
        Pair(_sha("It is."), _sha("Things are as they are."), "second", ("second", "second", "first")),
        Pair(_sha("True"), _sha(""), "first", ("first", "first", "first")),
        Pair(_sha("It is."), _sha("Whatever."), "tie", ("first", "tie", "second")),
    )
    assert second.pairs == (Pair(_sha("Hi."), _sha("Hello."), "tie", ("tie", "tie", "second")),)
    assert len(warnings) == 1 and ":4:" in warnings[0]


def test_pandalm_blank_instruction_uses_input_as_question(tmp_path: Path) -> None:
    path = _write_json(tmp_path / "t.json", [_panda_row(0, "a_b", "x", "y", (1, 1, 1), instruction=" ",
                                                        input_="Truthfulness")])
    (item,) = list(iter_dataset(path, "pandalm"))
    assert isinstance(item, Item) and item.question == "Truthfulness" and item.context is None


def test_pandalm_malformed_rows_yield_errors_and_later_rows_load(tmp_path: Path) -> None:
    rows = [
        _panda_row(0, "a_b", "x", "y", (1, 1, 1)),
        _panda_row(1, "a_b", "x", "z", (1, 5, 1)),
        _panda_row(2, "a_b_c", "x", "z", (1, 1, 1)),
        "not an object",
        _panda_row(4, "a_b", "x", "w", (2, 2, 2)),
    ]
    path = _write_json(tmp_path / "t.json", rows)
    items, errors = _split(list(iter_dataset(path, "pandalm")))
    assert [(e.line, e.field) for e in errors] == [(2, "annotator2"), (3, "cmp_key"), (4, None)]
    assert all(e.file == str(path) for e in errors)
    assert len(items) == 1 and items[0].pairs is not None and len(items[0].pairs) == 2


@pytest.fixture
def llmbar_file(tmp_path: Path) -> Path:
    rows = [{"input": "Say hi.", "output_1": "Hi!", "output_2": "Bye.", "label": 1},
            {"input": "Count to 2.", "output_1": "1 3", "output_2": "1 2", "label": 2}]
    return _write_json(tmp_path / "Natural" / "dataset.json", rows)


def test_llmbar_items_ids_and_labels(llmbar_file: Path) -> None:
    items, errors = _split(list(iter_dataset(llmbar_file, "llmbar")))
    assert errors == []
    assert [i.id for i in items] == ["Natural-0", "Natural-1"]
    assert items[0].question == "Say hi."
    assert items[0].responses == (Response("1", "Hi!"), Response("2", "Bye."))
    assert [i.pairs for i in items] == [(Pair("1", "2", "first"),), (Pair("1", "2", "second"),)]


def test_llmbar_bad_label_yields_error_with_line_and_field(tmp_path: Path) -> None:
    rows = [{"input": "q", "output_1": "a", "output_2": "b", "label": 0},
            {"input": "q2", "output_1": "a", "label": 1},
            {"input": "q3", "output_1": "a", "output_2": "b", "label": 2}]
    path = _write_json(tmp_path / "MT-Bench" / "dataset.json", rows)
    items, errors = _split(list(iter_dataset(path, "llmbar")))
    assert [(e.line, e.field) for e in errors] == [(1, "label"), (2, "output_2")]
    assert [i.id for i in items] == ["MT-Bench-2"]


def _tc_row(source: str, fact: str, system: str, output: str, overall: Any) -> dict[str, Any]:
    return {"source": source, "system_id": system, "system_output": output, "context": fact,
            "scores": {"understandability": 1.0, "naturalness": 2.0, "coherence": 2.0,
                       "engagingness": 2.0, "groundedness": 0.5, "overall": overall}}


@pytest.fixture
def topical_file(tmp_path: Path) -> Path:
    rows = [
        _tc_row("hi , do you like films ?", "fact one", "Original Ground Truth", "yes i do", 4.5),
        _tc_row("hi , do you like films ?", "fact one", "Argmax Decoding", "i do n't know", 2.0),
        _tc_row("hi , do you like films ?", "fact two", "Original Ground Truth", "no", 3.0),
        _tc_row("hi , do you like films ?", "fact one", "New Human Generated", "sure", 3.6666666667),
    ]
    return _write_json(tmp_path / "topical_chat.json", rows)


def test_topical_chat_groups_by_source_and_context(topical_file: Path) -> None:
    items, errors = _split(list(iter_dataset(topical_file, "topical-chat")))
    assert errors == []
    assert [len(i.responses) for i in items] == [3, 1]
    assert [i.context for i in items] == ["fact one", "fact two"]
    assert items[0].id != items[1].id
    assert items[0].question == "Write the next turn of this conversation.\n\nhi , do you like films ?"
    assert items[0].pairs is None and len(items[0].all_pairs()) == 3
    r = items[0].response("New Human Generated")
    assert (r.system, r.text, r.human_score) == ("New Human Generated", "sure", 3.6666666667)


def test_topical_chat_bad_score_and_duplicate_system(tmp_path: Path) -> None:
    rows = [_tc_row("s", "f", "A", "a", 4.0), _tc_row("s", "f", "B", "b", "high"),
            _tc_row("s", "f", "A", "again", 1.0), _tc_row("s", "f", "C", "c", 2.0)]
    path = _write_json(tmp_path / "tc.json", rows)
    items, errors = _split(list(iter_dataset(path, "topical-chat")))
    assert [(e.line, e.field) for e in errors] == [(2, "scores.overall"), (3, "system_id")]
    assert [r.id for r in items[0].responses] == ["A", "C"]


def _demo_line(qid: int) -> dict[str, Any]:
    return {"question_id": qid, "category": "Writing", "question": f"Question {qid}?",
            "answers": [{"score": s, "text": [f"answer {s}a", f"answer {s}b"], "judgement": ["j1", "j2"]}
                        for s in range(1, 6)]}


@pytest.fixture
def demo_file(tmp_path: Path) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text("\n".join(json.dumps(_demo_line(q)) for q in (81, 92)) + "\n", encoding="utf-8")
    return path


def test_trustjudge_demo_expands_to_ten_responses(demo_file: Path) -> None:
    items, errors = _split(list(iter_dataset(demo_file, "trustjudge-demo")))
    assert errors == [] and [i.id for i in items] == ["q81", "q92"]
    item = items[0]
    assert item.question == "Question 81?" and len(item.responses) == 10
    assert item.responses[0] == Response("s1-0", "answer 1a", "level1", 1)
    assert item.responses[9] == Response("s5-1", "answer 5b", "level5", 5)
    assert len(item.all_pairs()) == 45


def test_trustjudge_demo_bad_line_reports_line_and_field(tmp_path: Path) -> None:
    bad = _demo_line(2)
    bad["answers"][3]["text"] = [1, "x"]
    lines = [json.dumps(_demo_line(1)), "", json.dumps(bad), "{not json", json.dumps(_demo_line(3))]
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    items, errors = _split(list(iter_dataset(path, "trustjudge-demo")))
    assert [(e.line, e.field) for e in errors] == [(3, "answers[3].text[0]"), (4, None)]
    assert [i.id for i in items] == ["q1", "q3"]


def test_auto_detection_for_each_format(pandalm_file: Path, llmbar_file: Path, topical_file: Path,
                                        demo_file: Path, tmp_path: Path) -> None:
    items_file = tmp_path / "items.jsonl"
    items_file.write_text(json.dumps({"id": "x", "question": "q", "responses": [{"id": "a", "text": "t"}]}) + "\n")
    expected = {pandalm_file: "pandalm", llmbar_file: "llmbar", topical_file: "topical-chat",
                demo_file: "trustjudge-demo", items_file: "items"}
    for path, fmt in expected.items():
        assert detect_format(path) == fmt
        assert list(iter_dataset(path)) == list(iter_dataset(path, fmt))
    assert [i.id for i in iter_dataset(items_file) if isinstance(i, Item)] == ["x"]


def test_unknown_format_and_unreadable_files(tmp_path: Path, llmbar_file: Path) -> None:
    with pytest.raises(ConfigError) as info:
        iter_dataset(llmbar_file, "mtbench")
    assert all(name in str(info.value) for name in FORMATS)
    broken = tmp_path / "broken.json"
    broken.write_text('[{"input": "q", ', encoding="utf-8")
    with pytest.raises(InputError) as err:
        iter_dataset(broken, "llmbar")
    assert err.value.file == str(broken)
    with pytest.raises(InputError):
        iter_dataset(broken)
    with pytest.raises(InputError):
        iter_dataset(_write_json(tmp_path / "other.json", [{"foo": 1}]))
    with pytest.raises(InputError):
        iter_dataset(tmp_path / "missing.json", "llmbar")


def test_min_responses_turns_small_items_into_errors(topical_file: Path) -> None:
    items, errors = _split(list(iter_dataset(topical_file, "topical-chat", min_responses=2)))
    assert len(items) == 1 and len(errors) == 1
    assert (errors[0].line, errors[0].field) == (3, "responses")


def _pool() -> list[Item]:
    items = []
    for n_responses, count in ((2, 60), (3, 30), (5, 10)):
        for k in range(count):
            responses = tuple(Response(str(r), f"text {r}") for r in range(n_responses))
            items.append(Item(f"i{n_responses}-{k}", "q", responses))
    return items


def test_stratified_subset_is_deterministic_and_keeps_shares() -> None:
    pool = _pool()
    chosen = stratified_subset(pool, 10, seed=3)
    assert chosen == stratified_subset(pool, 10, seed=3)
    assert chosen != stratified_subset(pool, 10, seed=4)
    assert Counter(len(i.responses) for i in chosen) == Counter({2: 6, 3: 3, 5: 1})
    assert Counter(len(i.responses) for i in stratified_subset(pool, 20, seed=1)) == Counter({2: 12, 3: 6, 5: 2})
    order = {item.id: k for k, item in enumerate(pool)}
    assert [order[i.id] for i in chosen] == sorted(order[i.id] for i in chosen)
    assert all(item in pool for item in chosen)  # whole, unchanged items
    assert stratified_subset(pool, 500) == pool and stratified_subset(pool, 0) == []


def test_stratified_subset_custom_key() -> None:
    pool = _pool()
    chosen = stratified_subset(pool, 10, key=lambda item: item.id[-1], seed=0)
    assert len(chosen) == 10 and len({i.id[-1] for i in chosen}) == 10  # ten last digits, one each


def test_budget_subset_respects_budget_and_strata() -> None:
    pool = _pool()

    def cost(item: Item) -> int:
        return len(item.all_pairs())

    chosen = budget_subset(pool, 40, cost, seed=2)
    assert chosen == budget_subset(pool, 40, cost, seed=2)
    assert sum(cost(i) for i in chosen) <= 40
    assert set(budget_subset(pool, 39, cost, seed=2)) <= set(chosen)
    assert Counter(len(i.responses) for i in chosen).keys() == {2, 3, 5}
    everything = budget_subset(pool, 10_000, cost)
    assert everything == pool
    with pytest.raises(ConfigError):
        budget_subset(pool, -1, cost)
