"""One name per meaning (issue 39): the risk level of a guarantee is ``--risk-delta`` on ``select`` as on every
calibrated command, with one range; ``select --delta`` is its deprecated spelling, which warns."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import write_jsonl
from tests.test_trust import _pair_items
from trustjudge.cli import cli


@pytest.fixture
def calibrated(tmp_path: Path) -> tuple[Path, Path, Path]:
    items = write_jsonl(tmp_path / "items.jsonl", _pair_items(8))
    store, cal = tmp_path / "s.sqlite", tmp_path / "cal.json"
    done = CliRunner().invoke(cli, ["calibrate", str(items), "-j", "mock/hash", "--store", str(store), "--out",
                                    str(cal), "-q"])
    assert done.exit_code == 0, done.output
    return items, store, cal


def _select(calibrated: tuple[Path, Path, Path], *extra: str) -> tuple[int, str]:
    items, store, cal = calibrated
    result = CliRunner().invoke(cli, ["select", str(items), "-j", "mock/hash", "--store", str(store),
                                      "--calibration", str(cal), "--out", str(store.parent / "v.jsonl"), *extra])
    return result.exit_code, " ".join(result.output.split())


def test_select_takes_risk_delta(calibrated: tuple[Path, Path, Path]) -> None:
    code, output = _select(calibrated, "--risk-delta", "0.2")
    assert code == 0, output
    assert "deprecated" not in output


def test_select_delta_is_a_deprecated_alias_that_warns(calibrated: tuple[Path, Path, Path]) -> None:
    code, output = _select(calibrated, "--delta", "0.2")
    assert code == 0, output
    assert "`select --delta` is deprecated: the risk level is --risk-delta" in output
    clash, said = _select(calibrated, "--delta", "0.2", "--risk-delta", "0.3")
    assert clash == 2 and "disagree" in said


@pytest.mark.parametrize("command", ["select", "compare"])
@pytest.mark.parametrize("value", ["0", "1"])
def test_one_range_for_the_risk_level(calibrated: tuple[Path, Path, Path], command: str, value: str) -> None:
    items, store, cal = calibrated
    result = CliRunner().invoke(cli, [command, str(items), "-j", "mock/hash", "--store", str(store), "--calibration",
                                      str(cal), "--target-agreement", "0.5", "--risk-delta", value])
    assert result.exit_code == 2 and "0.0<x<1.0" in result.output, result.output
