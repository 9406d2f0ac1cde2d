"""Subsets of items for a study: whole items, stratified, by count or by a judgment budget."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from fractions import Fraction

from ..errors import ConfigError
from ._items import Item


def _stratified_order(items: Sequence[Item], seed: int, key: Callable[[Item], str] | None) -> list[int]:
    """Indices of ``items`` in an order whose every prefix is a stratified sample.

    Each stratum is shuffled (seeded); its k-th item (0-based) of m gets the position (2k+1)/2m, and
    items are taken by increasing position. A prefix of n items therefore holds each stratum's share
    of n rounded to the nearest integer (Webster / Sainte-Laguë apportionment), and growing n never
    drops an item.
    """
    strata: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        strata.setdefault(key(item) if key else str(len(item.responses)), []).append(index)
    rng = random.Random(seed)
    ranked: list[tuple[Fraction, float, int]] = []
    for name in sorted(strata):
        members = strata[name]
        rng.shuffle(members)
        tiebreak = rng.random()
        ranked.extend((Fraction(2 * k + 1, 2 * len(members)), tiebreak, index)
                      for k, index in enumerate(members))
    ranked.sort()
    return [index for _, _, index in ranked]


def stratified_subset(items: Sequence[Item], n_items: int, *, seed: int = 0,
                      key: Callable[[Item], str] | None = None) -> list[Item]:
    """Choose ``n_items`` whole items so that each stratum keeps its share.

    Args:
        items: The items to choose from.
        n_items: How many to choose; all of them when it is at least ``len(items)``.
        seed: Random seed; the same seed gives the same subset.
        key: The stratum of an item; default: its number of responses.

    Returns:
        The chosen items, in their original order.

    Raises:
        ConfigError: ``n_items`` is negative.
    """
    if n_items < 0:
        raise ConfigError(f"n_items must be 0 or more, got {n_items}")
    chosen = sorted(_stratified_order(items, seed, key)[:n_items])
    return [items[i] for i in chosen]


def budget_subset(items: Sequence[Item], max_judgments: int, per_item: Callable[[Item], int], *,
                  seed: int = 0, key: Callable[[Item], str] | None = None) -> list[Item]:
    """Choose stratified whole items until a judgment budget is reached.

    Items are taken in the same stratified order as :func:`stratified_subset`; selection stops at the
    first item whose cost would exceed the budget (skipping it to take cheaper items instead would
    bias the sample towards small items).

    Args:
        items: The items to choose from.
        max_judgments: The most judgments the chosen items may need in total.
        per_item: The number of judgments an item needs (e.g. its number of pairs).
        seed: Random seed; the same seed gives the same subset.
        key: The stratum of an item; default: its number of responses.

    Returns:
        The chosen items, in their original order.

    Raises:
        ConfigError: ``max_judgments`` is negative or ``per_item`` returns a negative number.
    """
    if max_judgments < 0:
        raise ConfigError(f"max_judgments must be 0 or more, got {max_judgments}")
    chosen: list[int] = []
    spent = 0
    for index in _stratified_order(items, seed, key):
        cost = per_item(items[index])
        if cost < 0:
            raise ConfigError(f"per_item returned {cost} for item {items[index].id!r}; it must be 0 or more")
        if spent + cost > max_judgments:
            break
        spent += cost
        chosen.append(index)
    return [items[i] for i in sorted(chosen)]


__all__ = ["budget_subset", "stratified_subset"]
