"""LiveDRBench's prior-art and entities graders and its list-of-dicts row matching (issue 35), as
src/evals/priorart.py, entities.py and datasets_flights.py compute them: each number by hand from a P(match)
matrix, and the reader giving the items those graders need, on rows written here in the dataset's schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trustjudge import InputError, items_from_dicts
from trustjudge.recipes import get_metric
from trustjudge.recipes._readers import read


def _record(gold: list[str], claims: list[str], matrix: list[list[float]], **fields: Any) -> dict[str, Any]:
    item = items_from_dicts([{"id": "k", "question": "?", "gold_claims": gold, **fields,
                              "responses": [{"id": "s", "text": "x", "claims": [{"text": c} for c in claims]}]}])[0]
    return {"item_id": "k", "response_id": "s", "claims": [{"text": c} for c in claims],
            "matching": {"gold": len(gold), "predicted": len(claims), "p_match": matrix}, "item": item}


MATRIX = [[0.9, 0.8, 0.1],   # gold 0: matched by predictions 0 and 1
          [0.2, 0.3, 0.1],   # gold 1: by none
          [0.1, 0.2, 0.7]]   # gold 2: by prediction 2


@pytest.mark.parametrize("category", ["prior-art", "entities"])
def test_prior_art_and_entities_remove_each_gold_text_once_found(category: str) -> None:
    metric = get_metric("livedr")
    record = _record(["G0", "G1", "G2"], ["p0", "p1", "p2"], MATRIX, subset=category)
    hard = {**metric.params, "hard": True}
    # p0 takes G0 (removed); p1 finds G1 0.3 and G2 0.2 left: no match; p2 takes G2 -> 2 of 3 each way
    assert metric.value(record, {**hard, "value": "precision"}) == pytest.approx(2 / 3)
    assert metric.value(record, {**hard, "value": "recall"}) == pytest.approx(2 / 3)
    # (any-match would count p1 too: it matches G0 at 0.8, precision 3/3)
    assert get_metric("livedr").value(_record(["G0", "G1", "G2"], ["p0", "p1", "p2"], MATRIX, subset="scifacts-x"),
                                      {**hard, "value": "precision"}) == pytest.approx(1.0)
    # soft: 0.9 + max(0.3, 0.2) + max(0.1, 0.7), the hard pass's removals kept
    assert metric.value(record, {**hard, "hard": False, "value": "recall"}) == pytest.approx((0.9 + 0.3 + 0.7) / 3)
    assert metric.value(_record(["G0"], [], [[]], subset=category), hard) == 0.0


def test_novel_datasets_rows_are_matched_on_primary_keys_ignored_keys_left_out() -> None:
    metric = get_metric("livedr")
    gold = ["name: D1", "size: 10k", "lang: cy", "name: D2", "size: 5k", "lang: en"]
    claims = ["name: D2", "size: 5k", "name: D1", "size: 9k", "name: D3", "size: 1k"]
    matrix = [[0.0] * 6 for _ in gold]
    matrix[3][0], matrix[4][1], matrix[0][2], matrix[1][3], matrix[0][4] = 0.9, 0.8, 0.7, 0.4, 0.2
    fields = {"subset": "novel-datasets-x", "gold_row": "r0.0,r0.0,r0.0,r0.1,r0.1,r0.1",
              "claim_row": "r0.0,r0.0,r0.1,r0.1,r0.2,r0.2", "primary_keys": "name", "ignore_keys": "lang",
              "main_claims": "name"}
    record = _record(gold, claims, matrix, **fields)
    hard = {**metric.params, "hard": True}
    # predicted row 0 (D2) corresponds to gold row 1 by its name (0.9): name and size count (lang ignored);
    # predicted row 1 (D1) to gold row 0 (0.7): its name counts, its size not (0.4); row 2 (D3): no row left
    # counted 3, of 6 predicted keys and 4 gold keys (lang ignored)
    assert metric.value(record, {**hard, "value": "precision"}) == pytest.approx(3 / 6)
    assert metric.value(record, {**hard, "value": "recall"}) == pytest.approx(3 / 4)
    # soft: 0.9 x (1 + 0.8) + 0.7 x (1 + 0.4): each row's main key gates its row
    assert metric.value(record, {**hard, "hard": False, "value": "recall"}) == pytest.approx(
        (0.9 * 1.8 + 0.7 * 1.4) / 4)
    matrix[3][0] = 0.3  # D2's name no longer matches: predicted row 0 corresponds to no row; row 1 to gold row 0
    assert metric.value(_record(gold, claims, matrix, **fields), {**hard, "value": "recall"}) == pytest.approx(1 / 4)
    assert metric.value(_record(gold, claims, matrix, **{**fields, "claim_row": "r0.0"}), hard) is None


def _row(key: str, category: str, gts: Any, info: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "category": category, "question": "?", "ground_truths": gts, "eval_info": info}


def test_the_reader_gives_titles_strings_and_rows(tmp_path: Path) -> None:
    data = {"rows": [_row("p", "prior-art", [[{"title": "Patent A", "year": 2001}, {"title": "Paper B"}]], {}),
                     _row("e", "entities", [["Ada Lovelace", "Alan Turing"]], {}),
                     _row("d", "novel-datasets-x", [[{"name": "D1", "size": "10k"}, {"name": "D2", "size": "5k"}]],
                          {"primary_keys": ["name"], "ignore_keys": ["url"], "main_claims": ["name"]})],
            "preds": [{"key": "p", "preds": [[{"title": "Patent A"}]]}, {"key": "e", "preds": [["A. Turing"]]},
                      {"key": "d", "preds": [[{"name": "D2", "size": "5k"}]]}]}
    path = tmp_path / "livedr.json"
    path.write_text(json.dumps(data))
    prior, entities, datasets = read(path, "livedrbench")
    assert prior.gold_claims == ("Patent A", "Paper B") and [c.text for c in prior.responses[0].claims or ()] == [
        "Patent A"]
    assert entities.gold_claims == ("Ada Lovelace", "Alan Turing")
    assert datasets.gold_claims == ("name: D1", "size: 10k", "name: D2", "size: 5k")
    assert datasets.fields["gold_row"] == "r0.0,r0.0,r0.1,r0.1" and datasets.fields["claim_row"] == "r0.0,r0.0"
    assert datasets.fields["primary_keys"] == "name" and datasets.fields["ignore_keys"] == "url"
    data["rows"][0]["ground_truths"] = [["Patent A"]]
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as info:
        read(path, "livedrbench")
    assert (info.value.file, info.value.line, info.value.field) == (str(path), 1, "ground_truths")
