"""Calibration files and selective verdicts end to end: the library, the CLI, the real small judge."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_jsonl
from trustjudge import Judge, MockBackend, load_items
from trustjudge.audit._trust import Calibration
from trustjudge.errors import ConfigError

CLI = [sys.executable, "-m", "trustjudge.cli"]


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=900)


def _pair_items(n: int) -> list[dict[str, Any]]:
    """Pairs whose human label is the answer that names the right number (first or second, alternating)."""
    rows = []
    for i in range(n):
        right, wrong = f"It is {i + 2}.", f"It is {i + 7}, I think."
        first_right = i % 2 == 0
        rows.append({"id": f"q{i}", "question": f"What is {i} + 2?",
                     "responses": [{"id": "a", "text": right if first_right else wrong},
                                   {"id": "b", "text": wrong if first_right else right}],
                     "pairs": [{"first": "a", "second": "b", "human": "first" if first_right else "second"}]})
    return rows


def _check_items(n: int) -> list[dict[str, Any]]:
    """One check per response ("names Paris"), labelled by whether the text does."""
    rows = []
    cities = ["Paris", "Lyon", "Paris", "Paris", "Paris", "Paris", "Paris", "Paris"]
    for i in range(n):
        city = cities[i % len(cities)]
        rows.append({"id": f"c{i}", "question": "What is the capital of France?",
                     "checklist": [{"id": "paris", "text": "Does the response name Paris as the capital?"}],
                     "responses": [{"id": "r", "text": f"The capital of France is {city}.",
                                    "human_checks": {"paris": city == "Paris"}}]})
    return rows


def test_library_calibrate_select_and_rerun_with_zero_calls(tmp_path: Path) -> None:
    items = load_items(write_jsonl(tmp_path / "items.jsonl", _pair_items(120)))
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    cal = judge.calibrate(items, "compare")
    assert cal.n == 120 and cal.map.method == "vector" and cal.position_bias is not None
    path = tmp_path / "cal.json"
    cal.save(path)
    again = Calibration.load(path)
    assert again.to_dict() == cal.to_dict()
    calls = judge.stats.model_calls
    records, summary = judge.select(items, again)
    assert judge.stats.model_calls == calls  # everything from the store
    assert all(set(r["calibrated"]) == {"probabilities", "verdict", "confidence"} for r in records)
    assert summary["coverage"] == 1.0
    # the mock judge's verdicts are noise: a high target cannot be supported, and says so
    with pytest.raises(ConfigError, match=r"cannot support agreement >= 0.95"):
        judge.select(items, again, target=0.95, delta=0.1)
    judge.close()


def test_a_calibration_is_refused_on_another_judge_or_template(tmp_path: Path) -> None:
    items = load_items(write_jsonl(tmp_path / "items.jsonl", _pair_items(20)))
    with Judge("mock/hash", store=tmp_path / "s.sqlite") as judge:
        cal = judge.calibrate(items, "compare")
    with Judge(MockBackend("other"), store=tmp_path / "s.sqlite") as other, \
            pytest.raises(ConfigError, match="fingerprint"):
        other.select(items, cal)
    template = tmp_path / "pair.txt"
    default = (Path(__file__).parents[1] / "src/trustjudge/templates/pairwise.txt").read_text(encoding="utf-8")
    template.write_text("Be strict.\n" + default, encoding="utf-8")
    with Judge("mock/hash", store=tmp_path / "s.sqlite", pairwise_template=template) as changed:
        with pytest.raises(ConfigError, match="template"):
            changed.select(items, cal)
        records, _ = changed.select(items, cal, override=True)
    assert records[0]["calibrated"]["overridden"] == ["template"]
    with pytest.raises(ConfigError, match="for the compare mode, not checklist"):  # never overridable
        cal.check(mode="checklist", judge=cal.judge, fingerprint=cal.fingerprint, template=cal.template,
                  protocol=cal.protocol, override=True)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.pop("mode"), "missing field 'mode'"),
    (lambda d: d.update(method="magic"), "field 'method'"),
    (lambda d: d["calibration_set"]["probs"].__setitem__(0, [0.1]), r"calibration_set.probs\[0\]"),
    (lambda d: d["calibration_set"]["human"].__setitem__(0, 7), r"calibration_set.human\[0\]"),
    (lambda d: d["calibration_set"]["human"].__setitem__(0, 1 - d["calibration_set"]["human"][0]), "data_hash"),
])
def test_a_bad_calibration_file_is_a_clear_error(tmp_path: Path, edit: Any, message: str) -> None:
    items = load_items(write_jsonl(tmp_path / "items.jsonl", _pair_items(12)))
    with Judge("mock/hash", store=tmp_path / "s.sqlite") as judge:
        data = judge.calibrate(items, "compare").to_dict()
    edit(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        Calibration.load(bad)
    bad.write_text("{\n  nope", encoding="utf-8")
    with pytest.raises(ConfigError, match="line 2"):
        Calibration.load(bad)


def test_cli_refuses_an_unsupported_target_before_judging(tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", _pair_items(8))
    store = tmp_path / "s.sqlite"
    done = cli("calibrate", items, "-j", "mock/hash", "--store", store, "--out", tmp_path / "cal.json", "-q")
    assert done.returncode == 0, done.stderr
    refused = cli("select", items, "-j", "mock/hash", "--store", tmp_path / "other.sqlite", "--calibration",
                  tmp_path / "cal.json", "--target-agreement", "0.9", "-q")
    assert refused.returncode == 2
    assert "cannot support agreement >= 0.9" in refused.stderr and "8 labelled compare verdicts" in refused.stderr
    assert not (tmp_path / "other.sqlite").exists()  # nothing judged
    clash = cli("select", items, "-j", "mock/hash", "--store", store, "--calibration", tmp_path / "cal.json",
                "--out", tmp_path / "cal.json")
    assert clash.returncode == 2 and "would overwrite the input" in clash.stderr


@pytest.mark.model
def test_selective_checklist_on_the_real_small_judge_and_the_abstained_file_round_trips(tmp_path: Path) -> None:
    cal_items = write_jsonl(tmp_path / "cal.jsonl", _check_items(24))
    new_items = write_jsonl(tmp_path / "new.jsonl", [{**r, "id": "n" + r["id"]} for r in _check_items(8)])
    store, cal = tmp_path / "s.sqlite", tmp_path / "cal.json"
    fitted = cli("calibrate", cal_items, "--mode", "checklist", "-j", "hf/smollm2-135m", "--store", store,
                 "--out", cal)
    assert fitted.returncode == 0, fitted.stderr
    assert "24 labelled verdicts" in fitted.stderr
    file = json.loads(cal.read_text())
    assert file["mode"] == "checklist" and file["method"] == "platt" and file["n"] == 24
    args = ["select", new_items, "--calibration", cal, "-j", "hf/smollm2-135m", "--store", store,
            "--target-agreement", "0.6", "--risk-delta", "0.3", "--out", tmp_path / "kept.jsonl",
            "--summary", tmp_path / "summary.json", "--abstained-out", tmp_path / "todo.jsonl"]
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    g = summary["guarantee"]
    assert g["target_agreement"] == pytest.approx(0.6) and g["calibration_n"] == 12  # part B of 24
    assert g["agreement_lower_bound"] >= 0.6 - 1e-9
    recs = [json.loads(line) for line in (tmp_path / "kept.jsonl").read_text().splitlines()]
    blocks = [r["checks"][0]["calibrated"] for r in recs]
    for b in blocks:  # kept exactly when confident enough
        assert (b["abstained"] is None) == (b["confidence"] >= g["threshold"])
        assert "p_pass" in recs[0]["checks"][0]  # the raw probability stays beside the calibrated one
    second = cli(*args)
    assert second.returncode == 0 and "model calls 0" in second.stderr, second.stderr
    abstained = sum(b["abstained"] is not None for b in blocks)
    todo = (tmp_path / "todo.jsonl").read_text().splitlines()
    assert len(todo) == abstained
    if todo:  # label the abstained items and add them to the calibration set
        rows = [json.loads(line) for line in todo]
        for row in rows:
            for r in row["responses"]:
                r["human_checks"] = {"paris": "Paris" in r["text"]}
        labelled = write_jsonl(tmp_path / "labelled.jsonl", rows)
        items = load_items(labelled)
        assert all(r.human_checks for it in items for r in it.responses)
        merged = write_jsonl(tmp_path / "merged.jsonl", [json.loads(x) for x in cal_items.read_text().splitlines()]
                             + rows)
        refit = cli("calibrate", merged, "--mode", "checklist", "-j", "hf/smollm2-135m", "--store", store,
                    "--out", tmp_path / "cal2.json", "-q")
        assert refit.returncode == 0, refit.stderr
        assert json.loads((tmp_path / "cal2.json").read_text())["n"] == 24 + len(rows)


def test_the_abstained_pairs_file_loads_as_items_and_its_labels_read_back(tmp_path: Path) -> None:
    from trustjudge.audit._trust import abstained_items

    rows = _pair_items(3)
    annotated = [{"item_id": f"q{i}", "first_id": "a", "second_id": "b",
                  "calibrated": {"abstained": None if i == 1 else "below_threshold"}} for i in range(3)]
    todo = abstained_items("compare", annotated, {r["id"]: r for r in rows})
    assert [t["id"] for t in todo] == ["q0", "q2"]
    assert todo[0]["pairs"] == [{"first": "a", "second": "b", "human": None}]
    path = write_jsonl(tmp_path / "todo.jsonl", todo)
    assert [p.human for it in load_items(path) for p in it.pairs or ()] == [None, None]
    for t in todo:
        t["pairs"][0]["human"] = "second"
    labelled = load_items(write_jsonl(tmp_path / "labelled.jsonl", todo))
    assert [p.human for it in labelled for p in it.pairs or ()] == ["second", "second"]
