"""Cascades of checks (checklist) and claims (claims): tier routing with counted calls, the rerun from the store,
the human tier's file read back as labels, the CLI, and a checklist cascade from the real small judge."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import write_jsonl
from trustjudge import ConfigError, Judge, MockBackend, load_items, register_mock
from trustjudge.backends import GenerateRequest, Generation, LabelRequest
from trustjudge.cli import cli

QUESTION = re.compile(r"Question (\d+):")
CHECKS = {"sum": "Does the answer give the right sum?", "tone": "Is the answer polite?"}


# -- checklists ----------------------------------------------------------------------------------------------

def truth(i: int, check: str) -> bool:
    return i % 2 == 0 if check == "sum" else i % 4 < 2


def check_items(indices: range | list[int], *, labelled: bool = True) -> list[dict[str, Any]]:
    """One response per question, asked two checks; labelled with the truth of each."""
    rows = []
    for i in indices:
        text = f"It is {i + 2}, thank you." if i % 2 == 0 else f"It is {i + 7}, obviously."
        resp: dict[str, Any] = {"id": "r", "text": text}
        if labelled:
            resp["human_checks"] = {c: truth(i, c) for c in CHECKS}
        rows.append({"id": f"k{i}", "question": f"Question {i}: what is {i} + 2?",
                     "checklist": [{"id": c, "text": t} for c, t in CHECKS.items()], "responses": [resp]})
    return rows


def _asked(req: LabelRequest) -> tuple[int, str]:
    m = QUESTION.search(req.prompt)
    assert m is not None
    check = next(c for c, t in CHECKS.items() if t in req.prompt)
    return int(m.group(1)), check


def _yes(req: LabelRequest, p_yes: float) -> list[float]:
    return [p_yes if lab.upper().startswith("YES") else 1 - p_yes for lab in req.labels]


def weak_checks(req: LabelRequest) -> list[float]:
    """Sure and right, except on the tone of every third question: unsure, leaning the wrong way."""
    i, check = _asked(req)
    right = truth(i, check)
    if check == "tone" and i % 3 == 0:
        return _yes(req, 0.45 if right else 0.55)
    return _yes(req, 0.95 if right else 0.05)


def strong_checks(req: LabelRequest) -> list[float]:
    """Sure and right, except on questions 0 mod 9: unsure, leaning the wrong way."""
    i, check = _asked(req)
    right = truth(i, check)
    if i % 9 == 0:
        return _yes(req, 0.45 if right else 0.55)
    return _yes(req, 0.92 if right else 0.08)


def _seen(backend: MockBackend) -> list[tuple[int, str]]:
    return sorted(_asked(r) for r in backend.history if isinstance(r, LabelRequest))


def test_checklist_tier_two_is_asked_only_tier_ones_open_checks_and_a_rerun_makes_no_call(tmp_path: Path) -> None:
    # 1,200 calibration questions (was 600): each tier's thresholds are tested on part B of the split only
    cal_items = load_items(write_jsonl(tmp_path / "cal.jsonl", check_items(range(100, 1300))))
    new_items = load_items(write_jsonl(tmp_path / "new.jsonl", check_items(range(60), labelled=False)))
    weak, strong = MockBackend("weak", weak_checks), MockBackend("strong", strong_checks)
    with Judge(weak, store=tmp_path / "s.sqlite") as judge:
        second = judge.sibling(strong)
        cal1, cal2 = judge.calibrate(cal_items, "checklist"), second.calibrate(cal_items, "checklist")
        assert cal1.n == cal2.n == 2400 and cal1.keys == cal2.keys
        weak.history.clear()
        strong.history.clear()
        before = (weak.calls, strong.calls)
        tiers = [(judge, cal1), (second, cal2), ("human", None)]
        records, summary = judge.cascade(new_items, tiers, target=0.9, delta=0.1)
        open1 = [(i, "tone") for i in range(60) if i % 3 == 0]
        # tier 1 judged all 120 checks; tier 2 was asked exactly the 20 it left open (one check of each response)
        assert len(_seen(weak)) == 120 and _seen(strong) == open1
        assert (weak.calls - before[0], strong.calls - before[1]) == (120, 20)
        assert len(records) == 60 and all(len(r["checks"]) == 2 for r in records)
        tier = {(int(r["item_id"][1:]), c["id"]): c["tier"] for r in records for c in r["checks"]}
        people = [k for k in open1 if k[0] % 9 == 0]
        assert {k for k, t in tier.items() if t == 1} == {(i, c) for i in range(60) for c in CHECKS} - set(open1)
        assert {k for k, t in tier.items() if t == 2} == set(open1) - set(people)
        assert {k for k, t in tier.items() if t == 3} == set(people)
        for r in records:
            assert r["judge"] == judge.name  # the record is tier 1's; each check says who decided it
            for c in r["checks"]:
                name = {1: judge.name, 2: second.name, 3: "human"}[c["tier"]]
                assert c["tier_judge"] == name and len(c["cascade"]) == min(c["tier"], 2)
                assert [s["judge"] for s in c["cascade"]] == [judge.name, second.name][:len(c["cascade"])]
                if c["tier"] < 3:  # the deciding tier's own probabilities, passing its threshold
                    threshold = summary["tiers"][c["tier"] - 1]["guarantee"]["threshold"]
                    assert c["calibrated"]["abstained"] is None and c["calibrated"]["confidence"] >= threshold
                    wanted = truth(int(r["item_id"][1:]), c["id"])
                    assert c["calibrated"]["verdict"] == ("pass" if wanted else "fail")
                    sure = 0.95 if c["tier"] == 1 else 0.92  # what the deciding judge's script says
                    assert c["p_pass"] == pytest.approx(sure if wanted else 1 - sure)
                else:
                    assert c["calibrated"]["abstained"] == "below_threshold"
        rows = summary["tiers"]
        assert summary["unit"] == "checks" and summary["verdicts"] == 120 and summary["records"] == 60
        assert [(t["judge"], t["asked"], t["decided"], t["alone"]) for t in rows] == [
            (judge.name, 120, 100, 120), (second.name, 20, 20 - len(people), 120),
            ("human", len(people), len(people), 120)]
        assert [t["model_calls"] for t in rows[:2]] == [120, 20]
        assert [(t["judgments"], t["judgments_alone"]) for t in rows[:2]] == [(120, 120), (20, 120)]
        assert summary["machine_decided"] == 120 - len(people)
        assert summary["machine_coverage"] == pytest.approx((120 - len(people)) / 120)
        again, summary2 = judge.cascade(new_items, tiers, target=0.9, delta=0.1)
        assert (weak.calls - before[0], strong.calls - before[1]) == (120, 20)  # all from the store
        assert [(t["model_calls"], t["from_store"]) for t in summary2["tiers"][:2]] == [(0, 120), (0, 20)]
        assert again == records


def test_the_checklist_human_tier_file_reads_back_as_labels(tmp_path: Path) -> None:
    cal_items = load_items(write_jsonl(tmp_path / "cal.jsonl", check_items(range(100, 1300))))
    new_rows = check_items(range(60), labelled=False)
    new_items = load_items(write_jsonl(tmp_path / "new.jsonl", new_rows))
    with Judge(MockBackend("weak", weak_checks), store=tmp_path / "s.sqlite") as judge:
        second = judge.sibling(MockBackend("strong", strong_checks))
        tiers = [(judge, judge.calibrate(cal_items, "checklist")), (second, second.calibrate(cal_items, "checklist")),
                 ("human", None)]
        records, _ = judge.cascade(new_items, tiers, target=0.9, delta=0.1)
        from trustjudge._cascade import human_items

        todo = human_items(records, {r["id"]: r for r in new_rows}, "checklist")
        people = [i for i in range(60) if i % 9 == 0]  # 0 mod 3 (tier 1 unsure of the tone) and 0 mod 9 (tier 2)
        assert [t["id"] for t in todo] == [f"k{i}" for i in people]
        for t in todo:
            assert [r["human_checks"] for r in t["responses"]] == [{"tone": None}]
            assert t["checklist"] == new_rows[int(t["id"][1:])]["checklist"]  # the checks came along
            t["responses"][0]["human_checks"]["tone"] = truth(int(t["id"][1:]), "tone")
        labelled = load_items(write_jsonl(tmp_path / "labelled.jsonl", todo))
        assert [it.responses[0].human_checks for it in labelled] == [{"tone": float(truth(i, "tone"))} for i in people]
        calls = judge.stats.model_calls
        cal = judge.calibrate(labelled, "checklist")  # the labels make a calibration set, from the store
        assert cal.n == len(people) and judge.stats.model_calls == calls


# -- claims ------------------------------------------------------------------------------------------------

FACT = re.compile(r"Fact (\d+)-(\d+)")
REPORT = re.compile(r"Report (\d+)\.")


def supported(i: int, j: int) -> bool:
    return (i + j) % 2 == 0


def fact(i: int, j: int) -> str:
    return f"Fact {i}-{j}: the value is {i * 10 + j}."


def claim_items(indices: range | list[int], *, given: bool) -> list[dict[str, Any]]:
    """Two claims per response, given with labels (calibration) or left for the judge to extract."""
    rows = []
    for i in indices:
        resp: dict[str, Any] = {"id": "r", "text": f"Report {i}. Two facts follow."}
        if given:
            resp["claims"] = [{"text": fact(i, j), "human": "SUPPORTED" if supported(i, j) else "UNSUPPORTED"}
                              for j in range(2)]
        rows.append({"id": f"c{i}", "question": f"Question {i}: what are the values?",
                     "evidence": [f"Values of {i}: " + ", ".join(str(i * 10 + j) for j in range(2)
                                                                  if supported(i, j))],
                     "responses": [resp]})
    return rows


def _verdict(req: LabelRequest, p_right: float) -> list[float]:
    i, j = (int(g) for g in FACT.findall(req.prompt)[-1])
    right = "SUPPORTED" if supported(i, j) else "UNSUPPORTED"
    wrong = "UNSUPPORTED" if right == "SUPPORTED" else "SUPPORTED"
    rest = 1 - p_right - 0.02
    return [p_right if lab.startswith(right) else rest if lab.startswith(wrong) else 0.02 for lab in req.labels]


def weak_claims(req: LabelRequest) -> list[float]:
    i, j = (int(g) for g in FACT.findall(req.prompt)[-1])
    return _verdict(req, 0.4 if (j == 1 and i % 3 == 0) else 0.93)


def strong_claims(req: LabelRequest) -> list[float]:
    i, j = (int(g) for g in FACT.findall(req.prompt)[-1])
    return _verdict(req, 0.4 if (j == 1 and i % 9 == 0) else 0.9)


def extract(req: GenerateRequest) -> Generation:
    i = int(REPORT.findall(req.prompt)[-1])
    return Generation("".join(f"- {fact(i, j)}\n" for j in range(2)) + "END", (-0.1,) * 8, "stop", 10)


def _facts(backend: MockBackend) -> list[tuple[int, int]]:
    return sorted(tuple(int(g) for g in FACT.findall(r.prompt)[-1])  # type: ignore[misc]
                  for r in backend.history if isinstance(r, LabelRequest))


def test_claims_tier_two_verifies_tier_ones_extracted_claims_it_left_open(tmp_path: Path) -> None:
    cal_items = load_items(write_jsonl(tmp_path / "cal.jsonl", claim_items(range(100, 1300), given=True)))
    new_rows = claim_items(range(30), given=False)
    new_items = load_items(write_jsonl(tmp_path / "new.jsonl", new_rows))
    weak = MockBackend("weak", weak_claims, generate_script=extract)
    strong = MockBackend("strong", strong_claims, generate_script=extract)
    with Judge(weak, store=tmp_path / "s.sqlite") as judge:
        second = judge.sibling(strong)
        cal1, cal2 = judge.calibrate(cal_items, "claims"), second.calibrate(cal_items, "claims")
        assert cal1.n == cal2.n == 2400
        weak.history.clear()
        strong.history.clear()
        before = (weak.calls, strong.calls)
        tiers = [(judge, cal1), (second, cal2), ("human", None)]
        records, summary = judge.cascade(new_items, tiers, target=0.9, delta=0.1)
        open1 = [(i, 1) for i in range(30) if i % 3 == 0]
        people = [(i, 1) for i in range(30) if i % 9 == 0]
        # tier 1 extracted (30 generations) and verified 60 claims; tier 2 only verified the 10 left open
        assert sum(isinstance(r, GenerateRequest) for r in weak.history) == 30 and len(_facts(weak)) == 60
        assert not any(isinstance(r, GenerateRequest) for r in strong.history) and _facts(strong) == open1
        assert (weak.calls - before[0], strong.calls - before[1]) == (90, 10)
        rows = summary["tiers"]
        assert summary["unit"] == "claims" and summary["verdicts"] == 60
        assert [(t["asked"], t["decided"], t["model_calls"]) for t in rows[:2]] == [
            (60, 50, 90), (10, 10 - len(people), 10)]
        assert rows[2] == {"tier": 3, "judge": "human", "asked": len(people), "alone": 60, "decided": len(people),
                           "share": len(people) / 60}
        for r in records:
            i = int(r["item_id"][1:])
            assert r["source"] == "extracted" and [c["text"] for c in r["claims"]] == [fact(i, 0), fact(i, 1)]
            for j, c in enumerate(r["claims"]):
                assert c["tier"] == (3 if (i, j) in people else 2 if (i, j) in open1 else 1)
                if c["tier"] < 3:
                    assert c["calibrated"]["verdict"] == ("SUPPORTED" if supported(i, j) else "UNSUPPORTED")
        again, summary2 = judge.cascade(new_items, tiers, target=0.9, delta=0.1)
        assert [t["model_calls"] for t in summary2["tiers"][:2]] == [0, 0] and again == records
        assert (weak.calls - before[0], strong.calls - before[1]) == (90, 10)
        # the items for people carry the claims as the cascade judged them (extracted), so a label has its claim
        from trustjudge._cascade import human_items

        todo = human_items(records, {r["id"]: r for r in new_rows}, "claims")
        assert [t["id"] for t in todo] == [f"c{i}" for i, _ in people]
        assert todo[1]["responses"][0]["claims"] == [{"text": fact(9, j), "human": None} for j in range(2)]
        todo[1]["responses"][0]["claims"][1]["human"] = "supported"
        back = load_items(write_jsonl(tmp_path / "labelled.jsonl", todo))
        assert [(c.text, c.human) for c in back[1].responses[0].claims or ()] == [(fact(9, 0), None),
                                                                               (fact(9, 1), "SUPPORTED")]


def test_a_cascade_of_mixed_modes_or_of_another_judges_calibration_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with Judge(MockBackend("weak", weak_checks), store=store) as judge, \
            Judge(MockBackend("w2", weak_claims, generate_script=extract), store=store) as other:
        cal = judge.calibrate(load_items(write_jsonl(tmp_path / "cal.jsonl", check_items(range(40)))), "checklist")
        claims_cal = other.calibrate(load_items(write_jsonl(tmp_path / "c.jsonl", claim_items(range(40), given=True))),
                                     "claims")
        with pytest.raises(ConfigError, match=r"different modes \(checklist, claims\)"):
            judge.cascade([], [(judge, cal), (other, claims_cal)], target=0.8)
        with pytest.raises(ConfigError, match=r"does not fit this judging .*judge fingerprint"):
            other.cascade([], [(other, cal)], target=0.8)


# -- the CLI -----------------------------------------------------------------------------------------------

@pytest.fixture
def check_judges() -> Iterator[tuple[MockBackend, MockBackend]]:
    weak, strong = MockBackend("cweak", weak_checks), MockBackend("cstrong", strong_checks)
    register_mock("cweak", weak)
    register_mock("cstrong", strong)
    try:
        yield weak, strong
    finally:
        register_mock("cweak", None)
        register_mock("cstrong", None)


def test_the_cli_runs_a_checklist_cascade_and_writes_the_human_tier(tmp_path: Path,
                                                                   check_judges: tuple[MockBackend, MockBackend]
                                                                   ) -> None:
    cal = write_jsonl(tmp_path / "cal.jsonl", check_items(range(100, 1300)))
    new = write_jsonl(tmp_path / "new.jsonl", check_items(range(60), labelled=False))
    store = tmp_path / "s.sqlite"
    runner = CliRunner()
    for name in ("cweak", "cstrong"):
        done = runner.invoke(cli, ["calibrate", str(cal), "--mode", "checklist", "-j", f"mock/{name}", "--store",
                                   str(store), "--out", str(tmp_path / f"{name}.json"), "-q"])
        assert done.exit_code == 0, done.output
    args = ["select", str(new), "--cascade", "mock/cweak,mock/cstrong,human", "--calibration",
            str(tmp_path / "cweak.json"), "--calibration", str(tmp_path / "cstrong.json"), "--target-agreement",
            "0.9", "--store", str(store), "--out", str(tmp_path / "out.jsonl"), "--summary", str(tmp_path / "s.json"),
            "--abstained-out", str(tmp_path / "todo.jsonl")]
    calls = check_judges[1].calls
    done = runner.invoke(cli, args)
    assert done.exit_code == 0, done.output
    assert "Cascade: 120 checks" in done.output
    assert check_judges[1].calls - calls == 20
    summary = json.loads((tmp_path / "s.json").read_text())
    people = len(range(0, 60, 9))  # tier 1 leaves the tone of 0 mod 3 open, tier 2 that of 0 mod 9
    assert [t["decided"] for t in summary["tiers"]] == [120 - 20, 20 - people, people]
    todo = [json.loads(x) for x in (tmp_path / "todo.jsonl").read_text().splitlines()]
    assert [t["id"] for t in todo] == [f"k{i}" for i in range(0, 60, 9)]
    done = runner.invoke(cli, args)
    assert done.exit_code == 0 and check_judges[1].calls - calls == 20
    assert [t["model_calls"] for t in json.loads((tmp_path / "s.json").read_text())["tiers"][:2]] == [0, 0]


# -- with the real small judge -------------------------------------------------------------------------------

def _smol_checks(indices: range | list[int]) -> list[dict[str, Any]]:
    """One check per question: does the answer give the right sum (right on even questions)."""
    rows = []
    for i in indices:
        text = f"{i} + 2 = {i + 2}." if i % 2 == 0 else f"{i} + 2 = {i + 5}."
        rows.append({"id": f"k{i}", "question": f"Question {i}: what is {i} + 2?",
                     "checklist": [{"id": "sum", "text": CHECKS["sum"]}],
                     "responses": [{"id": "r", "text": text, "human_checks": {"sum": i % 2 == 0}}]})
    return rows


@pytest.mark.model
def test_a_checklist_cascade_from_the_real_small_judge_to_a_scripted_one(tmp_path: Path) -> None:
    name = "llamacpp/smollm2-135m" if importlib.util.find_spec("llama_cpp") else "hf/smollm2-135m"
    cal_items = load_items(write_jsonl(tmp_path / "cal.jsonl", _smol_checks(range(10, 30))))
    new_items = load_items(write_jsonl(tmp_path / "new.jsonl", _smol_checks(range(8))))
    scripted = MockBackend("sure", lambda req: _yes(req, 0.95 if int(QUESTION.findall(req.prompt)[-1]) % 2 == 0
                                                    else 0.05))
    with Judge(name, store=tmp_path / "s.sqlite") as judge:
        second = judge.sibling(scripted)
        cal1, cal2 = judge.calibrate(cal_items, "checklist"), second.calibrate(cal_items, "checklist")
        assert cal1.n == cal2.n == 20 and judge.stats.model_calls == 20
        tiers = [(judge, cal1), (second, cal2), ("human", None)]
        calls = scripted.calls
        records, summary = judge.cascade(new_items, tiers, target=0.6, delta=0.3)
        rows = summary["tiers"]
        assert rows[0]["judge"] == name and rows[0]["model_calls"] == 8 and rows[0]["asked"] == 8
        open1 = sorted(int(r["item_id"][1:]) for r in records if r["checks"][0]["cascade"][0]["abstained"])
        assert rows[1]["asked"] == len(open1) == scripted.calls - calls == rows[1]["model_calls"]
        asked = [q for q in scripted.history if isinstance(q, LabelRequest)][len(cal_items):]
        assert sorted(int(QUESTION.findall(q.prompt)[-1]) for q in asked) == open1
        for r in records:
            c = r["checks"][0]
            assert r["judge"] == name and c["cascade"][0]["judge"] == name
            assert (c["tier"] == 1) == (c["cascade"][0]["abstained"] is None)
            assert 0.0 <= c["p_pass"] <= 1.0
        records2, summary2 = judge.cascade(new_items, tiers, target=0.6, delta=0.3)
        assert [t["model_calls"] for t in summary2["tiers"][:2]] == [0, 0] and records2 == records
