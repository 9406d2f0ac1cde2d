"""Rules: shortcuts a benchmark applies before its judge (an exact match scores full marks, an empty answer
gets the lowest level). A rule that fires on a response gives it the rule's label with no model call.

A rule is one of five kinds:

- ``exact``: the response, stripped of surrounding whitespace, equals the item's ``field`` (``reference``
  by default, or ``context``), stripped the same way;
- ``lower``: the same after lower-casing both (Python's ``str.lower``), as a benchmark's code that compares
  ``answer.lower() == truth.lower()`` does (SC-Arena's cell-type evaluator);
- ``normalized``: the same after folding both texts: Unicode NFKC, case folded, punctuation removed,
  runs of whitespace made one space;
- ``empty``: the response is empty or whitespace only;
- ``regex``: ``pattern`` (a Python regular expression, searched for with the ``regex`` package, whose
  default syntax is the standard library's ``re``) is found in the response (write ``(?i)`` at its start for a
  case-insensitive match). Each search has a time budget, :data:`REGEX_BUDGET_S`: a pattern that backtracks
  without end on a response (``(x+x+)+y``) stops the run with an error naming the rule, the item and the
  response, instead of hanging it.

An exact, lower or normalized rule may give a ``pattern`` too: the benchmark's answer marker
(``\\[Predicted_Cell_Type:\\s*([^\\]]+?)\\]``). Then what is compared is its first group (the whole match
where it has none) at the first place it is found in the response, and the rule does not fire on a response
without it.

An exact, lower or normalized rule never fires on an item without that field (or one that folds to
nothing). Any rule may be limited to some items with ``when``: a table of item fields and the value each must
have (``when = { task = "celltype" }``: SC-Arena's shortcut is its cell-type evaluator's only); it does not
fire on other items. In a suite or recipe file rules are a list (``[[rules]]`` in TOML), checked in order: the first
that fires wins::

    [[rules]]
    kind = "exact"
    label = "5"            # the verdict: a label of the mode's scale, level or label set
    id = "exact-match"     # optional: what records name in their ``rule`` field (default: the kind)
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import regex

from ..errors import InputError


class _Answer(Protocol):
    """What a rule reads of a response (a :class:`~trustjudge.Response`): its text."""

    @property
    def text(self) -> str: ...

RuleKind = Literal["exact", "normalized", "empty", "regex", "lower"]
KINDS: tuple[str, ...] = ("exact", "normalized", "empty", "regex", "lower")
FIELDS: tuple[str, ...] = ("reference", "context")
"""The item fields an exact, lower or normalized rule compares a response with."""
COMPARING: tuple[str, ...] = ("exact", "lower", "normalized")
"""The kinds that compare a response with an item field."""
RULE_KEYS = frozenset({"kind", "label", "id", "pattern", "field", "when"})
MAX_PATTERN = 10_000
REGEX_BUDGET_S = 1.0
"""The most one search of a regex rule's pattern in one response may take, in seconds."""


def fold(text: str) -> str:
    """``text`` folded for a ``normalized`` rule: NFKC, case folded, punctuation removed, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(ch for ch in text if not unicodedata.category(ch).startswith("P"))
    return " ".join(text.split())


@dataclass(frozen=True)
class Rule:
    """A shortcut before the judge: when it fires on a response, the response gets ``label`` with no model call.

    Raises:
        InputError: an unknown kind, a missing label, a pattern that is not a regular expression (or one given
            to a kind other than ``regex``), or an unknown field (naming the rule's field).
    """

    kind: RuleKind
    label: str
    """The verdict: a label of the mode's scale (``"5"``), of a labelled criterion (``"A"``) or of the
    checklist's label set (``"YES"``); checked against the task when it is built."""
    id: str = ""
    """What the records of the responses it fires on name in their ``rule`` field; empty: the kind."""
    pattern: str | None = None
    """``regex``: the regular expression searched for in the response; ``exact``, ``lower``, ``normalized``
    (optional): the answer marker, whose first group (else its match) is what is compared."""
    field: str = "reference"
    """``exact``, ``lower`` and ``normalized``: the item's field the response is compared with (reference,
    context)."""
    when: tuple[tuple[str, str], ...] = ()
    """The item fields (``Item.fields``) and the value each must have for the rule to fire; empty: every item."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InputError(f"must be one of {', '.join(KINDS)}, got {self.kind!r}", field="kind")
        if isinstance(self.label, bool) or not isinstance(self.label, (str, int)):
            raise InputError(f"must be a label (a string), got {type(self.label).__name__}", field="label")
        label = str(self.label).strip()
        if not label:
            raise InputError("must not be empty", field="label")
        object.__setattr__(self, "label", label)
        if not isinstance(self.id, str):
            raise InputError(f"must be a string, got {type(self.id).__name__}", field="id")
        object.__setattr__(self, "id", self.id.strip() or self.kind)
        if self.kind == "regex" or (self.kind in COMPARING and self.pattern is not None):
            if not isinstance(self.pattern, str) or not self.pattern:
                raise InputError("is missing (a regex rule needs the regular expression it searches for)",
                                 field="pattern")
            if len(self.pattern) > MAX_PATTERN:
                raise InputError(f"is longer than {MAX_PATTERN} characters", field="pattern")
            try:
                regex.compile(self.pattern)
            except regex.error as exc:
                raise InputError(f"is not a valid regular expression: {exc}", field="pattern") from None
        elif self.pattern is not None:
            raise InputError(f"is for regex, exact, lower and normalized rules, not {self.kind}", field="pattern")
        if self.field not in FIELDS:
            raise InputError(f"must be one of {', '.join(FIELDS)}, got {self.field!r}", field="field")
        if self.field != "reference" and self.kind not in COMPARING:
            raise InputError(f"is for exact, lower and normalized rules only, not {self.kind}", field="field")
        when = tuple(self.when.items()) if isinstance(self.when, Mapping) else self.when
        if not isinstance(when, tuple) or not all(
                isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str) and pair[0]
                and isinstance(pair[1], (str, int, float, bool)) for pair in when):
            raise InputError('must be a table of item field -> value ({ task = "celltype" })', field="when")
        object.__setattr__(self, "when", tuple((k, str(v)) for k, v in when))

    def fires(self, item: object, response: _Answer) -> bool:
        """Whether the rule fires on ``response`` of ``item`` (an :class:`~trustjudge.Item`, read for its
        :attr:`field`)."""
        fields = getattr(item, "fields", None) or {}
        if any(str(fields.get(k)) != v or k not in fields for k, v in self.when):
            return False
        text = response.text
        if self.kind == "empty":
            return not text.strip()
        if self.kind == "regex" or self.pattern is not None:
            try:
                found = regex.search(str(self.pattern), text, timeout=REGEX_BUDGET_S)
            except TimeoutError:
                raise InputError(
                    f"regex rule {self.id!r} ran out of its {REGEX_BUDGET_S:g} s time budget on response "
                    f"{getattr(response, 'id', '?')!r} of item {getattr(item, 'id', '?')!r} ({len(text):,} "
                    f"characters): its pattern {self.pattern!r} backtracks too much (nested repeats such as "
                    "(x+x+)+ take exponential time); simplify it", field="pattern") from None
            if self.kind == "regex" or found is None:
                return found is not None
            text = found.group(1) if found.re.groups else found.group(0)
        target = getattr(item, self.field, None)
        if not isinstance(target, str):
            return False
        if self.kind == "exact":
            return bool(target.strip()) and text.strip() == target.strip()
        if self.kind == "lower":
            return bool(target.strip()) and text.strip().lower() == target.strip().lower()
        folded = fold(target)
        return bool(folded) and fold(text) == folded

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "label": self.label}
        if self.pattern is not None:
            out["pattern"] = self.pattern
        if self.kind in COMPARING:
            out["field"] = self.field
        if self.when:
            out["when"] = dict(self.when)
        return out


def first_rule(rules: Iterable[Rule], item: object, response: _Answer) -> Rule | None:
    """The first of ``rules`` that fires on ``response`` of ``item``, else ``None``.

    Raises:
        InputError: a regex rule ran out of its time budget (naming the rule, ``rules[i].pattern``).
    """
    for i, rule in enumerate(rules):
        try:
            if rule.fires(item, response):
                return rule
        except InputError as exc:
            raise InputError(exc.reason, field=f"rules[{i}].{exc.field}") from None
    return None


def parse_rules(raw: Any, file: str | None, line: int | None = None, prefix: str = "") -> tuple[Rule, ...]:
    """Validate a list of rules (a suite's or a recipe's ``rules``, or the Python API's: :class:`Rule` objects
    or mappings); every problem names the file and the field (``rules[1].pattern``)."""
    where = f"{prefix}rules"
    if raw is None:
        return ()
    if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Iterable):
        raise InputError(f"must be a list of rules ({{kind, label}} objects), got {type(raw).__name__}", file=file,
                         line=line, field=where)
    out: list[Rule] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(raw):
        at = f"{where}[{i}]"
        if isinstance(entry, Rule):
            rule = entry
        else:
            if not isinstance(entry, Mapping):
                raise InputError(f"must be a {{kind, label}} object, got {type(entry).__name__}", file=file,
                                 line=line, field=at)
            unknown = sorted(set(entry) - RULE_KEYS)
            if unknown:
                raise InputError(f"is not a rule field (known: {', '.join(sorted(RULE_KEYS))})", file=file, line=line,
                                 field=f"{at}.{unknown[0]}")
            for key in ("kind", "label"):
                if key not in entry:
                    raise InputError("is missing" + (f" (one of {', '.join(KINDS)})" if key == "kind" else
                                                     " (the verdict the rule gives)"),
                                     file=file, line=line, field=f"{at}.{key}")
            try:
                rule = Rule(entry["kind"], entry["label"], entry.get("id", ""), entry.get("pattern"),
                            entry.get("field", "reference"), entry.get("when", ()))
            except InputError as exc:
                raise InputError(exc.reason, file=file, line=line, field=f"{at}.{exc.field}") from None
        if rule.id in seen:
            raise InputError(f"repeats {where}[{seen[rule.id]}]'s id {rule.id!r} (give each rule its own id)",
                             file=file, line=line, field=f"{at}.id")
        seen[rule.id] = i
        out.append(rule)
    return tuple(out)


__all__ = ["KINDS", "Rule", "first_rule", "fold", "parse_rules"]
