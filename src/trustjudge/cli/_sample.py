"""``trustjudge sample`` and ``trustjudge check-sample``: the guarantee checked on a run's own data.

``sample`` draws a seeded random sample of a run's pairwise verdicts (the records ``select --out`` writes, with
a target), stratified into kept and abstained ones, and writes it in the items format with empty labels, beside
a key file of what each sampled verdict was; where it knows the calibration, the records are first checked to
be that calibration's verdicts (:func:`~trustjudge.audit._sample.check_annotated`). Label the pairs' ``human``
and ``check-sample`` tests exactly whether agreement on the kept verdicts meets the target
(:mod:`trustjudge.audit._sample`): holds, refuted or undecided (label N more).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from ..audit import _ledger
from ..audit import _sample as V
from ..audit._trust import Calibration, classes_of
from ..audit._verify import known_hashes
from ..errors import ConfigError
from ..io._files import read_json_file
from ..io._items import Item
from ..io._outputs import atomic_output
from ..modes._verification import Labelling, labelling
from ._common import err
from ._inputs import digest, item_dict, read_items
from ._options import RISK_LEVEL, Finite, resolve_risk_delta

PAIRWISE = "compare"
"""The mode of a sample whose key or summary names none (samples were pairwise first)."""


def _key_path(sample: Path, key: Path | None) -> Path:
    return key if key is not None else sample.with_name(sample.name + ".key.json")


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[int]]:
    """The records of a JSONL file and the line each is on."""
    out, lines = [], []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}: line {n}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise ConfigError(f"{path}: line {n}: a record is a JSON object")
            out.append(row)
            lines.append(n)
    return out, lines


def _read_summary(summary: Path | None) -> dict[str, Any]:
    if summary is None:
        return {}
    try:
        data = json.loads(summary.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{summary}: not a run summary with a guarantee ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{summary}: not a run summary with a guarantee (a JSON object)")
    return data


def _cascade_of(summary: Mapping[str, Any]) -> list[str] | None:
    """The tiers' judges of a cascade run's summary (`select --cascade`); None: not a cascade's."""
    tiers = summary.get("cascade")
    return [str(t) for t in tiers] if isinstance(tiers, list) and "tiers" in summary else None


def _levels(summary: Mapping[str, Any], target: float | None, delta: float | None) -> tuple[float, float]:
    """The target and delta of the run: given, else its ``--summary``'s guarantee (a cascade's: its own)."""
    g = summary if _cascade_of(summary) is not None else summary.get("guarantee") or {}
    if not isinstance(g, dict):
        raise ConfigError("the run summary's field 'guarantee' is not an object")
    target = target if target is not None else g.get("target_agreement")
    delta = delta if delta is not None else g.get("delta")
    if not isinstance(target, (int, float)) or not isinstance(delta, (int, float)):
        raise click.UsageError("give the run's --summary (from `select --summary`) or --target-agreement and --delta")
    return float(target), float(delta)


def _domain_summary(summary: dict[str, Any], domain: str | None, path: Path | None) -> dict[str, Any]:
    """The run summary the sample is drawn under: the whole run's, or with ``--domain`` that domain's block."""
    domains = summary.get("domains")
    if domain is None:
        if isinstance(domains, dict) and "guarantee" not in summary:
            raise click.UsageError(f"{path} is a per-domain run's summary (--calibration-by): give --domain, one of "
                                   f"{', '.join(map(repr, sorted(domains)))}")
        return summary
    if not isinstance(domains, dict):
        raise click.UsageError("--domain needs the --summary of a per-domain run (`--calibration-by`)")
    if domain not in domains or not isinstance(domains[domain], dict):
        raise ConfigError(f"{path}: no domain {domain!r} in field 'domains' (it has "
                          f"{', '.join(map(repr, sorted(domains)))})")
    return {"mode": summary.get("mode"), **domains[domain]}


def _domain_of(record: Mapping[str, Any]) -> Any:
    """The domain a per-domain run's record was calibrated by (its first calibrated block's)."""
    stack: list[Any] = [record]
    while stack:
        value = stack.pop(0)
        if isinstance(value, dict):
            block = value.get("calibrated")
            if isinstance(block, dict) and "domain" in block:
                return block["domain"]
            stack.extend(v for k, v in value.items() if k != "calibrated")
        elif isinstance(value, list):
            stack.extend(value)
    return None


def _of_domain(records: list[dict[str, Any]], lines: list[int], domain: Any) -> tuple[list[dict[str, Any]], list[int]]:
    """A run's verdict records and their lines; with ``domain``, that domain's only (their calibrated blocks
    say it)."""
    if domain is None:
        return records, lines
    mine = [i for i, r in enumerate(records) if _domain_of(r) == domain]
    return [records[i] for i in mine], [lines[i] for i in mine]


def _calibration_of(path: Path | None, summary: Mapping[str, Any]) -> tuple[Calibration | None, dict[str, Any] | None]:
    """The calibration the run applied (``--calibration``, else the summary's ``calibration.file``) and what the
    key says of it (its file and data hash, so that ``check-sample`` remembers its result beside it)."""
    if path is None:
        block = summary.get("calibration")
        file = block.get("file") if isinstance(block, dict) else None
        if not isinstance(file, str):
            return None, None
        path = Path(file)
    cal = Calibration.load(path)
    if isinstance(summary.get("calibration"), dict) and summary["calibration"].get("data_hash") not in (
            None, *known_hashes(cal)):  # the older hash: a run of the previous release, the file refitted since
        raise ConfigError(f"{path}: its data hash {cal.data_hash} is not the run summary's calibration.data_hash "
                          f"{summary['calibration']['data_hash']!r}: give the calibration the run applied")
    return cal, {"file": str(path.resolve()), "data_hash": cal.data_hash}


def _write_sample(out: Path, drawn: list[dict[str, Any]], by_id: Mapping[str, Item], labels: Labelling,
                  source: str) -> None:
    """The sampled verdicts in the items format, each one's label empty: pairs, or the responses holding them."""
    wanted: dict[str, dict[Any, list[dict[str, Any]]]] = {}
    for unit in drawn:
        item = unit["key"][0]
        if item not in by_id:
            raise ConfigError(f"{source}: no item {item!r} (the item of a sampled verdict)")
        at = (unit["key"][1], unit["key"][2]) if labels.pairs else unit["key"][1]
        wanted.setdefault(item, {}).setdefault(at, []).append(unit.get("part") or {})
    with atomic_output(out, "--out") as fh:
        for item_id, parts in wanted.items():
            row = item_dict(by_id[item_id])
            if labels.pairs:
                row["pairs"] = [{"first": f, "second": s, "human": None} for f, s in parts]
            else:
                row["responses"] = [r for r in row["responses"] if r["id"] in parts]
                for response in row["responses"]:
                    labels.blank(response, parts[response["id"]])
            fh.write(json.dumps(row) + "\n")


@click.command("sample")
@click.argument("verdicts", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--items", "items_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The items the verdicts were judged on (their questions and responses go into the sample).")
@click.option("--out", "-o", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Write the sample here (items JSONL, each pair's `human` empty, ready for labels).")
@click.option("--key", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write what each sampled verdict was here (default: OUT.key.json; keep it from the labellers).")
@click.option("--summary", "summary_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The run's summary (`select --summary`): its target agreement and delta (and calibration file).")
@click.option("--calibration", "calibration_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="The calibration file the run applied (the records are checked to be its "
                                 "verdicts): `check-sample` then remembers its result beside it, and later runs on "
                                 "the same items say it (default: the summary's).")
@click.option("--target-agreement", type=Finite(min=0.0, max=1.0), default=None, help="The run's target.")
@click.option("--risk-delta", "delta", type=RISK_LEVEL, default=None, help="The run's risk level (--risk-delta).")
@click.option("--delta", "old_delta", type=RISK_LEVEL, default=None, hidden=True,
              help="Deprecated spelling of --risk-delta.")
@click.option("--size", type=click.IntRange(min=1), default=None,
              help="Kept verdicts to sample (default: from --precision).")
@click.option("--precision", type=Finite(min=0.0, max=1.0), default=0.05, show_default=True,
              help="Without --size: the half-width wanted of the agreement's one-sided interval at level delta.")
@click.option("--abstained-size", type=click.IntRange(min=0), default=None,
              help="Abstained verdicts to sample (default: a quarter of the kept ones; not tested, shown).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--domain", default=None,
              help="A per-domain run (`--calibration-by`): sample this domain's verdicts only, under its "
                   "calibration and guarantee (its block of the --summary); the check is remembered beside its file.")
@click.option("--quiet", "-q", is_flag=True)
def sample(verdicts: Path, items_path: Path, out: Path, key: Path | None, summary_path: Path | None,
           calibration_path: Path | None, target_agreement: float | None, delta: float | None,
           old_delta: float | None, size: int | None, precision: float, abstained_size: int | None, seed: int,
           domain: str | None, quiet: bool) -> None:
    """Draw a seeded, stratified sample of VERDICTS (kept / abstained) to label, to check the guarantee."""
    delta = resolve_risk_delta(delta, old_delta, "sample", None)
    run_summary = _domain_summary(_read_summary(summary_path), domain, summary_path)
    target, risk = _levels(run_summary, target_agreement, delta)
    cascade = _cascade_of(run_summary)
    if cascade is not None and calibration_path is not None:
        raise click.UsageError("--calibration: a cascade applies one calibration per model tier; its sample is "
                               "drawn from the records as the cascade wrote them, tested, and not remembered (leave "
                               "out --calibration)")
    cal, calibration = _calibration_of(calibration_path, run_summary)
    mode = cal.mode if cal is not None else str(run_summary.get("mode", PAIRWISE))
    labels = labelling(mode)
    if cascade is not None and not labels.pairs:
        raise click.UsageError(f"a cascade of {mode} verdicts cannot be sampled yet (pairwise cascades can): sample "
                               "a run of one calibrated judge (`--calibration CAL --target-agreement T --out`)")
    records, lines = _of_domain(*_read_jsonl(verdicts), domain)
    if cal is None and not labels.pairs:
        raise click.UsageError(f"a sample of {mode} verdicts reads them through the calibration's units: give "
                               "--calibration CAL (or the run's --summary, which names it)")
    classes = cal.map.classes if cal is not None else classes_of(mode, records)
    if cal is not None:  # the sample's check is remembered for this calibration: it must be what annotated them
        assert calibration is not None
        drawn_sample = V.verification_sample(records, cal, target=target, delta=risk, size=size, precision=precision,
                                             abstained_size=abstained_size, seed=seed, source=str(verdicts),
                                             lines=lines, calibration_source=calibration["file"])
        drawn, run, n = drawn_sample.units, drawn_sample.run, drawn_sample.size
    else:
        units = V.verdict_units(mode, records, str(verdicts), classes, None, lines)
        n = size if size is not None else V.sample_size(target, risk, precision)
        drawn, run = V.draw(units, size=n, abstained_size=abstained_size, seed=seed), V.strata(units)
    by_id = {it.id: it for it in read_items(items_path, False, 2 if labels.pairs else 1)}
    _write_sample(out, drawn, by_id, labels, str(items_path))
    key_path = _key_path(out, key)
    record = {"trustjudge_verification_sample": V.SAMPLE_VERSION, "verdicts": str(verdicts.resolve()),
              "seed": seed, "size": n, "abstained_size": abstained_size, "domain": domain, "mode": mode,
              "classes": list(classes), "levels": cal.levels if cal is not None else None,
              "tolerance": cal.tolerance if cal is not None else None,
              "target_agreement": target, "delta": risk, "items": str(items_path.resolve()),
              "items_sha256": digest(items_path),
              **({"calibration": calibration} if calibration is not None else {}),
              **({"cascade": cascade} if cascade is not None else {}),
              "run": run, "units": drawn}
    with atomic_output(key_path, "--key") as fh:
        fh.write(json.dumps(record, indent=1) + "\n")
    if not quiet:
        kept = sum(u["stratum"] == V.KEPT for u in drawn)
        err.print(escape(f"sample of {kept} kept and {len(drawn) - kept} abstained verdicts (of {record['run']}) "
                         f"written to {out}, its key to {key_path}: label each sampled verdict, then "
                         f"`trustjudge check-sample {out}`"), highlight=False)


def _read_key(path: Path) -> dict[str, Any]:
    key = read_json_file(path, "the sample's key",
                         " (written by `trustjudge sample` beside the sample; give it with --key)")
    return V.checked_key(key, str(path))


@click.command("check-sample")
@click.argument("labelled", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--key", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The sample's key (default: LABELLED.key.json, as `trustjudge sample` wrote it).")
@click.option("--verdicts", "verdicts_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="The run's verdicts the sample was drawn from (default: the key's 'verdicts'): "
                                 "before a result is remembered, the key is checked to be their seeded draw.")
@click.option("--items", "items_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The items the run judged (default: the key's 'items'): checked to be the data the result is "
                   "remembered for.")
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the result as JSON here.")
@click.option("--ledger", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Remember the result here (default: beside the calibration file the sample's key names, "
                   "CAL.checks.json); later runs of that calibration on the same items say it.")
@click.option("--quiet", "-q", is_flag=True)
def check_sample(labelled: Path, key: Path | None, verdicts_path: Path | None, items_path: Path | None,
                 out: Path | None, ledger: Path | None, quiet: bool) -> None:
    """Test, on LABELLED (a sample from `trustjudge sample` with its pairs labelled), whether the guarantee holds."""
    key_path = _key_path(labelled, key)
    record = _read_key(key_path)
    _check_drawn(record, key_path, verdicts_path, items_path)
    result = V.check(record, _labels(labelled, record))
    if out is not None:
        with atomic_output(out, "--out") as fh:
            fh.write(json.dumps(result, indent=2) + "\n")
    kept = _remember(record, result, labelled, ledger)
    if not quiet:
        err.print(escape(V.describe(result)
                         + (f" ({result['kept_unlabelled']} kept verdicts of the sample not labelled)"
                            if result["kept_unlabelled"] else "")), highlight=False)
        err.print(escape(f"remembered in {kept}: later runs of this calibration on these items say it" if kept
                         else "not remembered: a cascade's check (one calibration per model tier) is said here "
                              "only" if record.get("cascade") else
                         "not remembered: the sample's key names no calibration file (give `trustjudge "
                         "sample --calibration CAL` or the run's --summary)"), highlight=False)


def _check_drawn(record: Mapping[str, Any], key_path: Path, verdicts: Path | None, items: Path | None) -> None:
    """Refuse a key that names a calibration (its result is remembered for it) but is not the sample drawn from
    the run's verdicts under it: the calibration is loaded, the verdicts are read again and re-annotated (zero
    calls, :func:`~trustjudge.audit._sample.check_annotated`), and the key's classes, scale, run counts and
    sampled verdicts are compared with what they give (:func:`~trustjudge.audit._sample.check_key`)."""
    block = record.get("calibration")
    if block is None:
        return  # nothing is remembered (the printed result is the key's own)
    if not (isinstance(block, dict) and isinstance(block.get("file"), str) and isinstance(block.get("data_hash"), str)):
        raise ConfigError(f"{key_path}: field 'calibration' needs 'file' and 'data_hash' (strings)")
    file = Path(block["file"])
    if not file.is_file():
        raise ConfigError(f"{key_path}: field 'calibration.file': {file} is not there: the key is checked against "
                          "the calibration it names before the result is remembered beside it")
    cal = Calibration.load(file)
    if block["data_hash"] not in known_hashes(cal):
        raise ConfigError(f"{key_path}: field 'calibration.data_hash' is {block['data_hash']!r}, but {file} has data "
                          f"hash {cal.data_hash}: the sample was not drawn under this calibration")
    mode = str(record.get("mode", PAIRWISE))
    said = {"mode": mode, "classes": record.get("classes"), "levels": record.get("levels"),
            "tolerance": record.get("tolerance")}
    want = {"mode": cal.mode, "classes": list(cal.map.classes),
            "levels": None if cal.levels is None else list(cal.levels), "tolerance": cal.tolerance}
    if mode == PAIRWISE and said["classes"] is None:
        said["classes"] = want["classes"]  # a pairwise key without a calibration's classes reads them so
    for name, value in said.items():
        if value != want[name]:
            raise ConfigError(f"{key_path}: field {name!r} is {value!r}, but {file} gives {want[name]!r}: an "
                              "edited key (the check would read the labels by another rule)")
    path = verdicts if verdicts is not None else Path(str(record.get("verdicts")))
    if not path.is_file():
        raise ConfigError(f"{key_path}: field 'verdicts': the run's verdicts {path} are not there: give them with "
                          "--verdicts FILE (before its result is remembered, the key is checked to be their draw)")
    records, lines = _read_jsonl(path)
    if items is None and record.get("items") is not None:  # keys before this release did not keep it
        items = Path(str(record["items"]))
    if items is not None:
        _check_items(record, key_path, items, records)
    records, lines = _of_domain(records, lines, record.get("domain"))
    target, delta = float(record["target_agreement"]), float(record["delta"])
    V.check_annotated(mode, records, str(path), cal, str(file), target, delta, lines)
    units = V.verdict_units(mode, records, str(path), cal.map.classes, cal.levels, lines)
    V.check_key(record, units, str(key_path), str(path))


def _check_items(record: Mapping[str, Any], key_path: Path, items: Path, records: list[dict[str, Any]]) -> None:
    """The result is remembered for the items with the key's ``items_sha256``: they must be the items file the
    key names, as it is now, and hold every item the run's verdicts are of."""
    if not items.is_file():
        raise ConfigError(f"{key_path}: field 'items': the items the run judged, {items}, are not there: give them "
                          "with --items FILE (the result is remembered for them, by their SHA-256)")
    if digest(items) != record.get("items_sha256"):
        raise ConfigError(f"{key_path}: field 'items_sha256' is {record.get('items_sha256')!r}, but {items} has "
                          f"SHA-256 {digest(items)}: the items changed since the sample was drawn, or the key was "
                          "edited (the result would be remembered for other data)")
    ids = {it.id for it in read_items(items, False, 1)}
    missing = sorted({str(r.get("item_id")) for r in records} - ids)
    if missing:
        raise ConfigError(f"{key_path}: field 'items': {items} has no item {missing[0]!r} of the run's verdicts: "
                          "not the items the run judged")


def _labels(labelled: Path, record: Mapping[str, Any]) -> dict[tuple[Any, ...], Any]:
    """Each sampled verdict's label as the labelled items give it, by its key (through the mode's labelling)."""
    labels = labelling(str(record.get("mode", PAIRWISE)))
    items = read_items(labelled, False, 2 if labels.pairs else 1)
    if labels.pairs:
        return {(it.id, p.first, p.second): p.human for it in items for p in it.all_pairs()}
    responses = {(it.id, r.id): (it, r) for it in items for r in it.responses}
    out: dict[tuple[Any, ...], Any] = {}
    for unit in record["units"]:
        found = responses.get((str(unit["key"][0]), str(unit["key"][1])))
        if found is not None:
            item, response = found
            part = unit.get("part") or {}
            value = labels.label(response, part)
            what = "".join(f", {k} {v!r}" for k, v in part.items())
            V.human_class(value, record, f"{labelled}: line {item.line}: item {item.id!r}, response "
                                         f"{response.id!r}{what}")  # a bad label names where it is
            out[tuple(unit["key"])] = value
    return out


def _remember(record: Mapping[str, Any], result: Mapping[str, Any], labelled: Path,
              ledger: Path | None) -> Path | None:
    """Write the result to the verification ledger of the calibration the sample's key names (None: none)."""
    cal, items = record.get("calibration"), record.get("items_sha256")
    if not (isinstance(cal, dict) and isinstance(cal.get("file"), str) and isinstance(cal.get("data_hash"), str)
            and isinstance(items, str)):
        return None
    path = ledger if ledger is not None else _ledger.ledger_path(cal["file"])
    _ledger.remember(path, _ledger.entry_of(result, data_hash=cal["data_hash"], items_sha256=items,
                                            sample=str(labelled)))
    return path
