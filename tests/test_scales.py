"""Scales of any integer range, labelled criterion scales, pairwise label sets of one's own and a replaceable
system prompt (issue 24): the maths on a scripted judge, old stores still answering, the CLI, the small model."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trustjudge import Check, Criterion, InputError, Item, Judge, MockBackend, Response, Store, items_from_dicts
from trustjudge.audit._audit import conflict_ratio
from trustjudge.backends import LabelRequest
from trustjudge.cli import cli as main
from trustjudge.engine._store_io import import_file
from trustjudge.errors import ConfigError
from trustjudge.modes._prompts import SYSTEM, PairLabels, scale

DATA = Path(__file__).parent / "data" / "main_store"


def _peaked(want: dict[str, float]) -> Any:
    """A script giving each label (without its closing bracket) the probability in ``want``, else 0.001."""
    def script(request: LabelRequest) -> list[float]:
        return [want.get(label.rstrip("]"), 0.001) for label in request.labels]
    return script


ITEM = Item("q1", "What is 2+2?", (Response("a", "4"), Response("b", "5")))


# -- 1. any integer range ------------------------------------------------------------------------------

def test_scale_ranges_parse_and_keep_one_based_defaults() -> None:
    assert scale(10).values == tuple(range(1, 11)) and scale(10).one_based
    assert scale("0-5").values == (0, 1, 2, 3, 4, 5) and scale("0-5").labels[0] == "0"
    assert scale("0..10").values == tuple(range(11)) and scale("0-10").points == 10 and scale("0-10").low == 0
    assert scale(3, 0).values == (0, 1, 2, 3) and scale("7").values == tuple(range(1, 8))
    assert scale(" 0 - 3 ").span == "0-3"
    for bad in ("5-5", "3-1", "abc", "0-200", "", True, 1.5):
        with pytest.raises(ConfigError):
            scale(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="scale_min"):
        scale("0-5", 1)


def test_score_on_a_0_based_range_uses_the_true_values(tmp_path: Path) -> None:
    backend = MockBackend(script=_peaked({"0": 0.6, "5": 0.3}))
    judge = Judge(backend, store=tmp_path / "s.sqlite", scale="0-5")
    rec = next(iter(judge.score([ITEM])))
    assert backend.history[0].labels == ("0]", "1]", "2]", "3]", "4]", "5]")  # type: ignore[union-attr]
    assert "integer from 0 (very poor) to 5 (excellent)" in backend.history[0].prompt
    assert rec.scale == 5 and rec.scale_min == 0 and rec.to_dict()["scale_min"] == 0
    mass = 0.6 + 0.3 + 4 * 0.001
    assert rec.scores["discrete"] == 0.0  # argmax: the label "0" is the value 0, not 1
    assert rec.scores["expected"] == pytest.approx((0.3 * 5 + 0.001 * (1 + 2 + 3 + 4)) / mass)
    assert rec.scores["geval"] == pytest.approx(0.3 * 5 + 0.001 * 10)
    # the option of the mode, from a top value and scale_min, gives the same task
    task = judge.task("score", scale=5, scale_min=0)
    assert task.scale == scale("0-5")  # type: ignore[attr-defined]
    default = Judge("mock/hash", store=tmp_path / "t.sqlite")
    assert default.task("score", scale_min=0).scale == scale("0-10")  # type: ignore[attr-defined]


def test_one_based_records_keep_their_shape(tmp_path: Path) -> None:
    rec = next(iter(Judge("mock/hash", store=tmp_path / "s.sqlite", scale=5).score([ITEM])))
    assert "scale_min" not in rec.to_dict() and rec.scale == 5


def test_a_store_written_before_ranges_answers_a_rerun_with_zero_calls(tmp_path: Path) -> None:
    """store.jsonl and records.jsonl were written by main's code before this change (make.py there)."""
    spec = importlib.util.spec_from_file_location("make_main_store", DATA / "make.py")
    assert spec is not None and spec.loader is not None
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    store = Store(tmp_path / "s.sqlite")
    assert import_file(DATA / "store.jsonl", store)[0] == 38
    judge = Judge("mock/hash", store=store)
    rows = make.judge_all(judge)
    assert judge.stats.model_calls == 0  # every judgment from the store (the 5-level criterion's twice)
    assert judge.stats.from_store == 43
    want = [json.loads(line) for line in (DATA / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    # Floats to 12 significant digits: the last bits of a sum (entropy) differ between numpy builds. Fields added
    # to records since (which API and label method read them: issue 33) are left out where the old record lacks them.
    got = [json.loads(json.dumps(r, sort_keys=True)) for r in rows]
    added = ("label_method", "api", "samples")
    got = [{k: v for k, v in g.items() if k in w or k not in added} for g, w in zip(got, want)]
    assert [_rounded(g) for g in got] == [_rounded(w) for w in want]


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def test_criteria_levels_from_zero_and_labelled_levels_parse() -> None:
    (item,) = items_from_dicts([{
        "id": "q", "question": "Q?", "responses": [{"id": "a", "text": "x"}],
        "criteria": [{"name": "fact", "description": "facts", "levels": ["none", "some", "most", "all"],
                      "scale_min": 0},
                     {"name": "tone", "description": "tone", "levels": [
                         {"label": "poor", "value": 0, "description": "rude"},
                         {"label": "good", "value": 2, "description": "polite"}]},
                     {"name": "plain", "description": "plain", "levels": ["bad", "good"]}]}])
    fact, tone, plain = item.criteria
    assert fact.level_values() == (0, 1, 2, 3) and fact.labels == ()
    assert tone.level_values() == (0, 2) and tone.labels == ("poor", "good")
    assert plain.values == () and plain.level_values() == (1, 2)


@pytest.mark.parametrize(("criterion", "field"), [
    ({"levels": ["a", "b"], "scale_min": 0.5}, "criteria[0].scale_min"),
    ({"scale_min": 0}, "criteria[0].scale_min"),
    ({"levels": [{"value": 0, "description": "a"}, {"description": "b"}]}, "criteria[0].levels[1].value"),
    ({"levels": [{"value": 0, "description": "a"}, {"value": 0, "description": "b"}]}, "criteria[0].values"),
    ({"levels": [{"value": 0, "description": "a", "label": "x"}, {"value": 1, "description": "b"}]},
     "criteria[0].levels"),
    ({"levels": [{"value": 0, "description": "a", "label": "x"}, {"value": 1, "description": "b", "label": "X"}]},
     "criteria[0].labels"),
    ({"levels": [{"value": 0, "description": "a", "colour": "x"}, {"value": 1, "description": "b"}]},
     "criteria[0].levels[0].colour"),
    ({"levels": [{"value": 0.5, "description": "a"}, {"value": 1, "description": "b"}]},
     "criteria[0].levels[0].value"),
])
def test_bad_levels_name_file_line_and_field(criterion: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as info:
        items_from_dicts([{"id": "q", "question": "Q?", "responses": [{"id": "a", "text": "x"}],
                           "criteria": [{"name": "c", "description": "d", **criterion}]}], source="items.jsonl")
    assert info.value.field == field and info.value.line == 1 and info.value.file == "items.jsonl"


def test_criteria_on_zero_based_and_labelled_scales(tmp_path: Path) -> None:
    backend = MockBackend(script=_peaked({"0": 0.5, "3": 0.5, "poor": 0.2, "good": 0.8}))
    judge = Judge(backend, store=tmp_path / "s.sqlite")
    fact = Criterion("fact", "facts", 1.0, ("none", "some", "most", "all"), (0, 1, 2, 3))
    tone = Criterion("tone", "tone", 1.0, ("rude", "polite"), (0, 2), ("poor", "good"))
    rec = next(iter(judge.criteria([ITEM], [fact, tone])))
    f, t = rec.criteria
    assert f.points == 3 and f.scale_min == 0 and f.labels is None
    assert f.scores["discrete"] == 0.0  # the tie of 0 and 3 goes to the first label, the value 0
    assert f.scores["expected"] == pytest.approx((0.001 * 1 + 0.001 * 2 + 0.5 * 3) / 1.002)
    assert t.points == 2 and t.scale_min == 0 and t.labels == {"poor": 0, "good": 2}
    assert t.scores["expected"] == pytest.approx(0.8 * 2 / 1.0) and t.scores["discrete"] == 2.0
    # different ranges: the aggregate maps each onto [0, 1], low to 0 and top to 1
    assert rec.scale == [0.0, 1.0]
    assert rec.aggregate["expected"] == pytest.approx((f.scores["expected"] / 3 + t.scores["expected"] / 2) / 2)
    prompts = [h.prompt for h in backend.history]  # type: ignore[union-attr]
    assert "Levels:\n0: none\n1: some\n2: most\n3: all" in prompts[0]
    assert "integer from 0 (very poor) to 3 (excellent)" in prompts[0]
    assert "Levels:\npoor: rude\ngood: polite" in prompts[1]
    assert '"Score: [X]" where X is one of poor, good' in prompts[1]
    assert backend.history[1].labels == ("poor]", "good]")  # type: ignore[union-attr]


def test_criteria_task_scale_as_a_range(tmp_path: Path) -> None:
    backend = MockBackend(script=_peaked({"0": 0.9}))
    judge = Judge(backend, store=tmp_path / "s.sqlite")
    rec = next(iter(judge.criteria([ITEM], [Criterion("c", "d")], scale="0-3")))
    assert rec.scale == [0.0, 3.0] and rec.criteria[0].scale_min == 0 and rec.aggregate["discrete"] == 0.0
    task = judge.task("criteria", criteria=(Criterion("c", "d"),), scale=3, scale_min=0)
    assert task.scale == scale("0-3")  # type: ignore[attr-defined]


def test_conflict_ratio_reads_the_true_values_and_refuses_mixed_ranges() -> None:
    scores = [{"item_id": "q", "response_id": "a", "scale": 5, "scale_min": 0, "scores": {"discrete": 0.0}},
              {"item_id": "q", "response_id": "b", "scale": 5, "scale_min": 0, "scores": {"discrete": 1.0}}]
    pairs = [{"item_id": "q", "first_id": "a", "second_id": "b", "verdicts": {"likelihood": "second"}}]
    assert conflict_ratio(scores, pairs, "discrete", "likelihood").conflicts == 0
    mixed = [scores[0], {**scores[1], "scale_min": None}]
    with pytest.raises(ValueError, match="mix scales"):
        conflict_ratio(mixed, pairs, "discrete", "likelihood")


# -- 2. pairwise label sets -------------------------------------------------------------------------------

AUTOFIGURE = "A=first,B=second,BOTH_GOOD=tie,BOTH_BAD=tie"


def test_pair_labels_parse_and_refuse() -> None:
    labels = PairLabels.parse(AUTOFIGURE)
    assert labels.labels == ("A", "B", "BOTH_GOOD", "BOTH_BAD") and labels.prefers == ("first", "second", "tie", "tie")
    assert labels.mirror() == (1, 0, 2, 3)
    graded = PairLabels.parse("A>>B=first,A>B=first,A=B=tie,B>A=second,B>>A=second")
    assert graded.labels[2] == "A=B" and graded.mirror() == (4, 3, 2, 1, 0)
    assert PairLabels.parse("X=a,Y=b,Z=c").prefers == ("first", "second", "tie")
    for bad in ("A=first,B=first", "A=first", "A=first,B=second,A=tie", "A=first,B=maybe", "A,B", "A=first,a=second"):
        with pytest.raises(ConfigError):
            PairLabels.parse(bad)


def test_compare_with_labels_of_ones_own(tmp_path: Path) -> None:
    def script(request: LabelRequest) -> list[float]:
        # response "4" wins wherever it is shown; BOTH_BAD gets more than BOTH_GOOD
        a_is_4 = "<response_a>\n4\n</response_a>" in request.prompt
        table = {"A]": 0.5 if a_is_4 else 0.1, "B]": 0.1 if a_is_4 else 0.5, "BOTH_GOOD]": 0.05, "BOTH_BAD]": 0.25}
        return [table[label] for label in request.labels]

    backend = MockBackend(script=script)
    judge = Judge(backend, store=tmp_path / "s.sqlite")
    rec = next(iter(judge.run(judge.compare_task(labels=AUTOFIGURE), [ITEM])))
    req = backend.history[0]
    assert req.labels == ("A]", "B]", "BOTH_GOOD]", "BOTH_BAD]")  # type: ignore[union-attr]
    assert "X is one of A, B, BOTH_GOOD, BOTH_BAD" in req.prompt
    d = rec.to_dict()
    assert d["labels"] == {"A": "first", "B": "second", "BOTH_GOOD": "tie", "BOTH_BAD": "tie"}
    o1, o2 = d["orders"]
    assert o1["labels"] == pytest.approx({"A": 0.5, "B": 0.1, "BOTH_GOOD": 0.05, "BOTH_BAD": 0.25})
    assert o2["labels"] == pytest.approx({"A": 0.1, "B": 0.5, "BOTH_GOOD": 0.05, "BOTH_BAD": 0.25})
    assert (o1["A"], o1["B"], o1["C"]) == pytest.approx((0.5, 0.1, 0.3))  # per preference, as shown
    # likelihood: first = 0.5 + 0.5, second = 0.1 + 0.1, tie = 0.3 + 0.3
    assert d["verdicts"]["likelihood"] == "first" and d["verdicts"]["two_pass"] == "first"
    assert d["probabilities"] == pytest.approx({"first": 1.0 / 1.8, "second": 0.2 / 1.8, "tie": 0.6 / 1.8})
    # each label over both orders, as the pair is given: order 2's A is the second response winning
    assert d["label_probabilities"] == pytest.approx({"A": 1.0 / 1.8, "B": 0.2 / 1.8, "BOTH_GOOD": 0.1 / 1.8,
                                                      "BOTH_BAD": 0.5 / 1.8})
    assert d["label_verdict"] == "A"


def test_compare_default_labels_unchanged(tmp_path: Path) -> None:
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    plain = next(iter(judge.compare([ITEM]))).to_dict()
    same = next(iter(judge.run(judge.compare_task(labels="A=first,B=second,C=tie"), [ITEM]))).to_dict()
    assert plain == same and "labels" not in plain and "label_probabilities" not in plain
    assert judge.stats.model_calls == 2  # the explicit default set asks the very same prompts


def test_compare_labels_refuse_an_ac_calibration(tmp_path: Path) -> None:
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    items = items_from_dicts([{"id": f"q{i}", "question": "Q?", "responses": [{"id": "a", "text": f"x{i}"},
                                                                             {"id": "b", "text": f"y{i}"}],
                               "pairs": [{"first": "a", "second": "b", "human": "first" if i % 2 else "second"}]}
                              for i in range(12)])
    calibration = judge.calibrate(items, "compare")
    with pytest.raises(ConfigError, match="verdict labels"):
        judge.check_calibration(calibration, task=judge.compare_task(labels=AUTOFIGURE))
    assert "labels" in judge.check_calibration(calibration, task=judge.compare_task(labels=AUTOFIGURE),
                                               override=True).overridden


# -- 3. the system prompt ------------------------------------------------------------------------------

def test_system_prompt_replaces_the_default_in_every_mode(tmp_path: Path) -> None:
    backend = MockBackend()
    judge = Judge(backend, store=tmp_path / "s.sqlite", system="You are DIT's judge.")
    list(judge.score([ITEM]))
    list(judge.compare([ITEM]))
    list(judge.criteria([ITEM], [Criterion("c", "d")]))
    list(judge.run(judge.checklist_task([Check("1", "Is it right?")]), [ITEM]))
    prompts = [h.prompt for h in backend.history]  # type: ignore[union-attr]
    assert prompts and all(p.startswith("[system] You are DIT's judge.\n") for p in prompts)
    assert not any(SYSTEM in p for p in prompts)
    claims = judge.task("claims")
    assert claims.system == "You are DIT's judge."  # type: ignore[attr-defined]


def test_system_prompt_is_part_of_the_store_key(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    first = Judge("mock/hash", store=store)
    list(first.score([ITEM]))
    assert first.stats.model_calls == 2
    same = Judge("mock/hash", store=store, system=SYSTEM)
    list(same.score([ITEM]))
    assert same.stats.model_calls == 0  # the default, given explicitly: the same keys
    other = Judge("mock/hash", store=store, system="Judge tersely.")
    list(other.score([ITEM]))
    assert other.stats.model_calls == 2
    for bad in ("", "   ", 3):
        with pytest.raises(ConfigError, match="system prompt"):
            Judge("mock/hash", store=store, system=bad)  # type: ignore[arg-type]


def test_cli_scale_range_labels_and_system(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "q", "question": "Q?", "responses": [{"id": "a", "text": "x"},
                                                                           {"id": "b", "text": "y"}]}) + "\n")
    system = tmp_path / "system.txt"
    system.write_text("You judge figures.", encoding="utf-8")
    store = str(tmp_path / "s.sqlite")
    runner = CliRunner()
    res = runner.invoke(main, ["score", str(items), "-j", "mock/hash", "--store", store, "--scale", "0-10", "-q",
                               "--system", str(system)])
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout.splitlines()[0])
    assert row["scale"] == 10 and row["scale_min"] == 0 and 0 <= row["scores"]["expected"] <= 10
    res = runner.invoke(main, ["compare", str(items), "-j", "mock/hash", "--store", store, "-q",
                               "--labels", AUTOFIGURE, "--system", "Inline system text."])
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout.splitlines()[0])
    assert set(row["label_probabilities"]) == {"A", "B", "BOTH_GOOD", "BOTH_BAD"}
    assert math.isclose(sum(row["label_probabilities"].values()), 1.0)
    for args, word in ((["score", "--scale", "5-5"], "--scale"), (["compare", "--labels", "A=first"], "--labels"),
                       (["score", "--system", " "], "--system")):
        res = runner.invoke(main, [args[0], str(items), "-j", "mock/hash", "--store", store, *args[1:]])
        assert res.exit_code == 2 and word in res.output, res.output


# -- the small model ---------------------------------------------------------------------------------------

@pytest.mark.model
def test_zero_based_scale_on_the_bundled_judge(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    judge = Judge("llamacpp/smollm2-135m", store=store, scale="0-5")
    recs = list(judge.score([ITEM]))
    judge.close()
    for rec in recs:
        assert rec.unscored is None and rec.scale_min == 0
        assert rec.scores["discrete"] in range(6) and 0 <= rec.scores["expected"] <= 5  # type: ignore[operator]
    again = Judge("llamacpp/smollm2-135m", store=Store(store), scale="0-5")
    assert [r.to_dict() for r in again.score([ITEM])] == [r.to_dict() for r in recs]
    assert again.stats.model_calls == 0


@pytest.mark.model
def test_pair_labels_and_system_on_the_bundled_judge(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    system = "You compare two answers and say which is better."
    judge = Judge("llamacpp/smollm2-135m", store=store, system=system)
    task = judge.compare_task(labels=AUTOFIGURE)
    (rec,) = list(judge.run(task, [ITEM]))
    judge.close()
    assert rec.unscored is None and rec.label_probabilities is not None  # type: ignore[attr-defined]
    assert rec.label_verdict in rec.labels  # type: ignore[attr-defined,operator]
    assert math.isclose(sum(rec.label_probabilities.values()), 1.0)  # type: ignore[attr-defined]
    assert all(set(o["labels"]) == {"A", "B", "BOTH_GOOD", "BOTH_BAD"} for o in rec.orders)  # type: ignore[attr-defined]
    again = Judge("llamacpp/smollm2-135m", store=Store(store), system=system)
    assert [r.to_dict() for r in again.run(again.compare_task(labels=AUTOFIGURE), [ITEM])] == [rec.to_dict()]
    assert again.stats.model_calls == 0


def test_judge_config_checks_scale_and_system_up_front() -> None:
    from trustjudge import JudgeConfig

    assert JudgeConfig(scale="0-5").scale == "0-5" and JudgeConfig(system="Be brief.").system == "Be brief."
    for bad in ({"scale": "5-5"}, {"scale": "x"}, {"system": ""}):
        with pytest.raises(ConfigError):
            JudgeConfig(**bad)  # type: ignore[arg-type]


def test_the_service_takes_ranges_and_pair_labels(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from trustjudge.serve._app import create_app

    app = create_app("mock/hash", store_path=tmp_path / "s.sqlite")
    items = [{"id": "q", "question": "Q?", "responses": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]}]
    try:
        c = TestClient(app)
        r = c.post("/v1/score", json={"items": items, "scale": "0-5"})
        assert r.status_code == 200 and r.json()["records"][0]["scale_min"] == 0
        r = c.post("/v1/compare", json={"items": items, "labels": AUTOFIGURE})
        assert r.status_code == 200 and set(r.json()["records"][0]["label_probabilities"]) == {
            "A", "B", "BOTH_GOOD", "BOTH_BAD"}
        r = c.post("/v1/score", json={"items": items, "scale": "5-5"})
        assert r.status_code == 400 and "two or more levels" in r.json()["detail"]
    finally:
        app.state.judge.close()
