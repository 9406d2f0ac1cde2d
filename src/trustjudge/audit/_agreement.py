"""Agreement of a judge with human labels: pairwise verdicts, annotators, scores.

- :func:`pairwise_agreement`: accuracy (with and without ties), 3-class Cohen's kappa and the confusion
  matrix of one aggregation's verdicts against each pair's ``human`` label, with the annotators' own
  agreement (:func:`annotator_agreement`) as a ceiling;
- :func:`score_agreement`: Spearman and Kendall (tau-b) correlations of a scoring method with
  ``human_score``, within items and pooled;
- :func:`cohen_kappa` over the three verdict classes.

Definitions: ../shared/TRUSTJUDGE.md section 6. Unscored judgments never enter a denominator.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..engine._aggregates import kappa_of_confusion
from ._stats import (
    CI,
    NAN,
    NO_CI,
    SIGN,
    VERDICTS,
    Floats,
    Record,
    bootstrap_ratio,
    correlation,
    dedupe_pairs,
    dedupe_scores,
    finite,
    percentile_ci,
    rate,
    resample_counts,
    score_value,
    verdict_of,
)


@dataclass(frozen=True)
class AnnotatorAgreement:
    """Annotators' agreement with each other (a ceiling for the judge); annotators are list positions."""

    pairs: int
    mean_kappa: float
    annotator_pairs: int
    loo_accuracy: float
    loo_n: int


@dataclass(frozen=True)
class PairwiseAgreement:
    """One aggregation's agreement with human labels; ``confusion`` rows: human, columns: verdict."""

    method: str
    n: int
    accuracy: float
    n_no_ties: int
    accuracy_no_ties: float
    kappa: float
    items: int
    confusion: tuple[tuple[int, int, int], ...]
    annotators: AnnotatorAgreement | None = None
    accuracy_ci: CI = NO_CI
    kappa_ci: CI = NO_CI


@dataclass(frozen=True)
class ScoreAgreement:
    """Rank correlation with human scores: mean over ``items`` varying items, and pooled over ``n``."""

    method: str
    spearman_mean: float
    kendall_mean: float
    items: int
    items_total: int
    spearman_pooled: float
    kendall_pooled: float
    n: int
    spearman_ci: CI = NO_CI


def _small_rank_correlations(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Spearman rho and Kendall tau-b of one item's few responses, by O(n^2) pair comparisons."""
    # Same values as scipy.stats.spearmanr / kendalltau, but scipy's ~1 ms per call dominated audits
    # of thousands of items with a handful of responses each.
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return NAN, NAN
    sx, sy = (np.sign(np.subtract.outer(v, v)) for v in (np.asarray(x, float), np.asarray(y, float)))
    rx, ry = ((s > 0).sum(axis=1) + ((s == 0).sum(axis=1) + 1) / 2 - (len(x) + 1) / 2 for s in (sx, sy))
    rho = float(rx @ ry / math.sqrt((rx @ rx) * (ry @ ry)))  # Pearson of centred average ranks
    upper = np.triu_indices(len(x), 1)
    untied_x, untied_y = (np.count_nonzero(s[upper]) for s in (sx, sy))
    return rho, float((sx[upper] * sy[upper]).sum() / math.sqrt(untied_x * untied_y))


def cohen_kappa(pairs: Iterable[tuple[str, str]]) -> float:
    """Return Cohen's kappa over the three verdict classes (nan without data or if chance agreement is 1).

    Args:
        pairs: ``(rater_1, rater_2)`` labels, each ``"first"``, ``"second"`` or ``"tie"``.
    """
    conf = np.zeros((3, 3), dtype=np.float64)
    for one, two in pairs:
        conf[VERDICTS.index(one), VERDICTS.index(two)] += 1
    return float(kappa_of_confusion(conf))


def _majority(labels: Sequence[str]) -> str:
    ranked = Counter(labels).most_common()
    return "tie" if len(ranked) > 1 and ranked[0][1] == ranked[1][1] else ranked[0][0]


def annotator_agreement(compare_records: Sequence[Record]) -> AnnotatorAgreement | None:
    """Return the annotators' agreement on pairs with two or more labels (``None`` without such pairs).

    Mean Cohen's kappa over annotator-position pairs, and the accuracy of each label against the
    majority of the pair's other labels (a split majority is ``"tie"``).
    """
    labelled = [[a for a in r.get("annotators") or [] if a in SIGN] for r in dedupe_pairs(compare_records)]
    labelled = [labels for labels in labelled if len(labels) >= 2]
    if not labelled:
        return None
    kappas = [cohen_kappa((x[a], x[b]) for x in labelled if len(x) > b)
              for a, b in itertools.combinations(range(max(map(len, labelled))), 2)]
    kappas = [k for k in kappas if not math.isnan(k)]
    hits = [x[i] == _majority(x[:i] + x[i + 1:]) for x in labelled for i in range(len(x))]
    return AnnotatorAgreement(len(labelled), float(np.mean(kappas)) if kappas else NAN, len(kappas),
                              rate(sum(hits), len(hits)), len(hits))


def pairwise_agreement(compare_records: Sequence[Record], method: str, *, bootstrap: int = 0,
                       seed: int = 0) -> PairwiseAgreement:
    """Return the agreement of one aggregation's verdicts with each pair's ``human`` label.

    Accuracy with ties, accuracy over pairs where neither side ties, 3-class Cohen's kappa, the
    confusion matrix, and the annotators' own agreement as a ceiling.

    Args:
        compare_records: Compare records.
        method: Aggregation method.
        bootstrap: Resamples for the 95% intervals of accuracy and kappa (0: none).
        seed: Bootstrap seed.
    """
    records = dedupe_pairs(compare_records)
    per_item: dict[str, Floats] = {}
    for rec in records:
        human, verdict = rec.get("human"), verdict_of(rec, method)
        if human is None or verdict is None:
            continue
        if human not in SIGN:
            raise ValueError(f"unknown human label {human!r} in item {rec.get('item_id')!r}")
        conf = per_item.setdefault(str(rec["item_id"]), np.zeros((3, 3), dtype=np.float64))
        conf[VERDICTS.index(human), VERDICTS.index(verdict)] += 1
    stacked = np.array(list(per_item.values()), dtype=np.float64).reshape(-1, 3, 3)
    total = stacked.sum(axis=0)
    n, strict = int(total.sum()), total[:2, :2]
    hits = np.trace(stacked, axis1=1, axis2=2)
    return PairwiseAgreement(
        method, n, rate(float(np.trace(total)), n), int(strict.sum()), rate(float(np.trace(strict)), strict.sum()),
        float(kappa_of_confusion(total)), len(per_item), tuple((int(r[0]), int(r[1]), int(r[2])) for r in total),
        annotator_agreement(records),
        bootstrap_ratio(hits, stacked.sum(axis=(1, 2)), bootstrap=bootstrap, seed=seed),
        _bootstrap_kappa(stacked, bootstrap=bootstrap, seed=seed))


def score_agreement(score_records: Sequence[Record], method: str, *, bootstrap: int = 0,
                    seed: int = 0) -> ScoreAgreement:
    """Return Spearman and Kendall (tau-b) correlations of a method's scores with ``human_score``.

    Within each item, averaged over items where both sides vary, and pooled over all responses with
    both a score and a human score.

    Args:
        score_records: Score records of one scale.
        method: Scoring method.
        bootstrap: Resamples for the 95% interval of the mean within-item Spearman (0: none).
        seed: Bootstrap seed.
    """
    by_item: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for rec in dedupe_scores(score_records):
        score, human = score_value(rec, method), finite(rec.get("human_score"))
        if score is not None and human is not None:
            xs, ys = by_item[str(rec["item_id"])]
            xs.append(score)
            ys.append(human)
    per_item = [_small_rank_correlations(x, y) for x, y in by_item.values()]
    rhos = np.array([rho for rho, _ in per_item if not math.isnan(rho)], dtype=np.float64)
    taus = [tau for rho, tau in per_item if not math.isnan(rho)]
    all_x = [v for x, _ in by_item.values() for v in x]
    all_y = [v for _, y in by_item.values() for v in y]
    from scipy import stats  # type: ignore[import-untyped, unused-ignore]

    return ScoreAgreement(
        method, float(rhos.mean()) if rhos.size else NAN, float(np.mean(taus)) if taus else NAN, int(rhos.size),
        len(by_item), correlation(stats.spearmanr, all_x, all_y), correlation(stats.kendalltau, all_x, all_y),
        len(all_x), bootstrap_ratio(rhos, np.ones_like(rhos), bootstrap=bootstrap, seed=seed))


def _bootstrap_kappa(confusions: Floats, *, bootstrap: int, seed: int) -> CI:
    """Percentile 95% interval of Cohen's kappa, resampling per-item (items, 3, 3) confusions."""
    confusions = confusions[confusions.sum(axis=(1, 2)) > 0]
    if bootstrap <= 0 or len(confusions) == 0:
        return NO_CI
    weights = resample_counts(len(confusions), bootstrap, seed)
    return percentile_ci(kappa_of_confusion((weights @ confusions.reshape(-1, 9)).reshape(bootstrap, 3, 3)))


__all__ = ["AnnotatorAgreement", "PairwiseAgreement", "ScoreAgreement", "annotator_agreement", "cohen_kappa",
           "pairwise_agreement", "score_agreement"]
