"""``calibrate`` says at once which targets ``select`` will accept of the file it writes (issue 39), with
``select``'s own test: a set too small for any target is a warning, not a surprise at ``select`` time."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from tests.conftest import write_jsonl
from tests.test_trust import _pair_items
from trustjudge import Judge, MockBackend, load_items
from trustjudge.audit._support import TARGETS, selection_support
from trustjudge.cli import cli
from trustjudge.errors import ConfigError


def _calibrate(tmp_path: Path, n: int, *extra: str, judge: str = "mock/hash") -> tuple[int, str]:
    items = write_jsonl(tmp_path / "items.jsonl", _pair_items(n))
    result = CliRunner().invoke(cli, ["calibrate", str(items), "-j", judge, "--store", str(tmp_path / "s.sqlite"),
                                      "--out", str(tmp_path / "cal.json"), *extra])
    return result.exit_code, " ".join(result.output.split())


def test_calibrate_warns_when_no_target_can_be_selected(tmp_path: Path) -> None:
    code, output = _calibrate(tmp_path, 3)
    assert code == 0, output
    assert ("warning: these 3 labelled compare verdicts cannot support any target agreement above chance at "
            "--risk-delta 0.1") in output
    assert "the thresholds tested on the other 1" in output  # select's own reason, quoted
    quiet_code, quiet = _calibrate(tmp_path, 3, "-q")  # a warning is printed even with --quiet
    assert quiet_code == 0 and "cannot support any target" in quiet


def test_calibrate_names_the_highest_target_select_accepts(tmp_path: Path) -> None:
    # a recorded judge that prefers the right answer, sure of most pairs and wrong on every tenth
    rows = []
    for row in _pair_items(200):
        i, right = int(row["id"][1:]), row["pairs"][0]["human"] == "first"
        sure = 0.55 + 0.4 * (i % 7) / 6
        p_right = 1 - sure if i % 10 == 3 else sure
        p_a = p_right if right else 1 - p_right
        rows.append({"item_id": row["id"], "a": "a", "b": "b",
                     "probabilities": {"A": p_a * 0.9, "B": (1 - p_a) * 0.9, "tie": 0.1}})
    recorded = write_jsonl(tmp_path / "recorded.jsonl", rows)
    code, output = _calibrate(tmp_path, 200, judge=f"recorded/{recorded}")
    assert code == 0, output
    assert "warning" not in output and "supports `select --target-agreement` up to" in output
    highest = float(output.split("up to ", 1)[1].split(" ", 1)[0])
    cal_file = tmp_path / "cal.json"
    from trustjudge.audit._trust import Calibration
    cal = Calibration.load(cal_file)
    cal.selection(highest, 0.1)  # select accepts it ...
    if highest < TARGETS[-1]:  # ... and refuses the next target up
        nxt = TARGETS[TARGETS.index(highest) + 1]
        try:
            cal.selection(nxt, 0.1)
        except ConfigError:
            pass
        else:
            raise AssertionError(f"{nxt} is supported too")


def test_support_is_the_same_test_select_runs(tmp_path: Path) -> None:
    judge = Judge(MockBackend("hash"), store=":memory:")
    cal = judge.calibrate(load_items(write_jsonl(tmp_path / "i.jsonl", _pair_items(3))), "compare")
    judge.close()
    support = selection_support(cal)
    assert support.highest is None
    try:
        cal.selection(support.lowest, 0.1)
    except ConfigError as exc:
        assert support.refusal == str(exc)
    else:
        raise AssertionError("select accepted a target the support check refused")
