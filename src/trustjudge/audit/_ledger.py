"""What a verification sample concluded, remembered: a run on the same data under the same calibration says it.

``trustjudge check-sample`` tests whether a selection's guarantee holds on a run's own data
(:mod:`trustjudge.audit._sample`). Its result is worth more than one printout: a guarantee refuted on some data
stays refuted there, and every later run that applies the same calibration to the same data should say so. The
ledger is a small JSON file beside the calibration file (``cal.json.checks.json``), one entry per check, keyed by
the calibration's data hash (:attr:`~trustjudge.audit._trust.Calibration.data_hash`) and the SHA-256 of the items
file the run judged. :func:`lookup` finds the latest entry for a calibration and items; :func:`notice` says it
in one phrase ("refuted by check-sample on 60 labels: agreement 0.600 < target 0.8"), and :func:`stamp` adds it
to every calibrated block of a run's records.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..io._files import read_json_file

LEDGER_VERSION = 1
SUFFIX = ".checks.json"
RESULTS = ("holds", "refuted", "undecided")
_FIELDS = ("calibration_data_hash", "items_sha256", "result", "kept_labelled", "kept_agreed", "agreement",
           "target_agreement", "delta")


def ledger_path(calibration: str | Path) -> Path:
    """Where the checks of the calibration file ``calibration`` are remembered: beside it."""
    p = Path(calibration)
    return p.with_name(p.name + SUFFIX)


def _check_entry(entry: Any, where: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: an entry is a JSON object")
    for name in _FIELDS:
        if name not in entry:
            raise ConfigError(f"{where}: missing field {name!r}")
    for name in ("calibration_data_hash", "items_sha256"):
        if not isinstance(entry[name], str) or not entry[name]:
            raise ConfigError(f"{where}: field {name!r} is not a hash")
    if entry["result"] not in RESULTS:
        raise ConfigError(f"{where}: field 'result' is {entry['result']!r}, not one of {', '.join(RESULTS)}")
    for name in ("kept_labelled", "kept_agreed"):
        v = entry[name]
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ConfigError(f"{where}: field {name!r} is not a count ({v!r})")
    for name in ("agreement", "target_agreement", "delta"):
        v = entry[name]
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or not 0 <= v <= 1:
            raise ConfigError(f"{where}: field {name!r} is not a number between 0 and 1 ({v!r})")
    return entry


def read(path: Path) -> list[dict[str, Any]]:
    """The ledger's entries, oldest first (none when the file does not exist); a bad file names its field."""
    if not path.exists():
        return []
    data = read_json_file(path, "the verification ledger")
    if not isinstance(data, dict) or data.get("trustjudge_verification_ledger") != LEDGER_VERSION:
        raise ConfigError(f"{path}: not a trustjudge verification ledger (field 'trustjudge_verification_ledger')")
    checks = data.get("checks")
    if not isinstance(checks, list):
        raise ConfigError(f"{path}: field 'checks' is not a list")
    return [_check_entry(e, f"{path}: checks[{i}]") for i, e in enumerate(checks)]


def entry_of(result: Mapping[str, Any], *, data_hash: str, items_sha256: str, sample: str) -> dict[str, Any]:
    """The ledger entry of a verification result (:func:`trustjudge.audit._sample.check`)."""
    return {"calibration_data_hash": data_hash, "items_sha256": items_sha256, "result": result["result"],
            "kept_labelled": int(result["kept_labelled"]), "kept_agreed": int(result["kept_agreed"]),
            "agreement": float(result["agreement"]), "target_agreement": float(result["target_agreement"]),
            "delta": float(result["delta"]), "label_more": result.get("label_more"), "sample": sample}


def remember(path: Path, entry: Mapping[str, Any]) -> None:
    """Append ``entry`` to the ledger at ``path`` (written whole, atomically)."""
    from ..io._outputs import atomic_output

    checks = [*read(path), _check_entry(dict(entry), "the new entry")]
    with atomic_output(path, "the verification ledger") as fh:
        fh.write(json.dumps({"trustjudge_verification_ledger": LEDGER_VERSION, "checks": checks}, indent=1) + "\n")


def lookup(path: Path, data_hash: str, items_sha256: str) -> dict[str, Any] | None:
    """The latest check of the calibration with ``data_hash`` on the items with ``items_sha256`` (None: none)."""
    found = [e for e in read(path) if e["calibration_data_hash"] == data_hash and e["items_sha256"] == items_sha256]
    return found[-1] if found else None


def notice(entry: Mapping[str, Any]) -> str:
    """The check in one phrase, for the guarantee line."""
    head = f"{entry['result']} by check-sample on {entry['kept_labelled']} labels: agreement {entry['agreement']:.3f}"
    t = entry["target_agreement"]
    if entry["result"] == "refuted":
        return f"guarantee refuted by check-sample on {entry['kept_labelled']} labels: agreement " \
               f"{entry['agreement']:.3f} < target {t:g} (delta {entry['delta']:g}) on this data"
    if entry["result"] == "holds":
        return f"guarantee {head} >= target {t:g} (delta {entry['delta']:g}) on this data"
    more = entry.get("label_more")
    return f"guarantee {head}, target {t:g}: " + (f"label about {more} more kept verdicts to decide" if more
                                                  else "undecided")


def stamp(mode: str, records: Sequence[dict[str, Any]], classes: Sequence[str], levels: Sequence[float] | None,
          entry: Mapping[str, Any] | None) -> None:
    """Add ``entry`` (with its :func:`notice`) as ``verification`` to every calibrated block of ``records``."""
    if entry is None:
        return
    from ._trust import units

    said = {**entry, "notice": notice(entry)}
    for unit in units(mode, records, classes, levels):
        target: Any = records[unit.record]
        for step in unit.path:
            target = target[step]
        block = target.get("calibrated")
        if isinstance(block, dict):
            block["verification"] = dict(said)
