"""How a mode cascades (``Mode(cascade=...)``): what one verdict of a cascade is, and how items are narrowed to
the verdicts still open.

A cascade (:mod:`trustjudge._cascade`) asks each tier only the verdicts the tiers before it abstained on. It
reads the verdicts through the mode's calibration units (``Mode(calibration=...)``) and asks the mode's
:class:`Cascading` the rest: each verdict's key (the same verdict under every tier, whatever the narrowing),
the items narrowed to a set of keys, what later tiers judge (claims: the claims tier 1 had), and the items
behind the verdicts no tier kept, in the items format, for a person to label. :class:`ByResponse` is the
ready-made one for a mode with one verdict per response record (a plug-in's ``LabelUnits`` without ``part``),
:class:`ByPair` for one per pair record, :class:`ByPart` for a list of verdicts in each response's record.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..audit._units import Unit
from ..io._items import Item, Response

__all__ = ["ByPair", "ByPart", "ByResponse", "Cascading", "Origin", "UnitKey", "still_open"]

UnitKey = tuple[str | int, ...]
"""Which verdict a unit is, the same under every tier: a pair's ids; a response's; a check's or claim's place."""
Origin = dict[tuple[str, str], list[int]]
"""Per (item, response) of narrowed items: the original place of each part (check or claim) kept."""
Records = Sequence[Mapping[str, Any]]


def still_open(part: Mapping[str, Any]) -> bool:
    """Whether a cascaded verdict was left to a person (no model tier kept it)."""
    return part.get("tier_judge") in (None, "human")


class Cascading(Protocol):
    """A mode's cascade contract."""

    @property
    def unit(self) -> str:
        """What one verdict is, in the cascade's tables ("pairs", "checks", "claims", "responses")."""
        ...

    def key(self, record: Mapping[str, Any], unit: Unit, origin: Origin | None) -> UnitKey:
        """Which verdict ``unit`` of ``record`` is (``origin``: where the parts of narrowed items were)."""
        ...

    def narrow(self, items: Sequence[Item], keep: set[UnitKey]) -> tuple[list[Item], Origin | None]:
        """``items`` with only the verdicts in ``keep`` (items left with none dropped), and where parts were."""
        ...

    def given(self, first: Records, items: Sequence[Item]) -> list[Item]:
        """What the tiers after the first judge: ``items``, with what tier 1's records ``first`` fixed."""
        ...

    def to_label(self, records: Records, items_by_id: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The items behind the verdicts of cascaded ``records`` that no model tier kept, ready for labels."""
        ...


def _ids(rec: Mapping[str, Any], *fields: str) -> UnitKey:
    return tuple(str(rec[f]) for f in fields)


def _copy(item: Mapping[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(item))
    return copied


@dataclass(frozen=True)
class ByResponse:
    """One verdict per response record: its key is the item's and response's ids."""

    unit: str = "responses"

    def key(self, record: Mapping[str, Any], unit: Unit, origin: Origin | None) -> UnitKey:
        return _ids(record, "item_id", "response_id")

    def narrow(self, items: Sequence[Item], keep: set[UnitKey]) -> tuple[list[Item], Origin | None]:
        out = []
        for item in items:
            responses = tuple(r for r in item.responses if (item.id, r.id) in keep)
            if responses:
                out.append(replace(item, responses=responses))
        return out, None

    def given(self, first: Records, items: Sequence[Item]) -> list[Item]:
        return list(items)

    def to_label(self, records: Records, items_by_id: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
        wanted: dict[str, set[str]] = {}
        for rec in records:
            if still_open(rec):
                wanted.setdefault(str(rec["item_id"]), set()).add(str(rec["response_id"]))
        out = []
        for item_id, keys in wanted.items():
            item = _copy(items_by_id[item_id])
            item["responses"] = [r for r in item.get("responses", []) if str(r.get("id")) in keys]
            out.append(item)
        return out


@dataclass(frozen=True)
class ByPair:
    """One verdict per pair record (``compare``): its key is the item's and the two responses' ids."""

    unit: str = "pairs"

    def key(self, record: Mapping[str, Any], unit: Unit, origin: Origin | None) -> UnitKey:
        return _ids(record, "item_id", "first_id", "second_id")

    def narrow(self, items: Sequence[Item], keep: set[UnitKey]) -> tuple[list[Item], Origin | None]:
        out = []
        for item in items:
            pairs = tuple(p for p in item.all_pairs() if (item.id, p.first, p.second) in keep)
            if pairs:
                out.append(replace(item, pairs=pairs))
        return out, None

    def given(self, first: Records, items: Sequence[Item]) -> list[Item]:
        return list(items)

    def to_label(self, records: Records, items_by_id: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
        wanted: dict[str, set[tuple[str, str]]] = {}
        for rec in records:
            if still_open(rec):
                wanted.setdefault(str(rec["item_id"]), set()).add((str(rec["first_id"]), str(rec["second_id"])))
        out = []
        for item_id, keys in wanted.items():
            item = _copy(items_by_id[item_id])
            item["pairs"] = [{"first": f, "second": s, "human": None} for f, s in sorted(keys)]
            out.append(item)
        return out


@dataclass(frozen=True)
class ByPart:
    """A list of verdicts in each response's record (field ``part``: a checklist's checks, a response's claims).

    ``parts(item, response)`` are the response's parts as judged; ``keep(item, response, chosen)`` the item
    and response asked only ``chosen`` of them; ``label(response, open, every)`` writes a response of the items
    file for labelling (``open``: its parts no tier kept, ``every``: all its parts as the cascade judged them);
    ``given``, where later tiers judge what tier 1 fixed (the claims it extracted).
    """

    part: str
    parts: Callable[[Item, Response], Sequence[Any]]
    keep: Callable[[Item, Response, tuple[Any, ...]], tuple[Item, Response]]
    label: Callable[[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]], None]
    first: Callable[[Records, Sequence[Item]], list[Item]] | None = None

    @property
    def unit(self) -> str:
        return self.part

    def key(self, record: Mapping[str, Any], unit: Unit, origin: Origin | None) -> UnitKey:
        kind, j = unit.path
        assert isinstance(j, int)
        where = (str(record["item_id"]), str(record["response_id"]))
        return (*where, str(kind), origin[where][j] if origin is not None else j)

    def narrow(self, items: Sequence[Item], keep: set[UnitKey]) -> tuple[list[Item], Origin | None]:
        out, origin = [], {}
        for item in items:
            narrowed, responses = item, []
            for resp in item.responses:
                parts = self.parts(item, resp)
                places = [j for j in range(len(parts)) if (item.id, resp.id, self.part, j) in keep]
                if not places:
                    continue
                origin[(item.id, resp.id)] = places
                narrowed, chosen = self.keep(item, resp, tuple(parts[j] for j in places))
                responses.append(chosen)
            if responses:
                out.append(replace(narrowed, responses=tuple(responses)))
        return out, origin

    def given(self, first: Records, items: Sequence[Item]) -> list[Item]:
        return list(items) if self.first is None else self.first(first, items)

    def to_label(self, records: Records, items_by_id: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
        open_parts: dict[tuple[str, str], list[dict[str, Any]]] = {}
        every: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for rec in records:
            where = (str(rec["item_id"]), str(rec["response_id"]))
            every[where] = list(rec.get(self.part) or [])
            left = [p for p in every[where] if still_open(p)]
            if left:
                open_parts[where] = left
        out = []
        for item_id in dict.fromkeys(i for i, _ in open_parts):
            item = _copy(items_by_id[item_id])
            responses = []
            for resp in item.get("responses", []):
                where = (item_id, str(resp.get("id")))
                if where in open_parts:
                    self.label(resp, open_parts[where], every[where])
                    responses.append(resp)
            item["responses"] = responses
            out.append(item)
        return out
