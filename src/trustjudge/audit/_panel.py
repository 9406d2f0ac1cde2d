"""Panel confidence estimators: each pair judged several times, the judgments combined (zero calls where stored).

- ``annotators`` (simulated annotators, after *Trust or Escalate*): ``k`` (3 or 5) judgments of each pair, each
  under the judge's own pairwise template prefixed with :data:`EXAMPLES` in-context examples of one simulated
  annotator: labelled pairs of the calibration set's part A (:func:`~trustjudge.audit._split.selection_split`),
  drawn by a seeded hash (:func:`draw_examples`), a different set per annotator. The example pairs themselves
  leave the calibration set (no part B unit was ever shown to the judge, and no unit is judged with itself as its
  own example). The combination is the **mean probability** of the ``k`` judgments (each order too).
- ``critiques`` (sampled critiques): ``n`` judgments under the ``cot`` protocol at a temperature above 0, each
  with its own seed; the combination is the **agreement** of the sampled verdicts: each class's share of the
  votes, add-half smoothed (``(votes + 1/2) / (n + 3/2)`` over the scored samples).

The combined record then goes through the calibration as any record does (map, split-fit selection,
threshold): the confidence is the calibrated top of the combined verdict. The calibration file keeps the panel
(``panel``: the estimator, its size, the examples or the temperature) so that a later run asks the same prompts
(the store answers them); every record keeps the panel's own judgments under ``panel``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ..io._quoting import DEFAULT_TAGS, quote, tag_pattern

ANNOTATORS = "annotators"
CRITIQUES = "critiques"
PANELS = (ANNOTATORS, CRITIQUES)
SIZES = {ANNOTATORS: (3, 5), CRITIQUES: tuple(range(2, 17))}
DEFAULT_SIZE = {ANNOTATORS: 3, CRITIQUES: 5}
EXAMPLES = 2
"""In-context examples per simulated annotator."""
TEXT_CHARS = 600
"""An example's question and responses are cut to this many characters (the prompt stays short)."""
TEMPERATURE = 0.7
"""The sampled critiques' temperature (unless the judge's own is above 0)."""
SEED = "trustjudge/annotators/1"
PAIR = ("first", "second", "tie")
ORDER = ("A", "B", "C")
SAYS = {"first": "response A is better", "second": "response B is better", "tie": "the two are equally good"}


def check_size(estimator: str, size: int | None) -> int:
    n = DEFAULT_SIZE[estimator] if size is None else size
    if n not in SIZES[estimator]:
        allowed = "3 or 5" if estimator == ANNOTATORS else "2 to 16"
        raise ConfigError(f"the {estimator} estimator takes a panel size of {allowed}, not {n!r}")
    return int(n)


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + " [...]"


def draw_examples(pool: Sequence[Mapping[str, Any]], k: int, per: int = EXAMPLES) -> list[list[dict[str, Any]]]:
    """``k`` disjoint sets of ``per`` examples from ``pool`` (part A's labelled pairs: ``key``, ``question``,
    ``response_a``, ``response_b``, ``human``), ranked by the SHA-256 of :data:`SEED` and each key."""
    if len(pool) < k * per:
        raise ConfigError(f"the annotators estimator needs {k * per} labelled pairs in part A of the calibration set "
                          f"({k} annotators x {per} examples), got {len(pool)}")
    ranked = sorted(pool, key=lambda e: hashlib.sha256((SEED + repr(list(e["key"]))).encode()).hexdigest())
    return [[{"key": list(e["key"]), "question": _cut(e["question"]), "response_a": _cut(e["response_a"]),
              "response_b": _cut(e["response_b"]), "human": e["human"]} for e in ranked[j * per:(j + 1) * per]]
            for j in range(k)]


_EXAMPLE_TAGS = tag_pattern((*DEFAULT_TAGS, "example"))
"""The tags an example's texts are quoted against: the prompts' own and the block's ``<example>``."""


def examples_block(examples: Sequence[Mapping[str, Any]]) -> str:
    """The in-context block of one simulated annotator: its texts quoted as every text in a prompt is
    (:func:`~trustjudge.io._quoting.quote`), ``$`` escaped (it heads a string.Template)."""
    parts = [f"Here is how one annotator judged {len(examples)} earlier comparisons. Judge the new comparison "
             "below as this annotator would.\n"]
    for e in examples:
        q, a, b = (quote(e[f], _EXAMPLE_TAGS) for f in ("question", "response_a", "response_b"))
        parts.append(f"<example>\n<question>\n{q}\n</question>\n<response_a>\n{a}\n"
                     f"</response_a>\n<response_b>\n{b}\n</response_b>\n"
                     f"The annotator's verdict: {SAYS[e['human']]}.\n</example>\n")
    parts.append("Now the new comparison.\n\n")
    return "\n".join(parts).replace("$", "$$")


def read_panel(raw: Any, estimator: str, source: str) -> dict[str, Any]:
    """A calibration file's ``panel``, checked against its estimator."""
    where = f"{source}: field 'panel'"
    if not isinstance(raw, Mapping) or raw.get("estimator") != estimator:
        raise ConfigError(f"{where} must be an object with estimator {estimator!r} (refit the calibration: "
                          f"`trustjudge calibrate --confidence {estimator}`)")
    size = raw.get("size")
    if not isinstance(size, int) or isinstance(size, bool):
        raise ConfigError(f"{where}.size is not an integer ({size!r})")
    try:
        check_size(estimator, size)
    except ConfigError as exc:
        raise ConfigError(f"{where}.size: {exc}") from None
    if estimator == ANNOTATORS:
        ex = raw.get("examples")
        if not (isinstance(ex, list) and len(ex) == size and all(
                isinstance(s, list) and s and all(isinstance(e, Mapping) and e.get("human") in SAYS and all(
                    isinstance(e.get(f), str) for f in ("question", "response_a", "response_b")) for e in s)
                for s in ex)):
            raise ConfigError(f"{where}.examples needs {size} lists of examples (question, response_a, response_b, "
                              "human: first, second or tie)")
    else:
        t = raw.get("temperature")
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not 0 < t < 100:
            raise ConfigError(f"{where}.temperature needs a number above 0, got {t!r}")
    return dict(raw)


def _key(r: Mapping[str, Any]) -> tuple[Any, ...]:
    return r.get("item_id"), r.get("first_id"), r.get("second_id")


def _mean(rows: Sequence[Mapping[str, Any] | None], labels: Sequence[str]) -> dict[str, float] | None:
    if not rows or any(r is None or any(r.get(k) is None for k in labels) for r in rows):
        return None
    return {k: sum(float(r[k]) for r in rows if r is not None) / len(rows) for k in labels}


def _votes(rows: Sequence[Mapping[str, Any] | None]) -> tuple[dict[str, float] | None, list[str | None]]:
    verdicts = [None if r is None or any(r.get(k) is None for k in PAIR) else max(PAIR, key=lambda c: float(r[c]))
                for r in rows]
    scored = [v for v in verdicts if v is not None]
    if not scored:
        return None, verdicts
    return {c: (scored.count(c) + 0.5) / (len(scored) + 1.5) for c in PAIR}, verdicts


def combine(estimator: str, runs: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The first run's records with their probabilities combined over every run (one list of records per
    annotator or sample): the mean probability (annotators) or the smoothed vote shares (critiques)."""
    first, by_key = runs[0], [{_key(r): r for r in recs} for recs in runs]
    out = []
    for r in first:
        rows = [m.get(_key(r)) for m in by_key]
        rec = dict(r)
        probs_rows = [None if x is None else x.get("probabilities") for x in rows]
        block: dict[str, Any] = {"estimator": estimator, "size": len(runs), "probabilities": probs_rows}
        if estimator == ANNOTATORS:
            probs = _mean(probs_rows, PAIR)
        else:
            probs, block["verdicts"] = _votes(probs_rows)
        rec["panel"] = block
        n_orders = len(r.get("orders") or [])
        orders = [_mean([(x.get("orders") or [None] * n_orders)[i] if x is not None else None for x in rows], ORDER)
                  for i in range(n_orders)]
        if probs is None:
            rec.update(probabilities=None, unscored=r.get("unscored") or f"{estimator}: a judgment left it unscored")
            out.append(rec)
            continue
        rec["probabilities"] = probs
        if all(o is not None for o in orders):
            rec["orders"] = [{**o, **c, "mass": sum(c.values())} for o, c in zip(r["orders"], orders, strict=True)
                             if c is not None]
        rec["verdicts"] = {**(r.get("verdicts") or {}), "likelihood": max(PAIR, key=probs.__getitem__)}
        rec.pop("unscored", None)
        out.append(rec)
    return out
