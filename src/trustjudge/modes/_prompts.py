"""How a judgment is asked: templates, scales, label sets and the two protocols.

Templates are plain text files with ``${name}`` fields (Python ``string.Template``). Pointwise
templates use ``question``, ``response``; pairwise ones ``question``, ``response_a``, ``response_b``.
Both may use ``context``, ``reference``, ``context_block``, ``reference_block``, ``grounding_block``
(profile, knowledge and evidence, in that order), ``scale_min``, ``scale_max`` and ``task`` (the
protocol's closing instruction). Criteria templates add ``criterion`` (its name, description and
levels), checklist templates ``check``. A user template replaces the default.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib.resources import files
from pathlib import Path

from .._images import Image, images_block
from ..engine._asking import Protocol as Protocol
from ..engine._engine import CLOSE as CLOSE
from ..errors import ConfigError
from ..io._quoting import _TAGS as _TAGS
from ..io._quoting import DEFAULT_TAGS as DEFAULT_TAGS
from ..io._quoting import quote as quote
from ..io._quoting import tag_pattern as tag_pattern
from ..io._suites import SCALE_SPAN

SCALES = (5, 10, 100)
"""The 1-based scales the audit sweeps and the bundled judges were measured on (any range is allowed)."""

SYSTEM = "You are a strict, impartial evaluator of answers written by AI assistants."
SCORE_MARKER = "Score: ["
VERDICT_MARKER = "Verdict: ["
ANSWER_MARKER = "Answer: ["
VERDICT_LABELS = ("A", "B", "C")

POINTWISE_FIELDS = {"question", "response"}
PAIRWISE_FIELDS = {"question", "response_a", "response_b"}
CRITERION_FIELDS = {"question", "response", "criterion"}
CHECK_FIELDS = {"question", "response", "check"}
CRITERION_PAIR_FIELDS = {"question", "response_a", "response_b", "criterion"}
GRADED_LABELS = ("A>>B", "A>B", "A=B", "B>A", "B>>A")
"""A graded pairwise verdict, from A much better to B much better."""
IMAGE_FIELDS = ("question_images", "reference_images", "response_images", "response_a_images", "response_b_images")
"""Where a template places images: the item's pictures, its reference figures, the response's (pairwise: each
response's) images. Empty for an item without them, so a text item's prompt is as it was."""
OPTIONAL_FIELDS = {"context", "reference", "context_block", "reference_block", "grounding_block", "scale_min",
                   "scale_max", "task", *IMAGE_FIELDS}
EXTRACT_FIELDS = {"question", "response"}
VERIFY_FIELDS = {"claim", "grounding_block"}
MATCH_FIELDS = {"gold", "claim"}


@dataclass(frozen=True)
class Grounding:
    """What a judgment is grounded in besides the question: rendered in this order, quoted like responses."""

    profile: str | None = None
    knowledge: str | None = None
    evidence: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.profile or self.knowledge or self.evidence)


NO_GROUNDING = Grounding()


@dataclass(frozen=True)
class Pictures:
    """The images of one judgment: the item's pictures, its reference figures, and the response's images (a
    pairwise judgment: ``response`` is the one shown as A, ``other`` the one shown as B)."""

    question: tuple[Image, ...] = ()
    reference: tuple[Image, ...] = ()
    response: tuple[Image, ...] = ()
    other: tuple[Image, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.question or self.reference or self.response or self.other)

    def fields(self, pairwise: bool) -> dict[str, str]:
        """The template fields (:data:`IMAGE_FIELDS`) they fill."""
        reference = (f"\n<reference_image>{images_block(self.reference)}\n</reference_image>\n"
                     if self.reference else "")
        out = {"question_images": images_block(self.question), "reference_images": reference}
        if pairwise:
            out.update(response_a_images=images_block(self.response), response_b_images=images_block(self.other))
        else:
            out["response_images"] = images_block(self.response)
        return out


NO_PICTURES = Pictures()


def strip_image_fields(text: str) -> str:
    """A template's text without its image fields (its identity for calibrations: a calibration fitted before
    images existed still fits, as a text item's prompt is unchanged)."""
    for name in IMAGE_FIELDS:
        text = text.replace("${" + name + "}", "")
    return text


@dataclass(frozen=True)
class LabelSet:
    """A closed set of labels ("YES", "NO"), each with an optional value (an expectation needs them all)."""

    labels: tuple[str, ...]
    values: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if len(self.labels) < 2 or len(set(self.labels)) != len(self.labels):
            raise ConfigError(f"a label set needs two or more distinct labels, got {list(self.labels)}")
        for lab in self.labels:
            if not lab or lab != lab.strip() or any(c in lab for c in "[]\n"):
                raise ConfigError(f"label {lab!r}: labels are non-empty, without brackets, newlines or "
                                  "surrounding spaces")
        if self.values is not None and len(self.values) != len(self.labels):
            raise ConfigError("give a value for every label or for none")

    @classmethod
    def parse(cls, text: str) -> LabelSet:
        """``"YES=1,NO=0"`` or ``"A,B,C,D"`` (values are all given or all absent)."""
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if any("=" in p for p in parts):
            labels, values = [], []
            for p in parts:
                name, eq, value = p.partition("=")
                try:
                    number = float(value)
                except ValueError:
                    number = float("nan")
                if not eq or number != number or number in (float("inf"), float("-inf")):
                    raise ConfigError(f"labels {text!r}: {p!r} is not LABEL=NUMBER (give every label a value, "
                                      "or none)")
                labels.append(name.strip())
                values.append(number)
            return cls(tuple(labels), tuple(values))
        return cls(tuple(parts))

    def value_of(self, label: str) -> float | None:
        """The value of ``label`` (case-insensitive), or ``None``."""
        if self.values is None:
            return None
        for lab, v in zip(self.labels, self.values):
            if lab.lower() == label.lower():
                return v
        return None

    def describe(self) -> str:
        return ", ".join(f"[{lab}]" for lab in self.labels)


YES_NO = LabelSet(("YES", "NO"), (1.0, 0.0))

PREFERENCES = ("first", "second", "tie")
_PREFERENCE_ALIASES = {"first": "first", "a": "first", "second": "second", "b": "second", "tie": "tie", "c": "tie"}


@dataclass(frozen=True)
class PairLabels:
    """A pairwise verdict's labels of the user's choosing, each mapped to a preference: ``first`` (the
    response shown first, as A, is better), ``second`` (the one shown second) or ``tie``. AutoFigure's
    ``A=first, B=second, BOTH_GOOD=tie, BOTH_BAD=tie`` keeps both good and both bad apart in the record
    while likelihood aggregation sums each preference's labels."""

    labels: tuple[str, ...]
    prefers: tuple[str, ...]
    """Each label's preference (``first``, ``second`` or ``tie``), in the order of :attr:`labels`."""

    def __post_init__(self) -> None:
        LabelSet(self.labels)  # two or more distinct labels, without brackets or surrounding spaces
        if len({lab.lower() for lab in self.labels}) != len(self.labels):
            raise ConfigError(f"pairwise labels must differ in more than case, got {list(self.labels)}")
        if len(self.prefers) != len(self.labels) or any(p not in PREFERENCES for p in self.prefers):
            raise ConfigError("give every pairwise label a preference: first, second or tie")
        if "first" not in self.prefers or "second" not in self.prefers:
            raise ConfigError(f"pairwise labels {self.describe()}: at least one label must prefer the first "
                              "response and one the second")

    @classmethod
    def parse(cls, text: str) -> PairLabels:
        """``"A=first,B=second,BOTH_GOOD=tie,BOTH_BAD=tie"`` (preferences first/second/tie, or A/B/C)."""
        labels, prefers = [], []
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            name, eq, pref = part.rpartition("=")
            preference = _PREFERENCE_ALIASES.get(pref.strip().lower())
            if not eq or not name.strip() or preference is None:
                raise ConfigError(f"pairwise labels {text!r}: {part!r} is not LABEL=first|second|tie")
            labels.append(name.strip())
            prefers.append(preference)
        return cls(tuple(labels), tuple(prefers))

    def describe(self) -> str:
        return ",".join(f"{lab}={p}" for lab, p in zip(self.labels, self.prefers))

    def collapse(self, probs: Sequence[float]) -> tuple[float, float, float]:
        """One order's label probabilities summed per preference: (A wins, B wins, tie) as shown."""
        out = {"first": 0.0, "second": 0.0, "tie": 0.0}
        for p, pref in zip(probs, self.prefers):
            out[pref] += p
        return out["first"], out["second"], out["tie"]

    def mirror(self) -> tuple[int, ...] | None:
        """Per label, the index of the label that says the same of the pair shown the other way round: a tie
        label itself; the labels preferring each side pair up as a graded set is listed, strongest for A first
        and strongest for B last (``A>>B, A>B, A=B, B>A, B>>A``: A>>B with B>>A, A>B with B>A). ``None`` when
        as many labels do not prefer each side (then no label reads the same in both orders)."""
        firsts = [i for i, p in enumerate(self.prefers) if p == "first"]
        seconds = [i for i, p in enumerate(self.prefers) if p == "second"]
        if len(firsts) != len(seconds):
            return None
        out = list(range(len(self.labels)))
        for i, j in zip(firsts, reversed(seconds)):
            out[i], out[j] = j, i
        return tuple(out)


DEFAULT_PAIR_LABELS = PairLabels(("A", "B", "C"), PREFERENCES)
"""The default verdicts, ``A``/``B``/``C``: the records of a task with them are as they always were."""


MAX_LEVELS = 101
"""The most levels a scale may have (0-100 has 101): each is a label whose probability the judge reads."""


@dataclass(frozen=True)
class Scale:
    """A rating scale: the integers ``low..points`` read as their decimal labels ("0".."5"), or a labelled
    scale (:meth:`labelled`) whose labels are names ("poor", "good"), each standing for an integer value.

    ``Scale(10)`` is 1..10, ``Scale(5, low=0)`` 0..5. Scores, argmax, expectations and the audits use
    :attr:`values`, so a 0-based scale scores 0 where a 1-based one would have scored 1.
    """

    points: int
    """The top value (on a 1-based scale, also its number of levels)."""
    low: int = 1
    """The bottom value."""
    names: tuple[str, ...] = ()
    """A labelled scale's labels, one per value of :attr:`named_values`; empty: the decimal numbers."""
    named_values: tuple[int, ...] = ()
    """A labelled scale's values, one per name (lowest first as given); empty for a numeric range."""

    def __post_init__(self) -> None:
        if self.names:
            if len(self.names) != len(self.named_values):
                raise ConfigError("a labelled scale needs one value per label")
            LabelSet(self.names)  # validates the labels (two or more, distinct, no brackets)
            if len(set(self.named_values)) != len(self.named_values):
                raise ConfigError(f"a labelled scale's values must be distinct, got {list(self.named_values)}")
            if (min(self.named_values), max(self.named_values)) != (self.low, self.points):
                raise ConfigError("a labelled scale's low and top are its lowest and highest values "
                                  "(build it with Scale.labelled)")
        elif not self.points > self.low:
            raise ConfigError(f"a scale needs two or more levels, got {self.low}-{self.points}")
        if len(self.values) > MAX_LEVELS:
            raise ConfigError(f"a scale has at most {MAX_LEVELS} levels, got {self.low}-{self.points} "
                              f"({len(self.values)})")

    @classmethod
    def labelled(cls, levels: Sequence[tuple[str, int]]) -> Scale:
        """A scale whose labels are names, each with its integer value: ``[("poor", 0), ("good", 2)]``."""
        names = tuple(name for name, _ in levels)
        values = tuple(int(v) for _, v in levels)
        if len(values) < 2:
            raise ConfigError(f"a labelled scale needs two or more levels, got {len(values)}")
        return cls(max(values), min(values), names, values)

    @property
    def values(self) -> tuple[int, ...]:
        return self.named_values if self.names else _values(self.low, self.points)

    @property
    def labels(self) -> tuple[str, ...]:
        return self.names if self.names else _labels(self.low, self.points)

    @property
    def one_based(self) -> bool:
        """A numeric scale from 1 (records and prompts say nothing of its low end, as before ranges existed)."""
        return self.low == 1 and not self.names

    @property
    def span(self) -> str:
        """``"1-10"``, ``"0-5"``; a labelled scale's labels with their values (``"poor=0, good=2"``)."""
        if self.names:
            return ", ".join(f"{n}={v}" for n, v in zip(self.names, self.named_values))
        return f"{self.low}-{self.points}"


@cache
def _values(low: int, high: int) -> tuple[int, ...]:
    return tuple(range(low, high + 1))


@cache
def _labels(low: int, high: int) -> tuple[str, ...]:
    return tuple(str(v) for v in _values(low, high))


_RANGE = SCALE_SPAN


def scale(spec: int | str | Scale, low: int | None = None) -> Scale:
    """A scale from its description: ``10`` (1..10), ``"0-5"`` / ``"0..5"`` (0..5), ``"10"``; ``low`` sets the
    bottom of a scale given by its top (``scale(10, low=0)`` is 0..10)."""
    if isinstance(spec, Scale):
        return spec if low is None or low == spec.low else scale(spec.points, low)
    if isinstance(spec, bool) or not isinstance(spec, (int, str)):
        raise ConfigError(f"a scale is a top value (10) or a range ('0-5'), got {spec!r}")
    if isinstance(spec, str):
        text = spec.strip()
        m = _RANGE.fullmatch(text)
        if m is not None:
            lo, hi = int(m.group(1)), int(m.group(2))
            if low is not None and low != lo:
                raise ConfigError(f"scale {spec!r} starts at {lo}, but scale_min is {low}")
            return scale(hi, lo)
        try:
            spec = int(text)
        except ValueError:
            raise ConfigError(f"a scale is a top value (10) or a range ('0-5'), got {spec!r}") from None
    bottom = 1 if low is None else low
    if isinstance(bottom, bool) or not isinstance(bottom, int):
        raise ConfigError(f"scale_min must be an integer, got {low!r}")
    if spec <= bottom:
        raise ConfigError(f"a scale needs two or more levels, got {bottom}-{spec}")
    return Scale(spec, bottom)


def check_system(text: object) -> str:
    """A system prompt as given, refused (:class:`ConfigError`) when it is not a non-empty text."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"the system prompt must be a non-empty text, got {text!r}")
    if "\x00" in text:
        raise ConfigError("the system prompt holds a NUL character")
    return text


def read_template(path: str | Path | None, default: str, required: set[str]) -> string.Template:
    """A user's template (a file; or, as a string holding a newline or a ``$``, the template's text itself, as
    the claims stages take it), or the packaged ``default``, checked for its fields."""
    if path is None:
        text = files("trustjudge").joinpath("templates").joinpath(default).read_text(encoding="utf-8")
    elif isinstance(path, str) and ("\n" in path or "$" in path):
        return check_template(path, "template (given as text)", required)
    else:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read template {path}: {exc}") from exc
    return check_template(text, f"template {path or default}", required)


def check_template(text: str, what: str, required: set[str] | frozenset[str]) -> string.Template:
    """``text`` as a template, checked for its fields (``what`` names it in the errors: ``template PATH``)."""
    template = string.Template(text)
    names, valid = _identifiers(template)
    if not valid:
        raise ConfigError(f"{what}: a '$' that is not a field; write '$$' for a dollar sign")
    missing = required - names
    unknown = names - required - OPTIONAL_FIELDS
    if missing:
        fields = ", ".join("${" + m + "}" for m in sorted(missing))
        raise ConfigError(f"{what} lacks the field(s) {fields}")
    if unknown:
        raise ConfigError(f"{what} uses unknown field(s) {', '.join(sorted(unknown))}")
    return template


def _identifiers(template: string.Template) -> tuple[set[str], bool]:
    """The fields of ``template`` and whether every ``$`` in it is a field or ``$$``: what
    ``Template.get_identifiers()`` and ``is_valid()`` say on Python 3.11+, read from the same pattern."""
    names: set[str] = set()
    valid = True
    for m in template.pattern.finditer(template.template):
        name = m.group("named") or m.group("braced")
        if name is not None:
            names.add(name)
        elif m.group("invalid") is not None:
            valid = False
    return names, valid


def _blocks(context: str | None, reference: str | None, tags: re.Pattern[str] | None = None,
            grounding: Grounding = NO_GROUNDING) -> dict[str, str]:
    tags = _TAGS if tags is None else tags
    context = quote(context, tags) if context else context
    reference = quote(reference, tags) if reference else reference
    return {
        "context": context or "",
        "reference": reference or "",
        "context_block": f"\n<context>\n{context}\n</context>\n" if context else "",
        "reference_block": f"\n<reference_answer>\n{reference}\n</reference_answer>\n" if reference else "",
        "grounding_block": _grounding_block(grounding, tags),
        **dict.fromkeys(IMAGE_FIELDS, ""),  # a judgment's images fill them (Pictures.fields)
    }


def grounding_block(g: Grounding, tags: re.Pattern[str] = _TAGS) -> str:
    """The profile, knowledge and evidence blocks of a prompt (empty without grounding)."""
    return _grounding_block(g, tags)


def _grounding_block(g: Grounding, tags: re.Pattern[str]) -> str:
    if not g:
        return ""
    parts = []
    if g.profile:
        parts.append(f"<profile>\n{quote(g.profile, tags)}\n</profile>")
    if g.knowledge:
        parts.append(f"<knowledge>\n{quote(g.knowledge, tags)}\n</knowledge>")
    for n, passage in enumerate(g.evidence, start=1):
        parts.append(f'<evidence n="{n}">\n{quote(passage, tags)}\n</evidence>')
    return "\n" + "\n".join(parts) + "\n"


def _compile(template: string.Template) -> tuple[tuple[str, str | None], ...]:
    """``template`` as (literal, field name) parts: rendering joins them without a regex pass per prompt."""
    parts: list[tuple[str, str | None]] = []
    text, pos = template.template, 0
    for match in template.pattern.finditer(text):
        literal = text[pos : match.start()]
        if match.group("escaped") is not None:
            parts.append((literal + template.delimiter, None))
        else:
            parts.append((literal, match.group("named") or match.group("braced")))
        pos = match.end()
    parts.append((text[pos:], None))
    return tuple(parts)


@dataclass(frozen=True)
class Prompts:
    """Renders the user turn of every kind of judgment, and holds the system turn they share."""

    pointwise: string.Template
    pairwise: string.Template
    criterion: string.Template
    check: string.Template
    criterion_pair: string.Template
    system: str = SYSTEM
    """The system prompt of every judgment (``Judge(system=...)``): part of each prompt, so of its store key."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "system", check_system(self.system))
        kinds = ("pointwise", "pairwise", "criterion", "check", "criterion_pair")
        object.__setattr__(self, "_parts", {k: _compile(getattr(self, k)) for k in kinds})
        object.__setattr__(self, "_grounded", {k: "grounding_block" in _identifiers(getattr(self, k))[0]
                                               for k in kinds})
        # A user template's own tags (<answer>...</answer>) are delimiters too: texts cannot write them.
        found = re.findall(r"<\s*/?\s*([A-Za-z_][\w-]*)(?:\s[^<>]*)?>",
                           "".join(getattr(self, k).template for k in kinds))
        object.__setattr__(self, "_tags", tag_pattern((*DEFAULT_TAGS, *found)))

    def _render(self, which: str, fields: dict[str, object], grounding: Grounding = NO_GROUNDING,
                pictures: Pictures = NO_PICTURES) -> str:
        """The same text as ``string.Template.substitute(fields)`` (a test checks it), faster."""
        if grounding and not self._grounded[which]:  # type: ignore[attr-defined]
            raise ConfigError(f"the {which} template has no ${{grounding_block}} field, but an item has a profile, "
                              "knowledge or evidence: add the field where they belong")
        if pictures:
            pictured = pictures.fields(which in ("pairwise", "criterion_pair"))
            names = _identifiers(getattr(self, which))[0]
            for name, value in pictured.items():
                if value and name not in names:
                    raise ConfigError(f"the {which} template has no ${{{name}}} field, but a judgment has such "
                                      "images: add the field where they belong")
            fields = {**fields, **pictured}
        parts: tuple[tuple[str, str | None], ...] = self._parts[which]  # type: ignore[attr-defined]
        return "".join(lit if name is None else lit + str(fields[name]) for lit, name in parts)

    @classmethod
    def load(cls, pointwise: str | Path | None = None, pairwise: str | Path | None = None,
             criterion: str | Path | None = None, check: str | Path | None = None,
             criterion_pair: str | Path | None = None, *, system: str | None = None) -> Prompts:
        return cls(read_template(pointwise, "pointwise.txt", POINTWISE_FIELDS),
                   read_template(pairwise, "pairwise.txt", PAIRWISE_FIELDS),
                   read_template(criterion, "criterion.txt", CRITERION_FIELDS),
                   read_template(check, "check.txt", CHECK_FIELDS),
                   read_template(criterion_pair, "criterion_pair.txt", CRITERION_PAIR_FIELDS),
                   SYSTEM if system is None else system)

    def score_task(self, sc: Scale, protocol: Protocol) -> str:
        if sc.names:
            form = f'"Score: [X]" where X is one of {", ".join(sc.labels)}'
        else:
            form = f'"Score: [N]" where N is an integer from {sc.low} (very poor) to {sc.points} (excellent)'
        if protocol == "direct":
            return f"Reply with the rating only, in the form {form}."
        return (f"First write a brief critique of the response (at most three sentences). "
                f"Then give the rating on its own line in the form {form}.")

    def label_task(self, labels: LabelSet, protocol: Protocol, what: str = "label") -> str:
        form = f'"{ANSWER_MARKER}X]" where X is one of {", ".join(labels.labels)}'
        if protocol == "direct":
            return f"Reply with the {what} only, in the form {form}."
        return (f"First explain your reasoning briefly (at most three sentences). "
                f"Then give the {what} on its own line in the form {form}.")

    def verdict_task(self, protocol: Protocol, labels: PairLabels | None = None) -> str:
        if labels is None or labels == DEFAULT_PAIR_LABELS:
            form = ('"Verdict: [A]" if response A is better, "Verdict: [B]" if response B is better, '
                    'or "Verdict: [C]" if they are equally good')
        else:
            form = f'"{VERDICT_MARKER}X]" where X is one of {", ".join(labels.labels)}'
        if protocol == "direct":
            return f"Reply with the verdict only: {form}."
        return (f"First write a brief comparison of the two responses (at most three sentences). "
                f"Then give the verdict on its own line: {form}.")

    def graded_task(self, protocol: Protocol) -> str:
        form = ('"Verdict: [X]" where X is A>>B (A is much better), A>B (A is better), A=B (equally good), '
                'B>A (B is better) or B>>A (B is much better)')
        if protocol == "direct":
            return f"Reply with the verdict only, in the form {form}."
        return (f"First write a brief comparison of the two responses on this criterion (at most three sentences). "
                f"Then give the verdict on its own line in the form {form}.")

    def render_criterion_pair(self, question: str, a: str, b: str, context: str | None, reference: str | None,
                              criterion: str, task: str, grounding: Grounding = NO_GROUNDING,
                              pictures: Pictures = NO_PICTURES) -> str:
        """A pairwise criterion judgment: both responses first, the criterion last (shared prefix)."""
        tags: re.Pattern[str] = self._tags  # type: ignore[attr-defined]
        fields = dict(_shared_fields(question, context, reference, 1, task, tags, grounding))
        fields["response_a"] = quote(a, tags)
        fields["response_b"] = quote(b, tags)
        fields["criterion"] = quote(criterion, tags)
        return self._render("criterion_pair", fields, grounding, pictures)

    def render_pointwise(self, question: str, response: str, context: str | None, reference: str | None,
                         sc: Scale, protocol: Protocol, grounding: Grounding = NO_GROUNDING,
                         task: str | None = None, pictures: Pictures = NO_PICTURES) -> str:
        tags: re.Pattern[str] = self._tags  # type: ignore[attr-defined]
        task = self.score_task(sc, protocol) if task is None else task
        fields = dict(_shared_fields(question, context, reference, sc.points, task, tags, grounding, sc.low))
        fields["response"] = quote(response, tags)
        return self._render("pointwise", fields, grounding, pictures)

    def render_pairwise(self, question: str, a: str, b: str, context: str | None, reference: str | None,
                        protocol: Protocol, grounding: Grounding = NO_GROUNDING, task: str | None = None,
                        pictures: Pictures = NO_PICTURES) -> str:
        tags: re.Pattern[str] = self._tags  # type: ignore[attr-defined]
        task = self.verdict_task(protocol) if task is None else task
        fields = dict(_shared_fields(question, context, reference, 1, task, tags, grounding))
        fields["response_a"] = quote(a, tags)
        fields["response_b"] = quote(b, tags)
        return self._render("pairwise", fields, grounding, pictures)

    def render_criterion(self, question: str, response: str, context: str | None, reference: str | None,
                         criterion: str, points: int, task: str, grounding: Grounding = NO_GROUNDING,
                         low: int = 1, pictures: Pictures = NO_PICTURES) -> str:
        """A criterion judgment: everything before the criterion is shared by all criteria of a response
        (``low``..``points``: the criterion's scale, the template's ``scale_min``/``scale_max``)."""
        tags: re.Pattern[str] = self._tags  # type: ignore[attr-defined]
        fields = dict(_shared_fields(question, context, reference, points, task, tags, grounding, low))
        fields["response"] = quote(response, tags)
        fields["criterion"] = quote(criterion, tags)
        return self._render("criterion", fields, grounding, pictures)

    def render_check(self, question: str, response: str, context: str | None, reference: str | None,
                     check: str, task: str, grounding: Grounding = NO_GROUNDING,
                     pictures: Pictures = NO_PICTURES) -> str:
        tags: re.Pattern[str] = self._tags  # type: ignore[attr-defined]
        fields = dict(_shared_fields(question, context, reference, 1, task, tags, grounding))
        fields["response"] = quote(response, tags)
        fields["check"] = quote(check, tags)
        return self._render("check", fields, grounding, pictures)


@lru_cache(maxsize=1024)
def _shared_fields(question: str, context: str | None, reference: str | None, scale_max: int,
                   task: str, tags: re.Pattern[str] = _TAGS, grounding: Grounding = NO_GROUNDING,
                   scale_min: int = 1) -> dict[str, object]:
    """The fields every response to one question shares, quoted once (copied before use)."""
    return dict(question=quote(question, tags), scale_min=scale_min, scale_max=scale_max, task=task,
                **_blocks(context, reference, tags, grounding))


SCALE_METAVAR = "N|LO-HI"
"""How a scale option's value reads in a command's help."""


def scale_text(text: str) -> int | str:
    """A scale as a command line gives it (``10``, ``0-5``), checked (:func:`scale`): a top value as an int,
    a range as its text."""
    scale(text)
    stripped = text.strip()
    return int(stripped) if stripped.isdigit() else stripped
