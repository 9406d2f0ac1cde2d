"""``brier``, ``ece`` and ``cohen_kappa`` are defined once each (issue 39), in engine/_aggregates.py: the audit's
calibration and agreement use the same functions, checked against a reference (scikit-learn where installed,
else values computed here by hand)."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from trustjudge.audit import _agreement, _calibration
from trustjudge.engine import _aggregates as A

SRC = Path(__file__).resolve().parents[1] / "src" / "trustjudge"


def test_each_metric_is_defined_in_one_place() -> None:
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in ("brier", "ece", "_kappa", "kappa_of_confusion"):
                found.setdefault(node.name, []).append(path.relative_to(SRC).as_posix())
    assert found == {"brier": ["engine/_aggregates.py"], "ece": ["engine/_aggregates.py"],
                     "kappa_of_confusion": ["engine/_aggregates.py"]}, found
    assert _calibration.brier is A.brier and _calibration.ece is A.ece
    assert _agreement.kappa_of_confusion is A.kappa_of_confusion


PROBS = [0.9, 0.2, 0.65, 0.4, 0.05, 0.99, 0.5, 0.7]
LABELS = [1, 0, 1, 1, 0, 1, 0, 0]


def test_brier_against_the_reference() -> None:
    try:
        from sklearn.metrics import brier_score_loss  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        reference = sum((p - y) ** 2 for p, y in zip(PROBS, LABELS)) / len(PROBS)  # by hand
        assert reference == pytest.approx(1.2751 / 8)  # 0.01 + 0.04 + 0.1225 + 0.36 + 0.0025 + 0.0001 + 0.25 + 0.49
    else:
        reference = float(brier_score_loss(LABELS, PROBS))
    assert A.brier(PROBS, LABELS) == pytest.approx(reference)
    rows = [[1 - p, p] for p in PROBS]  # the same verdicts as rows of two classes: twice the binary score
    assert A.brier(rows, LABELS) == pytest.approx(2 * reference)
    assert math.isnan(A.brier(np.zeros((0, 3)), []))


def test_cohen_kappa_against_the_reference() -> None:
    a = ["first", "first", "second", "tie", "second", "first", "tie", "second", "first", "second"]
    b = ["first", "second", "second", "tie", "first", "first", "second", "second", "first", "tie"]
    try:
        from sklearn.metrics import cohen_kappa_score  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        # p_o = 6/10; marginals a: first 4, second 4, tie 2; b: first 4, second 4, tie 2 -> p_e = 36/100
        reference = (0.6 - 0.36) / (1 - 0.36)
    else:
        reference = float(cohen_kappa_score(a, b))
    assert A.cohen_kappa(a, b) == pytest.approx(reference)
    assert _agreement.cohen_kappa(zip(a, b)) == pytest.approx(reference)  # the audit's, on pairs of verdicts


def test_top_class_ece_is_the_binary_ece_of_the_top_class() -> None:
    rows = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.5, 0.45, 0.05], [0.2, 0.2, 0.6]])
    labels = [0, 2, 1, 1]
    top, hit = rows.max(axis=1), [1, 1, 0, 0]
    assert A.ece(rows, labels) == pytest.approx(A.ece(top.tolist(), hit))
    # by hand: bins [0.5, 0.6) holds 0.5; [0.6, 0.7) holds 0.6, 0.6; [0.7, 0.8) holds 0.7
    by_hand = (1 * abs(0.5 - 0) + 2 * abs(0.6 - 0.5) + 1 * abs(0.7 - 1)) / 4
    assert A.ece(rows, labels) == pytest.approx(by_hand)
