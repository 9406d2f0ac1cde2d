"""`check-sample` remembers a result only for the sample `sample` drew (issue 34, hardening): before it writes
beside the calibration file the key names, the run's verdicts are read again and re-annotated under that
calibration (zero calls), and the key's classes, run counts and sampled verdicts must be what they give. Before,
a key edited to move a disagreeing kept verdict to the abstained stratum, or to swap it for an agreeing one,
turned a refuted guarantee into a remembered "holds" that every later run printed."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.test_verification_ledger import _calibrated, _invoke, _lines, _pairs, _run
from trustjudge.audit import _ledger as L
from trustjudge.cli import cli
from trustjudge.errors import ConfigError

OTHER = {"first": "second", "second": "first", "tie": "first"}


def _sampled(tmp_path: Path) -> tuple[Path, Path, Path, dict[str, Any]]:
    """A real mock/hash run under a calibration, a sample of 30 of its kept verdicts (and abstained ones), labelled
    so that the guarantee is refuted (the judge's verdict on 1 pair in 3, the other response elsewhere)."""
    store, cal, _ = _calibrated(tmp_path)
    new = _pairs(tmp_path / "new.jsonl", 150)
    _run(new, store, cal, tmp_path / "v.jsonl", tmp_path / "sum.json")
    sample = tmp_path / "sample.jsonl"
    assert _invoke("sample", tmp_path / "v.jsonl", "--items", new, "--summary", tmp_path / "sum.json",
                   "--out", sample, "--size", 30).exit_code == 0
    said = {r["item_id"]: r["calibrated"]["verdict"] for r in _lines(tmp_path / "v.jsonl")}
    rows = _lines(sample)
    for row in rows:
        for pair in row["pairs"]:
            pair["human"] = said[row["id"]] if int(row["id"][1:]) % 3 == 0 else OTHER[said[row["id"]]]
    sample.write_text("".join(json.dumps(r) + "\n" for r in rows))
    key = sample.with_name(sample.name + ".key.json")
    return sample, key, cal, json.loads(key.read_text())


def _refused(sample: Path, *more: Any) -> ConfigError:
    res = CliRunner().invoke(cli, ["check-sample", str(sample), *map(str, more)])
    assert res.exit_code != 0 and isinstance(res.exception, ConfigError), res.output
    return res.exception


def test_the_unedited_key_is_checked_against_the_run_and_its_result_remembered(tmp_path: Path) -> None:
    sample, _, cal, data = _sampled(tmp_path)
    assert data["size"] == 30 and data["abstained_size"] is None and data["verdicts"] == str(tmp_path / "v.jsonl")
    checked = _invoke("check-sample", sample)
    assert checked.exit_code == 0 and "REFUTED" in checked.stderr, checked.output
    (entry,) = L.read(L.ledger_path(cal))
    assert entry["result"] == "refuted"


def _disagreeing_kept(data: dict[str, Any], sample: Path) -> int:
    labels = {row["id"]: row["pairs"][0]["human"] for row in _lines(sample)}
    return next(i for i, u in enumerate(data["units"])
                if u["stratum"] == "kept" and labels[u["key"][0]] != u["verdict"])


def _to_abstained(data: dict[str, Any], sample: Path, tmp_path: Path) -> str:
    i = _disagreeing_kept(data, sample)
    data["units"][i]["stratum"] = "abstained"
    return rf"units\[{i}\] is the abstained verdict"


def _swapped(data: dict[str, Any], sample: Path, tmp_path: Path) -> str:
    """A disagreeing kept verdict replaced by a kept verdict of the run that was not drawn (its label planted)."""
    i = _disagreeing_kept(data, sample)
    drawn = {u["key"][0] for u in data["units"]}
    extra = next(r for r in _lines(tmp_path / "v.jsonl")
                 if r["calibrated"]["abstained"] is None and r["item_id"] not in drawn)
    verdict = extra["calibrated"]["verdict"]
    data["units"][i] = {"key": [extra["item_id"], "a", "b"], "stratum": "kept", "verdict": verdict}
    rows = [*_lines(sample), {"id": extra["item_id"], "question": "?", "responses": [
        {"id": "a", "text": "x"}, {"id": "b", "text": "y"}],
        "pairs": [{"first": "a", "second": "b", "human": verdict}]}]
    sample.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rf"units\[{i}\] is the kept verdict '{extra['calibrated']['verdict']}' of \['{extra['item_id']}'"


def _flipped_old_key(data: dict[str, Any], sample: Path, tmp_path: Path) -> str:
    """A key of the previous release (no sizes: it is checked verdict by verdict), a kept verdict edited."""
    for name in ("size", "abstained_size", "domain"):
        del data[name]
    i = _disagreeing_kept(data, sample)
    data["units"][i]["verdict"] = now = OTHER[data["units"][i]["verdict"]]
    return rf"units\[{i}\]: field 'verdict' is '{now}', but .*v\.jsonl says"


def _counts(data: dict[str, Any], sample: Path, tmp_path: Path) -> str:
    data["run"]["kept"] += 10
    return r"field 'run' is \{'kept': \d+, 'abstained': \d+\}, but the run's verdicts"


def _classes(data: dict[str, Any], sample: Path, tmp_path: Path) -> str:
    data["classes"] = ["second", "first", "tie"]
    return r"field 'classes' is \['second', 'first', 'tie'\], but .*cal\.json gives \['first', 'second', 'tie'\]"


def _hash(data: dict[str, Any], sample: Path, tmp_path: Path) -> str:
    data["calibration"]["data_hash"] = "0" * 16
    return r"field 'calibration\.data_hash' is '0000000000000000', but .*cal\.json has data hash"


def _items_hash(data: dict[str, Any], sample: Path, tmp_path: Path) -> str:
    """The items hash pointed at other data (the result would be said by runs on those items)."""
    other = _pairs(tmp_path / "other.jsonl", 150, start=500)
    data["items_sha256"] = hashlib.sha256(other.read_bytes()).hexdigest()
    return r"field 'items_sha256' is '[0-9a-f]{64}', but .*new\.jsonl has SHA-256"


def _items_file(data: dict[str, Any], sample: Path, tmp_path: Path) -> str:
    """The items path and hash both pointed at other data: the run's verdicts are not of those items."""
    other = _pairs(tmp_path / "other.jsonl", 150, start=500)
    data["items"], data["items_sha256"] = str(other), hashlib.sha256(other.read_bytes()).hexdigest()
    return r"field 'items': .*other\.jsonl has no item 'q0' of the run's verdicts"


@pytest.mark.parametrize("edit", [_to_abstained, _swapped, _flipped_old_key, _counts, _classes, _hash, _items_hash,
                                  _items_file])
def test_an_edited_key_is_refused_naming_the_field_and_nothing_is_remembered(
        tmp_path: Path, edit: Callable[[dict[str, Any], Path, Path], str]) -> None:
    sample, key, cal, data = _sampled(tmp_path)
    pattern = edit(data, sample, tmp_path)
    key.write_text(json.dumps(data))
    exc = _refused(sample, "--out", tmp_path / "result.json")
    assert str(exc).startswith(f"{key}: ") and re.search(pattern, str(exc)), exc
    assert not L.ledger_path(cal).exists() and not (tmp_path / "result.json").exists()


def test_an_old_key_unedited_is_still_checked_verdict_by_verdict_and_remembered(tmp_path: Path) -> None:
    sample, key, cal, data = _sampled(tmp_path)
    for name in ("size", "abstained_size", "domain", "items"):
        del data[name]
    key.write_text(json.dumps(data))
    checked = _invoke("check-sample", sample)
    assert checked.exit_code == 0 and "REFUTED" in checked.stderr, checked.output
    assert L.read(L.ledger_path(cal))[0]["result"] == "refuted"


def test_moved_verdicts_and_items_are_asked_for_and_found_with_verdicts_and_items(tmp_path: Path) -> None:
    sample, _, cal, _ = _sampled(tmp_path)
    moved = tmp_path / "elsewhere.jsonl"
    (tmp_path / "v.jsonl").rename(moved)
    exc = _refused(sample)
    assert "field 'verdicts': the run's verdicts" in str(exc) and "--verdicts FILE" in str(exc), exc
    assert not L.ledger_path(cal).exists()
    checked = _invoke("check-sample", sample, "--verdicts", moved)
    assert checked.exit_code == 0 and "REFUTED" in checked.stderr, checked.output
    assert L.ledger_path(cal).exists()
    (tmp_path / "new.jsonl").rename(tmp_path / "new-moved.jsonl")  # the items moved too
    exc = _refused(sample, "--verdicts", moved)
    assert "field 'items': the items the run judged" in str(exc) and "--items FILE" in str(exc), exc
    checked = _invoke("check-sample", sample, "--verdicts", moved, "--items", tmp_path / "new-moved.jsonl")
    assert checked.exit_code == 0 and "REFUTED" in checked.stderr, checked.output
    # verdicts edited since the sample was drawn: refused, as the sample command refuses them
    records = _lines(moved)
    records[0]["calibrated"]["verdict"] = OTHER[records[0]["calibrated"]["verdict"]]
    moved.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert "line 1: field 'calibrated.verdict'" in str(_refused(sample, "--verdicts", moved, "--items",
                                                                tmp_path / "new-moved.jsonl"))
