"""A verification sample: is the guarantee met on *this* data? (zero model calls)

The guarantee of a selection rests on the new verdicts being exchangeable with the calibration set's. On a
user's own data that is what is in doubt, and only labels settle it. :func:`draw` takes a seeded random sample
of a run's pairwise verdicts, stratified by whether they were kept or abstained on (the kept stratum is what is
tested; the abstained one shows what the abstentions hold), to be labelled in the items format. :func:`test`
reads the labels back and tests exactly, with one-sided binomial tests on the kept verdicts of the sample (a
simple random sample of the run's kept verdicts), whether their agreement with humans meets the target:

- ``holds``: P(Bin(n, target) >= agreed) <= delta: agreement on the run's kept verdicts is at least the target
  at level delta (the sample rejects "below the target");
- ``refuted``: P(Bin(n, target) <= agreed) <= delta: it is below the target at level delta;
- ``undecided``: neither; ``label_more`` says how many more kept verdicts, agreeing at the rate seen so far,
  would decide it (``None`` when the rate seen is the target itself).

Sampling without replacement from a finite run makes the binomial tests conservative. :func:`check_annotated`
makes sure, before a sample is drawn, that the records are the verdicts of the calibration its check will be
remembered for, and :func:`check_key`, before a check is remembered, that the sample's key is what was drawn
from them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError

if TYPE_CHECKING:
    from ._trust import Calibration

SAMPLE_VERSION = 1
KEPT, ABSTAINED = "kept", "abstained"
ABSTAINED_SHARE = 0.25
"""By default the abstained stratum gets a quarter as many verdicts as the kept one."""
MAX_MORE = 100_000
PAIR_CLASSES = ("first", "second", "tie")


def sample_size(target: float, delta: float, precision: float) -> int:
    """Kept verdicts to label for a one-sided interval of half-width ``precision`` at level ``delta`` around an
    agreement near ``target``: ``ceil(z^2 t (1 - t) / precision^2)``, z the normal (1 - delta) quantile."""
    from scipy.stats import norm  # type: ignore[import-untyped, unused-ignore]

    for name, v in (("target", target), ("delta", delta), ("precision", precision)):
        if not (math.isfinite(v) and 0 < v < 1):
            raise ConfigError(f"the verification sample's {name} must be between 0 and 1 (exclusive), got {v!r}")
    z = float(norm.ppf(1 - delta))
    return max(1, math.ceil(z * z * target * (1 - target) / precision**2))


def pair_units(records: Sequence[Mapping[str, Any]], source: str) -> list[dict[str, Any]]:
    """Each pairwise verdict of annotated records (``select --out``, ``compare --calibration --out`` with a
    target): its key, stratum and calibrated verdict; an unscored verdict is left out (nothing to verify)."""
    out = []
    for i, rec in enumerate(records):
        where = f"{source}: line {i + 1}"
        if not all(isinstance(rec.get(k), str) for k in ("item_id", "first_id", "second_id")):
            raise ConfigError(f"{where}: not a pairwise verdict record (fields 'item_id', 'first_id', 'second_id'): "
                              "a verification sample covers pairwise verdicts")
        block = rec.get("calibrated")
        if not isinstance(block, Mapping) or "abstained" not in block:
            raise ConfigError(f"{where}: field 'calibrated.abstained' is missing: sample the records of a run with a "
                              "target (`trustjudge select ... --target-agreement T --out VERDICTS`)")
        if block["abstained"] is not None and block.get("verdict") is None:
            continue  # unscored
        out.append({"key": [rec["item_id"], rec["first_id"], rec["second_id"]],
                    "stratum": KEPT if block["abstained"] is None else ABSTAINED, "verdict": block["verdict"]})
    return out


def verdict_units(mode: str, records: Sequence[Mapping[str, Any]], source: str, classes: Sequence[str],
                  levels: Sequence[float] | None = None, lines: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """Each verdict of annotated records of any calibrated mode, read through the mode's calibration units
    (:func:`trustjudge.audit._trust.units`): its key (:func:`~trustjudge.audit._trust.unit_key`), stratum,
    calibrated verdict and, for a part of a record (a check, claim or criterion), what the record says of it
    (``part``: its ``id``, ``name`` or ``text``, by which the labelled sample is read back). ``lines``: each
    record's line in ``source`` (default: its place, from 1)."""
    from ._trust import unit_key, units

    at = _line_numbers(records, lines)
    out = []
    for i, rec in enumerate(records):
        if not isinstance(rec.get("item_id"), str):
            raise ConfigError(f"{source}: line {at[i]}: field 'item_id' is missing: not a {mode} verdict record")
    for unit in units(mode, records, classes, levels):
        rec = records[unit.record]
        where = f"{source}: line {at[unit.record]}"
        part: Any = rec
        for step in unit.path:
            part = part[step]
        block = part.get("calibrated")
        field = ".".join(map(str, (*unit.path, "calibrated", "abstained")))
        if not isinstance(block, Mapping) or "abstained" not in block:
            raise ConfigError(f"{where}: field '{field}' is missing: sample the records of a run with a target "
                              "(`--calibration CAL --target-agreement T --out VERDICTS`)")
        if block["abstained"] is not None and block.get("verdict") is None:
            continue  # unscored
        try:
            key = list(unit_key(mode, rec, unit))
        except KeyError as exc:
            raise ConfigError(f"{where}: field {exc.args[0]!r} is missing: not a {mode} verdict record") from None
        entry: dict[str, Any] = {"key": key, "stratum": KEPT if block["abstained"] is None else ABSTAINED,
                                 "verdict": block["verdict"]}
        if unit.path:
            entry["part"] = {k: part[k] for k in ("id", "name", "text") if isinstance(part.get(k), str)}
        out.append(entry)
    return out


@dataclass(frozen=True)
class VerificationSample:
    """A drawn verification sample (:func:`verification_sample`): what each sampled verdict was (``units``:
    its ``key``, ``stratum`` kept or abstained, ``verdict`` and, for a check, claim or criterion, ``part``) and
    what the test reads labels by. Label the units and call :meth:`check`."""

    units: list[dict[str, Any]]
    mode: str
    classes: list[str]
    levels: list[float] | None
    tolerance: float | None
    target: float
    delta: float
    run: dict[str, int]
    """The run's verdicts in each stratum (what the sample was drawn from)."""
    seed: int
    size: int
    abstained_size: int | None

    def key(self) -> dict[str, Any]:
        """The fields of the key `trustjudge sample` writes (without the files' paths)."""
        return {"trustjudge_verification_sample": SAMPLE_VERSION, "seed": self.seed, "size": self.size,
                "abstained_size": self.abstained_size, "mode": self.mode, "classes": list(self.classes),
                "levels": self.levels, "tolerance": self.tolerance, "target_agreement": self.target,
                "delta": self.delta, "run": dict(self.run), "units": [dict(u) for u in self.units]}

    def check(self, labels: Mapping[Any, Any]) -> dict[str, Any]:
        """The exact test (:func:`check`) of the labelled sample: ``labels`` maps each labelled unit's key (a
        tuple or list, as in ``units``) to its human label (a class name; on a scale, a score); a unit without
        one is unlabelled."""
        return check(self.key(), {tuple(k): v for k, v in labels.items()})


def verification_sample(records: Iterable[Any], calibration: Calibration, *, target: float, delta: float,
                        size: int | None = None, precision: float = 0.05, abstained_size: int | None = None,
                        seed: int = 0, source: str = "records", lines: Sequence[int] | None = None,
                        calibration_source: str = "the calibration") -> VerificationSample:
    """A seeded, stratified sample of a calibrated run's verdicts to label (zero model calls): ``records`` as
    ``Judge.select`` (or ``apply_calibration``) returned them, annotated by ``calibration`` at ``target`` and
    ``delta`` (checked first: :func:`check_annotated`); ``size`` kept verdicts (default: :func:`sample_size`
    for ``precision``) and ``abstained_size`` abstained ones (default a quarter as many). ``source`` and
    ``lines`` name the records in errors."""
    rows = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in records]
    mode = calibration.mode
    check_annotated(mode, rows, source, calibration, calibration_source, target, delta, lines)
    units = verdict_units(mode, rows, source, calibration.map.classes, calibration.levels, lines)
    n = size if size is not None else sample_size(target, delta, precision)
    return VerificationSample(
        units=draw(units, size=n, abstained_size=abstained_size, seed=seed), mode=mode,
        classes=list(calibration.map.classes), levels=calibration.levels, tolerance=calibration.tolerance,
        target=float(target), delta=float(delta), run=strata(units), seed=seed, size=n,
        abstained_size=abstained_size)


def strata(units: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The verdicts in each stratum."""
    return {s: sum(u["stratum"] == s for u in units) for s in (KEPT, ABSTAINED)}


def check_annotated(mode: str, records: Sequence[Mapping[str, Any]], source: str, calibration: Calibration,
                    calibration_source: str, target: float, delta: float, lines: Sequence[int] | None = None) -> None:
    """Refuse records that ``calibration``, selecting at ``target`` and ``delta``, does not annotate as they say
    (zero model calls: each verdict's raw probabilities are in its record, and the calibration re-applies them):
    a record set annotated by another calibration, at another target, or with an edited verdict or kept flag
    would otherwise have its sample's conclusion remembered for this calibration. ``lines``: each record's line
    in ``source`` (default: its place, from 1)."""
    from ._trust import annotate, units

    line_of = _line_numbers(records, lines)
    at = f"{calibration_source} at target {target:g}, delta {delta:g}"
    remedy = ("give the calibration the run applied (--calibration CAL, with the run's --target-agreement and "
              "--risk-delta) or the run's --summary (which names them all); an edited record: sample the records "
              "as the run wrote them")
    try:
        selection = calibration.selection(target, delta, force_delta=True)  # the run accepted its delta
        again = annotate(mode, [dict(r) for r in records], calibration, selection)
    except ConfigError as exc:
        raise ConfigError(f"{source}: these verdicts cannot be the run of {at} ({exc}): {remedy}") from None
    for unit in units(mode, again, calibration.map.classes, calibration.levels):
        had: Any = records[unit.record]
        now: Any = again[unit.record]
        for step in unit.path:
            had, now = had[step], now[step]
        block, want = had.get("calibrated") or {}, now["calibrated"]
        for name in ("abstained", "verdict"):
            if block.get(name) != want[name]:
                field = ".".join(map(str, (*unit.path, "calibrated", name)))
                raise ConfigError(f"{source}: line {line_of[unit.record]}: field '{field}' is "
                                  f"{_said(name, block.get(name))}, but {at} gives {_said(name, want[name])}: "
                                  "these verdicts were not annotated by this calibration at this target (another "
                                  "calibration, or an edited record), and a check of their sample would be "
                                  f"remembered for it: {remedy}")


def _line_numbers(records: Sequence[Any], lines: Sequence[int] | None) -> list[int]:
    """Each record's line in its file: ``lines`` where given, else its place from 1."""
    return list(lines) if lines is not None else list(range(1, len(records) + 1))


def _said(name: str, value: Any) -> str:
    if name == "abstained":
        return "null (kept)" if value is None else f"{value!r} (abstained)"
    return repr(value)


def human_class(value: Any, key: Mapping[str, Any], where: str) -> int | None:
    """The class index of a label read back from the sample (a class name; on a scale, a score)."""
    classes = [str(c) for c in key.get("classes") or PAIR_CLASSES]
    levels = key.get("levels")
    if value is None:
        return None
    if levels is not None:
        from ._trust import nearest_level

        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: the label {value!r} is not a score")
        h = nearest_level(float(value), [float(v) for v in levels])
        if h is None:
            raise ConfigError(f"{where}: the score {value!r} lies outside the scale {min(levels):g}..{max(levels):g}")
        return h
    found = [j for j, c in enumerate(classes) if c.lower() == str(value).lower()]
    if not found:
        raise ConfigError(f"{where}: the label {value!r} is not one of {', '.join(classes)}")
    return found[0]


def agrees(verdict: str, human: int, key: Mapping[str, Any]) -> bool:
    """Whether a sampled verdict agrees with the human class (on a scale: within the key's tolerance)."""
    classes = [str(c) for c in key.get("classes") or PAIR_CLASSES]
    if verdict not in classes:
        return False
    v = classes.index(verdict)
    levels = key.get("levels")
    if levels is None:
        return v == human
    return abs(float(levels[v]) - float(levels[human])) <= float(key.get("tolerance") or 0.0) + 1e-9


def draw(units: Sequence[Mapping[str, Any]], *, size: int, abstained_size: int | None = None,
         seed: int = 0) -> list[dict[str, Any]]:
    """A seeded stratified random sample: ``size`` kept verdicts and ``abstained_size`` abstained ones (default
    :data:`ABSTAINED_SHARE` of ``size``), each stratum capped at what the run has; the same units, seed and
    sizes always draw the same sample, whatever the records' order."""
    if size < 1:
        raise ConfigError(f"the verification sample needs at least 1 kept verdict, got --size {size}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"the verification sample's seed is a whole number >= 0, got --seed {seed!r}")
    want = {KEPT: size, ABSTAINED: math.ceil(size * ABSTAINED_SHARE) if abstained_size is None else abstained_size}
    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = []
    for stratum in (KEPT, ABSTAINED):
        pool = sorted((u for u in units if u["stratum"] == stratum), key=lambda u: u["key"])
        if stratum == KEPT and not pool:
            raise ConfigError("the run kept no verdict: there is no guarantee to verify")
        picked: list[int] = sorted(rng.choice(len(pool), min(want[stratum], len(pool)), replace=False).tolist()
                                   if pool else [])
        out.extend(dict(pool[i]) for i in picked)
    return out


def checked_key(key: Any, source: str) -> dict[str, Any]:
    """``key`` if it is a verification sample's key (as `trustjudge sample` writes it, or
    :meth:`VerificationSample.key`) whose fields :func:`check` reads are well formed; a ConfigError naming the
    field if not."""
    if not isinstance(key, dict) or key.get("trustjudge_verification_sample") != SAMPLE_VERSION:
        raise ConfigError(f"{source}: not the key of a trustjudge verification sample")
    for name in ("target_agreement", "delta"):
        v = key.get(name)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or not 0 < v < 1:
            raise ConfigError(f"{source}: field {name!r} is not a number between 0 and 1 ({v!r})")
    units = key.get("units")
    if not isinstance(units, list):
        raise ConfigError(f"{source}: field 'units' is not a list")
    for i, u in enumerate(units):
        if not (isinstance(u, dict) and isinstance(u.get("key"), list) and len(u["key"]) >= 2
                and all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in u["key"])
                and u.get("stratum") in (KEPT, ABSTAINED) and isinstance(u.get("verdict"), str)
                and isinstance(u.get("part", {}), dict)):
            raise ConfigError(f"{source}: units[{i}] needs 'key' (item, first, second; or item, response, place), "
                              "'stratum' (kept or abstained) and 'verdict'")
    classes, levels = key.get("classes"), key.get("levels")
    if classes is not None and not (isinstance(classes, list) and all(isinstance(c, str) for c in classes)):
        raise ConfigError(f"{source}: field 'classes' is not a list of class names")
    if levels is not None and not (isinstance(levels, list) and len(levels) == len(classes or ())
                                   and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in levels)):
        raise ConfigError(f"{source}: field 'levels' needs one number per class")
    tolerance = key.get("tolerance")
    if tolerance is not None and not (isinstance(tolerance, (int, float)) and not isinstance(tolerance, bool)
                                      and math.isfinite(tolerance) and tolerance >= 0):
        raise ConfigError(f"{source}: field 'tolerance' is not a number >= 0 ({tolerance!r})")
    if not isinstance(key.get("mode", "compare"), str):
        raise ConfigError(f"{source}: field 'mode' is not a mode's name")
    return key


def _said_unit(unit: Mapping[str, Any]) -> str:
    return f"{unit.get('stratum')} verdict {unit.get('verdict')!r} of {unit.get('key')}"


def check_key(key: Mapping[str, Any], units: Sequence[Mapping[str, Any]], source: str, verdicts: str) -> None:
    """Refuse a sample's ``key`` that is not what :func:`draw` drew from ``units`` (the run's verdicts, read
    again from ``verdicts`` under the calibration the key names): the counts of each stratum (``run``), and the
    sampled verdicts themselves. A key that records its sizes (``size``, ``abstained_size``) must be exactly the
    seeded draw (no verdict swapped for a more agreeable one); an older key's sampled verdicts must each be one of
    the run's, in its stratum and with its verdict (no kept verdict moved to the abstained stratum or edited)."""
    run = strata(units)
    if key.get("run") != run:
        raise ConfigError(f"{source}: field 'run' is {key.get('run')!r}, but the run's verdicts {verdicts} hold "
                          f"{run}: not the key of a sample of these verdicts (an edited key, or the verdicts changed "
                          "since)")
    said = key["units"]
    if "size" in key:
        size, abstained, seed = key.get("size"), key.get("abstained_size"), key.get("seed")
        for name, v, least in (("size", size, 1), ("abstained_size", abstained, 0), ("seed", seed, 0)):
            if not (v is None and name == "abstained_size") and not (
                    isinstance(v, int) and not isinstance(v, bool) and v >= least):
                raise ConfigError(f"{source}: field {name!r} is not a whole number >= {least} ({v!r})")
        assert isinstance(size, int) and isinstance(seed, int)
        drawn = draw(units, size=size, abstained_size=abstained, seed=seed)
        for i, (had, want) in enumerate(zip(said, drawn)):
            if _canonical(had) != _canonical(want):
                raise ConfigError(f"{source}: units[{i}] is the {_said_unit(had)}, but the seeded draw from "
                                  f"{verdicts} (seed {seed}, size {size}) gives the {_said_unit(want)}: the "
                                  "sampled verdicts were edited (or the verdicts changed since)")
        if len(said) != len(drawn):
            raise ConfigError(f"{source}: field 'units' has {len(said)} sampled verdicts, but the seeded draw from "
                              f"{verdicts} gives {len(drawn)}")
        return
    known = {_canonical({k: u[k] for k in ("key", "part") if k in u}): u for u in units}
    for i, had in enumerate(said):
        found = known.get(_canonical({k: had[k] for k in ("key", "part") if k in had}))
        if found is None:
            raise ConfigError(f"{source}: units[{i}]: field 'key' {had.get('key')!r} is no verdict of {verdicts}")
        for name in ("stratum", "verdict"):
            if had.get(name) != found[name]:
                raise ConfigError(f"{source}: units[{i}]: field {name!r} is {had.get(name)!r}, but {verdicts} says "
                                  f"{found[name]!r}: an edited key")


def _canonical(unit: Mapping[str, Any]) -> str:
    return json.dumps(unit, sort_keys=True)


def _more(agreed: int, n: int, target: float, delta: float) -> int | None:
    """The fewest further kept verdicts which, agreeing at the rate seen, would decide the test."""
    from scipy.stats import binom  # type: ignore[import-untyped, unused-ignore]

    rate = agreed / n
    if abs(rate - target) < 1e-12:
        return None
    m = 1
    while m <= MAX_MORE:
        total, hits = n + m, agreed + round(rate * m)
        if binom.sf(hits - 1, total, target) <= delta or binom.cdf(hits, total, target) <= delta:
            lo = m // 2 + 1  # the first m that decides lies in (m/2, m]
            while lo < m:
                mid = (lo + m) // 2
                t2, h2 = n + mid, agreed + round(rate * mid)
                if binom.sf(h2 - 1, t2, target) <= delta or binom.cdf(h2, t2, target) <= delta:
                    m = mid
                else:
                    lo = mid + 1
            return m
        m *= 2
    return None


def binomial_test(agreed: int, n: int, target: float, delta: float) -> dict[str, Any]:
    """The exact one-sided binomial tests of ``agreed`` of ``n`` kept verdicts against ``target``."""
    from scipy.stats import binom  # type: ignore[import-untyped, unused-ignore]

    if n < 1:
        raise ConfigError("no kept verdict of the sample is labelled: label the sample's verdicts (pairs' `human`: "
                          "first, second or tie; `human_checks`, claims' `human`, `human_score`, `human_criteria`)")
    p_holds = float(binom.sf(agreed - 1, n, target))
    p_refuted = float(binom.cdf(agreed, n, target))
    result = "holds" if p_holds <= delta else "refuted" if p_refuted <= delta else "undecided"
    return {"result": result, "kept_labelled": n, "kept_agreed": agreed, "agreement": agreed / n,
            "target_agreement": target, "delta": delta, "p_below_target": p_holds, "p_at_least_target": p_refuted,
            "label_more": _more(agreed, n, target, delta) if result == "undecided" else None}


def check(key: Mapping[str, Any], labels: Mapping[Any, Any]) -> dict[str, Any]:
    """The verification of a labelled sample: ``key`` as :func:`draw` wrote it (with target and delta, and the
    calibration's ``classes``, ``levels`` and ``tolerance`` where not pairwise), and the human label of each
    sampled verdict the labelled items hold, by its key as a tuple (a class name; on a scale, a score)."""
    counts = {s: {"labelled": 0, "agreed": 0, "unlabelled": 0} for s in (KEPT, ABSTAINED)}
    for i, unit in enumerate(key["units"]):
        human = human_class(labels.get(tuple(unit["key"])), key, f"sampled verdict {i + 1} ({unit['key']})")
        c = counts[unit["stratum"]]
        if human is None:
            c["unlabelled"] += 1
            continue
        c["labelled"] += 1
        c["agreed"] += agrees(unit["verdict"], human, key)
    kept = counts[KEPT]
    out = binomial_test(kept["agreed"], kept["labelled"], float(key["target_agreement"]), float(key["delta"]))
    out["kept_unlabelled"] = kept["unlabelled"]
    a = counts[ABSTAINED]
    out["abstained"] = {**a, "agreement": a["agreed"] / a["labelled"] if a["labelled"] else None}
    return out


def describe(result: Mapping[str, Any]) -> str:
    """The verification as one line."""
    t, d = result["target_agreement"], result["delta"]
    head = (f"{result['kept_agreed']} of {result['kept_labelled']} labelled kept verdicts agree "
            f"({result['agreement']:.3f})")
    if result["result"] == "holds":
        return (f"guarantee holds on this data: {head}; P(Bin(n, {t:g}) >= agreed) = {result['p_below_target']:.3g} "
                f"<= delta {d:g}")
    if result["result"] == "refuted":
        return (f"guarantee REFUTED on this data: {head}, below the target {t:g}; P(Bin(n, {t:g}) <= agreed) = "
                f"{result['p_at_least_target']:.3g} <= delta {d:g}")
    more = result["label_more"]
    return (f"guarantee undecided on this data: {head}; target {t:g}, delta {d:g}"
            + (f": label about {more} more kept verdicts (at this rate) to decide" if more else
               ": the agreement seen is the target itself"))
