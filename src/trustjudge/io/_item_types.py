"""The item record types (:class:`Item`, :class:`Response`, :class:`Pair`, :class:`Criterion`, :class:`Check`,
:class:`Claim`, :class:`Turn`) and the limits on their fields; read from files by :mod:`trustjudge.io._items`."""

from __future__ import annotations

import hashlib
import json
import math
import re
import reprlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .._images import Image
from ..errors import InputError
from ._quoting import DEFAULT_TAGS, quote, tag_pattern

MAX_FIELD_CHARS = 1_000_000
MAX_WEIGHT = 1e6
MAX_LEVELS = 101
"""The most levels a criterion may describe (0-100 has 101)."""
"""The largest weight of a criterion or check. Weights are relative (only their ratios matter), and a bound
keeps every weighted sum finite (``1e308`` would overflow it)."""
HUMAN_ALIASES = {
    "first": "first", "a": "first", "1": "first", "response_a": "first",
    "second": "second", "b": "second", "2": "second", "response_b": "second",
    "tie": "tie", "c": "tie", "0": "tie", "draw": "tie", "equal": "tie",
}


_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = 40
_SHOWN.maxlevel = 3


def shown(value: Any) -> str:
    """``value`` for an error message: short, and safe for values nested too deeply for ``repr``."""
    return _SHOWN.repr(value)


def _text_arg(value: Any, where: str, *, allow_empty: bool = False) -> str:
    """A text given in code (a criterion's name, a pytest helper's response): a valid, non-empty string."""
    if not isinstance(value, str):
        raise InputError(f"must be a string, got {type(value).__name__}", field=where)
    problem = unicode_problem(value)
    if problem:
        raise InputError(problem, field=where)
    if not allow_empty and not value.strip():
        raise InputError("must not be empty", field=where)
    return value


def _weight_arg(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"must be a number, got {type(value).__name__}", field=where)
    if not (math.isfinite(value) and 0 <= value <= MAX_WEIGHT):
        raise InputError(f"must be finite, 0 or more and at most {MAX_WEIGHT:g}, got {value!r}", field=where)
    return float(value)


@dataclass(frozen=True)
class Criterion:
    """A named rubric criterion: judged on its own, combined into a weighted aggregate.

    Its levels are judged on 1..N by default; ``values`` gives each level another integer value (a 0-3
    scale: ``values=(0, 1, 2, 3)``), ``labels`` a name the judge answers with instead of the number (a
    labelled scale: ``labels=("poor", "fair", "good")``, each standing for its value).

    Raises:
        InputError: the name or description is empty or not a string, the weight is not a finite number
            from 0 to :data:`MAX_WEIGHT`, the levels are not 2 to :data:`MAX_LEVELS` texts, or the values or
            labels are not one per level (distinct integers; distinct labels without brackets).
    """

    name: str
    description: str
    weight: float = 1.0
    levels: tuple[str, ...] = ()
    """Descriptions of the levels, lowest first (N = len(levels)); empty: the task's scale."""
    values: tuple[int, ...] = ()
    """Each level's value, in the order of :attr:`levels`; empty: 1..N."""
    labels: tuple[str, ...] = ()
    """Each level's label, what the judge answers (a labelled scale); empty: the values' decimal numbers."""

    def __post_init__(self) -> None:
        _text_arg(self.name, "name")
        _text_arg(self.description, "description")
        object.__setattr__(self, "weight", _weight_arg(self.weight, "weight"))
        if isinstance(self.levels, str) or not isinstance(self.levels, (tuple, list)):
            raise InputError(f"must be a sequence of level descriptions, got {type(self.levels).__name__}",
                             field="levels")
        levels = tuple(_text_arg(v, f"levels[{k}]") for k, v in enumerate(self.levels))
        if levels and not 2 <= len(levels) <= MAX_LEVELS:
            raise InputError(f"must describe 2 to {MAX_LEVELS} levels, got {len(levels)}", field="levels")
        object.__setattr__(self, "levels", levels)
        values = tuple(self.values)
        if values:
            if len(values) != len(levels):
                raise InputError(f"must give one value per level ({len(levels)}), got {len(values)}",
                                 field="values")
            for k, v in enumerate(values):
                if isinstance(v, bool) or not isinstance(v, int):
                    raise InputError(f"must be an integer, got {v!r}", field=f"values[{k}]")
            if len(set(values)) != len(values):
                raise InputError(f"must be distinct, got {list(values)}", field="values")
        object.__setattr__(self, "values", values)
        labels = tuple(_text_arg(v, f"labels[{k}]") for k, v in enumerate(self.labels))
        if labels:
            if len(labels) != len(levels):
                raise InputError(f"must give one label per level ({len(levels)}), got {len(labels)}",
                                 field="labels")
            for k, lab in enumerate(labels):
                if lab != lab.strip() or any(c in lab for c in "[]\n"):
                    raise InputError(f"{lab!r}: a label has no brackets, newlines or surrounding spaces",
                                     field=f"labels[{k}]")
            if len({lab.lower() for lab in labels}) != len(labels):
                raise InputError(f"must be distinct, got {list(labels)}", field="labels")
        object.__setattr__(self, "labels", labels)

    def level_values(self) -> tuple[int, ...]:
        """The value of each level (1..N unless :attr:`values` says otherwise); empty without levels."""
        return self.values or tuple(range(1, len(self.levels) + 1))


@dataclass(frozen=True)
class Check:
    """One yes/no checklist question about a response ("Does it cite a source?").

    Raises:
        InputError: the id or text is empty or not a string, or the weight is not a finite number from 0
            to :data:`MAX_WEIGHT`.
    """

    id: str
    text: str
    weight: float = 1.0

    def __post_init__(self) -> None:
        _text_arg(self.id, "id")
        _text_arg(self.text, "text")
        object.__setattr__(self, "weight", _weight_arg(self.weight, "weight"))


@dataclass(frozen=True)
class Claim:
    """A claim a response makes, given in the input (instead of extracted by the judge)."""

    text: str
    human: str | None = None
    """A human verification label (SUPPORTED, PARTIAL, UNSUPPORTED, UNKNOWN; case-insensitive)."""
    source: str | None = None
    """The id of the item's source (``sources``) the claim cites: it is verified against that text alone."""


TURN_ROLES = ("system", "user", "assistant", "tool")
"""The roles a turn of a transcript may have."""
TURN_FIELDS = ("role", "content", "tool_output", "name")
MAX_TURNS = 10_000
_TURN_NAME = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")


@dataclass(frozen=True)
class Turn:
    """One turn of an agent's trajectory (a response given as ``turns``): who spoke, what it said, and the
    output of the tool it called, where there was one.

    Raises:
        InputError: the role is not one of :data:`TURN_ROLES`, the content or tool output is not a string,
            the content is empty without a tool output, or the name is not 1-64 letters, digits and ``_.:/-``.
    """

    role: str
    content: str
    tool_output: str | None = None
    """What the tool the turn called returned (shown inside the turn, quoted like it)."""
    name: str | None = None
    """The tool's or the agent's name (``python``, ``search``)."""

    def __post_init__(self) -> None:
        if self.role not in TURN_ROLES:
            raise InputError(f"must be one of {', '.join(TURN_ROLES)}, got {shown(self.role)}", field="role")
        _text_arg(self.content, "content", allow_empty=self.tool_output is not None)
        if self.tool_output is not None:
            _text_arg(self.tool_output, "tool_output", allow_empty=True)
        if self.name is not None and (not isinstance(self.name, str) or not _TURN_NAME.fullmatch(self.name)):
            raise InputError(f"must be 1-64 letters, digits or _.:/- (no spaces or quotes), got {shown(self.name)}",
                             field="name")

    def to_dict(self) -> dict[str, str]:
        """The turn as its JSON object (the fields given, in :data:`TURN_FIELDS` order)."""
        out = {"role": self.role, "content": self.content}
        if self.tool_output is not None:
            out["tool_output"] = self.tool_output
        if self.name is not None:
            out["name"] = self.name
        return out


TRANSCRIPT_TAGS = ("turn", "tool_output")
"""The tags a transcript is written with: no turn's text can write them (nor the prompts' own tags)."""
_TRANSCRIPT = tag_pattern((*DEFAULT_TAGS, *TRANSCRIPT_TAGS))


def render_turn(n: int, turn: Turn) -> str:
    """Turn ``n`` (1-based) of a transcript: a ``<turn>`` block whose texts are quoted, so that no text of
    it can close the turn, open another, or close the response block it sits in."""
    name = f' name="{turn.name}"' if turn.name is not None else ""
    parts = [f'<turn n="{n}" role="{turn.role}"{name}>']
    if turn.content or turn.tool_output is None:
        parts.append(quote(turn.content, _TRANSCRIPT))
    if turn.tool_output is not None:
        parts.append(f"<tool_output>\n{quote(turn.tool_output, _TRANSCRIPT)}\n</tool_output>")
    parts.append("</turn>")
    return "\n".join(parts)


def transcript(turns: Iterable[Turn]) -> str:
    """The text a response given as turns is judged as: its turns in order, each a quoted ``<turn>`` block."""
    return "\n".join(render_turn(n, t) for n, t in enumerate(turns, start=1))


def turns_digest(turns: Iterable[Turn]) -> str:
    """``sha256:`` and the hex SHA-256 of the turns as compact JSON (keys in :data:`TURN_FIELDS` order): what
    a record says of the turns it judged."""
    data = json.dumps([t.to_dict() for t in turns], ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()


HumanCheck = float | str
"""A human checklist label: a number in [0, 1] (``true`` is 1) or a label name of the task's label set."""


@dataclass(frozen=True)
class Response:
    """One candidate response to judge."""

    id: str
    text: str
    system: str | None = None
    human_score: float | None = None
    checklist: tuple[Check, ...] = ()
    """Checks that apply to this response only (asked after the item's own checks)."""
    human_criteria: dict[str, float] | None = field(default=None, hash=False)
    human_checks: dict[str, HumanCheck] | None = field(default=None, hash=False)
    claims: tuple[Claim, ...] | None = None
    """The response's claims, where given (``None``: the judge extracts them)."""
    turns: tuple[Turn, ...] | None = None
    """The turns of a response given as a trajectory; its :attr:`text` is then their :func:`transcript`
    (build one with :meth:`from_turns`)."""
    images: tuple[Image, ...] = ()
    """What the response drew or shows (``${response_images}`` in templates); judged with its text."""

    @classmethod
    def from_turns(cls, id: str, turns: Iterable[Turn], **fields: Any) -> Response:
        """A response given as turns: its text is their :func:`transcript` (``fields``: the other fields)."""
        kept = tuple(turns)
        if not kept:
            raise InputError("must hold at least one turn", field="turns")
        return cls(id, transcript(kept), turns=kept, **fields)


@dataclass(frozen=True)
class Pair:
    """Two responses of the same item to compare, with optional human preference."""

    first: str
    second: str
    human: str | None = None
    """Majority human preference: ``first``, ``second`` or ``tie``."""
    annotators: tuple[str, ...] = ()
    """Each annotator's preference, where several are given."""


@dataclass(frozen=True)
class Item:
    """A question with its responses (and optional explicit pairs)."""

    id: str
    question: str
    responses: tuple[Response, ...]
    context: str | None = None
    reference: str | None = None
    pairs: tuple[Pair, ...] | None = None
    line: int | None = field(default=None, compare=False)
    profile: str | None = None
    """Who the answer is for (personalised criteria): quoted into the prompt like a response."""
    knowledge: str | None = None
    """Supplied knowledge the judge must ground its judgment in."""
    evidence: tuple[str, ...] = ()
    """Passages (sources, retrieved documents) the judgment is grounded in, in this order."""
    criteria: tuple[Criterion, ...] = ()
    checklist: tuple[Check, ...] = ()
    gold_claims: tuple[str, ...] | None = None
    """Reference claims for recall (``None``: extracted from ``reference`` when matching is asked)."""
    sources: dict[str, str] | None = field(default=None, hash=False)
    """Cited sources by id (claims cite them by ``source``): each claim citing one is verified against its text."""
    fields: dict[str, str | int | float | bool] = field(default_factory=dict, hash=False, compare=False)
    """The item's other top-level fields with a scalar value (``subset``, ``category``, ...), as given: no mode
    reads them; a recipe's metric may group or gate by one (docs/benchmarks.md)."""
    images: tuple[Image, ...] = ()
    """The task's pictures (``${question_images}`` in templates), shown with the question."""
    reference_images: tuple[Image, ...] = ()
    """Reference figures (a ground-truth plot; ``${reference_images}``), shown with the reference."""

    @property
    def has_images(self) -> bool:
        """Whether the item or any of its responses carries an image."""
        return bool(self.images or self.reference_images or any(r.images for r in self.responses))

    def checks(self, response: Response) -> tuple[Check, ...]:
        """The checks asked of ``response``: the item's, then the response's own."""
        return self.checklist + response.checklist

    def response(self, rid: str) -> Response:
        for r in self.responses:
            if r.id == rid:
                return r
        raise KeyError(rid)

    def all_pairs(self) -> tuple[Pair, ...]:
        """Explicit pairs, or every unordered pair of responses in input order."""
        if self.pairs is not None:
            return self.pairs
        rs = self.responses
        return tuple(Pair(rs[i].id, rs[j].id) for i in range(len(rs)) for j in range(i + 1, len(rs)))


def unicode_problem(text: str) -> str | None:
    """Why ``text`` is not valid Unicode (a lone surrogate such as JSON's ``"\\ud800"``), or ``None``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
            return f"invalid UTF-8 (byte 0x{code - 0xDC00:02x} at character {exc.start})"
        return f"contains a lone surrogate (U+{code:04X} at character {exc.start}), which is not valid Unicode"
    return None
