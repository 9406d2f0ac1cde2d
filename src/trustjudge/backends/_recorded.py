"""A judge that answers from a file of recorded pairwise verdicts: ``recorded/<path>``.

It calls no model. Each line of the file (JSON lines) is one verdict on a pair, recorded earlier: by an
API run (trustjudge ``compare`` records are read as they are), or published with a data set (the
PandaLM test set ships gpt-3.5-turbo's and PandaLM-7B's verdicts). A row names its pair in one of two
ways (or both):

- ``item_id`` with the two response ids ``a`` and ``b`` (or ``first_id`` and ``second_id``);
- ``question`` with the two texts ``a_text`` and ``b_text``.

and gives its verdict as ``verdict`` (``A``, ``B`` or ``tie``; ``first``/``second`` also read; ``null``:
the recording has no usable verdict) or as ``probabilities`` (``{"A": .., "B": .., "tie": ..}`` or
``first``/``second``/``tie``, non-negative, not all zero). A pair recorded only in the other order is read
with A and B swapped; each order may have its own row (published one-order verdicts often do).

The judge is honest about what it is: it cannot score, check or verify, only return the recorded verdict
of a pair. :class:`~trustjudge.Judge` asks it through a :class:`~trustjudge.modes._base.RecordedCompareTask`
(both presentation orders, like any pairwise judge, so the records, the store and calibration work
unchanged); a pair the file lacks is unscored ``not_recorded``, a row without a usable verdict
``no_recorded_verdict``. Every record says where it came from (protocol and label method ``recorded``,
the judge's name). The fingerprint is the file's SHA-256: another file is another judge.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputError
from ._base import Backend, GenerateRequest, Generation, LabelRequest, LabelResult

NOT_RECORDED = "not_recorded"
"""Why a pair is unscored: the file has no row for it."""
NO_VERDICT = "no_recorded_verdict"
"""Why a pair is unscored: its row has no usable verdict (``verdict: null``, or a null ``probabilities``)."""
RECORDED = "recorded"
"""The protocol and label method of every record a recorded judge makes."""

_VERDICTS = {"a": 0, "first": 0, "b": 1, "second": 1, "tie": 2}
_PROB_KEYS = (("A", "B", "tie"), ("first", "second", "tie"))
_PROMPT = re.compile(r"recorded verdict: line (-?\d+), order ([12])\Z")


@dataclass(frozen=True)
class RecordedRow:
    """One recorded verdict: its line, and P(a wins), P(b wins), P(tie) (None: no usable verdict)."""

    line: int
    probs: tuple[float, float, float] | None


def _text(row: dict[str, Any], key: str, file: str, line: int) -> str:
    value = row[key]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"must be a string, got {type(value).__name__}", file=file, line=line, field=key)
    return str(value)


def _probs(row: dict[str, Any], file: str, line: int) -> tuple[float, float, float] | None:
    """The row's (a, b, tie) probabilities, from ``probabilities`` if given, else from ``verdict``."""
    if row.get("probabilities") is not None:
        p = row["probabilities"]
        if not isinstance(p, dict):
            raise InputError("must be an object such as {\"A\": 0.7, \"B\": 0.2, \"tie\": 0.1}", file=file,
                             line=line, field="probabilities")
        keys = next((k for k in _PROB_KEYS if set(p) == set(k)), None)
        if keys is None:
            raise InputError(f"needs exactly the keys A, B, tie (or first, second, tie), got {sorted(p)}",
                             file=file, line=line, field="probabilities")
        values = []
        for k in keys:
            v = p[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise InputError(f"{k} must be a finite number of 0 or more, got {v!r}", file=file, line=line,
                                 field=f"probabilities.{k}")
            values.append(float(v))
        total = sum(values)
        if total <= 0:
            raise InputError("are all 0", file=file, line=line, field="probabilities")
        return values[0] / total, values[1] / total, values[2] / total
    if "verdict" not in row:
        if "probabilities" in row:  # null: a trustjudge record of a pair it left unscored
            return None
        raise InputError("missing: give verdict (A, B, tie or null) or probabilities", file=file, line=line,
                         field="verdict")
    v = row["verdict"]
    if v is None:
        return None
    if not isinstance(v, str) or v.lower() not in _VERDICTS:
        raise InputError(f"must be A, B, tie (or first, second) or null, got {v!r}", file=file, line=line,
                         field="verdict")
    out = [0.0, 0.0, 0.0]
    out[_VERDICTS[v.lower()]] = 1.0
    return out[0], out[1], out[2]


class RecordedVerdicts:
    """The rows of a recorded-verdicts file, indexed by (item id, a id, b id) and by (question, a, b texts)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        file = str(path)
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read the recorded verdicts {file}: {exc.strerror or exc}") from None
        self.sha256 = hashlib.sha256(data).hexdigest()
        self.rows: dict[int, RecordedRow] = {}
        self.by_ids: dict[tuple[str, str, str], int] = {}
        self.by_texts: dict[tuple[str, str, str], int] = {}
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data[:exc.start].count(b"\n") + 1
            raise InputError("is not UTF-8 text", file=file, line=line) from None
        for line, raw in enumerate(text.splitlines(), start=1):
            if raw.strip():
                self._add(raw, file, line)
        if not self.rows:
            raise InputError("has no recorded verdicts (one JSON object per line)", file=file)

    def _add(self, raw: str, file: str, line: int) -> None:
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON ({exc.msg}, column {exc.colno})", file=file, line=line) from None
        if not isinstance(row, dict):
            raise InputError(f"must be a JSON object, got {type(row).__name__}", file=file, line=line)
        a_key, b_key = ("a", "b") if "a" in row or "b" in row else ("first_id", "second_id")
        keys: list[tuple[dict[tuple[str, str, str], int], tuple[str, str, str]]] = []
        if "item_id" in row:
            for k in (a_key, b_key):
                if k not in row:
                    raise InputError(f"missing: a row keyed by item_id names the two response ids ({a_key}, "
                                     f"{b_key})", file=file, line=line, field=k)
            ids = (_text(row, "item_id", file, line), _text(row, a_key, file, line), _text(row, b_key, file, line))
            keys.append((self.by_ids, ids))
        if "question" in row:
            for k in ("a_text", "b_text"):
                if k not in row:
                    raise InputError("missing: a row keyed by question gives the two texts (a_text, b_text)",
                                     file=file, line=line, field=k)
            texts = (_text(row, "question", file, line), _text(row, "a_text", file, line),
                     _text(row, "b_text", file, line))
            keys.append((self.by_texts, texts))
        if not keys:
            raise InputError("missing: name the pair by item_id with a and b, or by question with a_text and b_text",
                             file=file, line=line, field="item_id")
        found = RecordedRow(line, _probs(row, file, line))
        fresh = []
        for index, key in keys:
            if key[1] == key[2]:
                raise InputError("a and b are the same response", file=file, line=line,
                                 field=a_key if index is self.by_ids else "a_text")
            if key in index:  # the other order is another presentation: it may have its own verdict
                other = self.rows[index[key]]
                if other.probs != found.probs:
                    raise InputError(f"records another verdict for the pair of line {other.line}, in the same order",
                                     file=file, line=line, field="verdict")
                continue  # the same verdict again: the first row answers
            fresh.append((index, key))
        for index, key in fresh:
            index[key] = line
        if fresh:
            self.rows[line] = found

    def find(self, item_id: str, question: str, first: tuple[str, str], second: tuple[str, str]) -> int | str:
        """The line that answers the pair (``first``, ``second``: each a response's id and text), or why none does.

        A row in the pair's own order answers first, else one in the other order; the line is then negative
        (the row's A is ``second``).
        """
        for index, key in ((self.by_ids, (item_id, first[0], second[0])),
                           (self.by_texts, (question, first[1], second[1]))):
            if key in index:
                line = index[key]
            elif (key[0], key[2], key[1]) in index:
                line = -index[(key[0], key[2], key[1])]
            else:
                continue
            return line if self.rows[abs(line)].probs is not None else NO_VERDICT
        return NOT_RECORDED


def _swap(p: tuple[float, float, float] | None) -> tuple[float, float, float] | None:
    return None if p is None else (p[1], p[0], p[2])


def recorded_prompt(line: int, order: int) -> str:
    """The question a recorded judge answers: its line (negative: the pair recorded the other way round) and
    the presentation order (1: the pair's first response shown as A). The store keys it with the file's hash."""
    return f"recorded verdict: line {line}, order {order}"


class RecordedBackend(Backend):
    """``recorded/<path>``: pairwise verdicts from a file (see the module docstring); no model."""

    exact_labels = False
    calls_model = False
    default_tokens_per_s = 1e9

    def __init__(self, path: str | Path) -> None:
        self.verdicts = RecordedVerdicts(path)
        self.name = f"recorded/{path}"
        self.lookups = 0
        """Recorded verdicts read (each pair: one per presentation order)."""

    @property
    def fingerprint(self) -> str:
        return f"recorded:sha256:{self.verdicts.sha256[:16]}"

    @property
    def context_length(self) -> int:
        return 1 << 30

    def count_tokens(self, text: str) -> int:
        return 1

    def max_label_tokens(self, labels: Sequence[str]) -> int:
        return 1

    def format_prompt(self, system: str, user: str, assistant_prefix: str) -> str:
        raise self.refusal()

    def refusal(self, what: str = "a prompt") -> ConfigError:
        return ConfigError(f"{self.name} answers pairwise verdicts from its file only: it cannot judge {what} "
                           "(use it with compare, calibrate/select in the compare mode, or as a cascade tier)")

    def label_logprobs(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        out = []
        for req in requests:
            m = _PROMPT.match(req.prompt)
            if m is None or len(req.labels) != 3:
                raise self.refusal()
            line, order = int(m.group(1)), int(m.group(2))
            row = self.verdicts.rows.get(abs(line))
            if row is None or row.probs is None:
                raise ConfigError(f"{self.name}: no recorded verdict at line {abs(line)} (was the file changed?)")
            pa, pb, tie = row.probs if line > 0 else _swap(row.probs)  # type: ignore[misc]
            shown = (pa, pb, tie) if order == 1 else (pb, pa, tie)  # (shown first, shown second, tie)
            out.append(LabelResult(tuple(math.log(p) if p > 0 else -math.inf for p in shown), 1, 0.0, RECORDED))
        self.lookups += len(requests)
        return out

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        raise self.refusal("a critique (cot)")
