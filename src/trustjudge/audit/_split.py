"""The selection split of a calibration set (which units fit a selection's map, which test its thresholds) and
the unit keys it ranks by."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError

SPLIT_SEED = "trustjudge/selection-split/1"
"""The seed of the selection split (:func:`selection_split`); a new rule gets a new seed."""


def selection_split(keys: Sequence[Sequence[str | int]] | None, n: int) -> npt.NDArray[np.bool_]:
    """Part A (``True``: the selection map is fitted on it) and part B (its thresholds are tested on it) of a
    calibration set of ``n`` units: a function of the file's content only.

    Each unit is ranked by the SHA-256 of the seed and its key (:func:`unit_key`; a file without keys: its
    place in the file), ties by place; units alternate A, B, A, ... in that order, so part A holds
    ``ceil(n / 2)`` units. A unit's part follows its key, so the tiers of a cascade, lined up by key, split
    alike.
    """
    ids: Sequence[Sequence[str | int]] = keys if keys is not None else [[i] for i in range(n)]
    if len(ids) != n:
        raise ConfigError(f"the selection split needs one key per unit ({n}), got {len(ids)}")
    rank = [hashlib.sha256((SPLIT_SEED + json.dumps(list(k))).encode()).hexdigest() for k in ids]
    order = sorted(range(n), key=lambda i: (rank[i], i))
    part_a = np.zeros(n, dtype=bool)
    part_a[order[0::2]] = True
    return part_a


def _read_keys(raw: Any, n: int, source: str) -> list[list[str | int]] | None:
    """A calibration file's unit keys (optional), checked: one list of ids per unit."""
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != n:
        raise ConfigError(f"{source}: field 'calibration_set.keys' needs one key per unit ({n})")
    for i, key in enumerate(raw):
        if (not isinstance(key, list) or not key
                or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in key)):
            raise ConfigError(f"{source}: calibration_set.keys[{i}] is not a list of ids")
    return raw
