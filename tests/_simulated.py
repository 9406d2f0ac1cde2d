"""A simulated judge for the guarantee's tests and bench/guarantee_borderline.py (zero model calls)."""

from __future__ import annotations

import numpy as np


def biased_judge(rng: np.random.Generator, n: int, k: int = 3, bias: float = 1.5,
                 sharp: float = 1.6) -> tuple[np.ndarray, np.ndarray]:
    """Probabilities over ``k`` classes miscalibrated by a per-class bias (the judge over-says the first classes)
    and a temperature, and the human's class: the human's class gets a noisy boost, the rest noise alone."""
    y = rng.integers(0, k, n)
    z = rng.normal(0.0, 1.0, (n, k))
    z[np.arange(n), y] += 1.2
    z = (z + np.linspace(bias, -bias, k)) * sharp
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True), y
