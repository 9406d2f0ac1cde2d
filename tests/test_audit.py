"""Audit metrics against hand-computed values on small constructed records (no model, no files)."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import numpy as np
import pytest
from scipy import stats  # type: ignore[import-untyped, unused-ignore]

from trustjudge.audit import _audit as A

AGGS = ("single", "two_pass", "likelihood", "ppl")
METHODS = ("discrete", "geval", "expected", "trustjudge")


def cmp(item: str, first: str, second: str, verdict: str | None = None, *, method: str = "likelihood",
        verdicts: dict[str, str | None] | None = None, human: str | None = None, annotators: list[str] | None = None,
        orders: list[dict[str, Any]] | None = None, unscored: str | None = None) -> dict[str, Any]:
    """Build a compare record; ``verdict`` fills ``method`` unless ``verdicts`` gives them all."""
    all_verdicts: dict[str, str | None] = dict.fromkeys(AGGS)
    if unscored is None:
        all_verdicts.update(verdicts if verdicts is not None else {method: verdict})
    return {"item_id": item, "first_id": first, "second_id": second, "verdicts": all_verdicts,
            "probabilities": None, "orders": orders or [], "unscored": unscored, "human": human,
            "annotators": annotators or [], "first_system": None, "second_system": None}


def order(shown_first: str, a: float, b: float, c: float, unscored: str | None = None) -> dict[str, Any]:
    if unscored is not None:
        return {"shown_first": shown_first, "unscored": unscored}
    return {"shown_first": shown_first, "A": a, "B": b, "C": c, "mass": a + b + c, "unscored": None}


def sc(item: str, rid: str, value: float | None, *, scale: int = 5, method: str = "expected",
       human: float | None = None, unscored: str | None = None) -> dict[str, Any]:
    """Build a score record with one method's score (every method's when ``method`` is ``"all"``)."""
    scores: dict[str, float | None] = dict.fromkeys(METHODS)
    if unscored is None:
        scores.update(dict.fromkeys(METHODS, value) if method == "all" else {method: value})
    return {"item_id": item, "response_id": rid, "system": None, "scale": scale, "protocol": "direct",
            "scores": scores, "unscored": unscored, "human_score": human, "entropy": None, "label_mass": None}


def chain(item: str, relations: dict[tuple[str, str], str], method: str = "likelihood") -> list[dict[str, Any]]:
    return [cmp(item, a, b, v, method=method) for (a, b), v in relations.items()]


# -- transitivity ---------------------------------------------------------------------------------


def test_relation_mapping() -> None:
    assert [A.relation(v) for v in ("first", "second", "tie")] == [">", "<", "="]
    with pytest.raises(ValueError):
        A.relation("A")


def test_exactly_14_of_27_triples_violate_with_the_hand_enumerated_kinds() -> None:
    kinds = {t: A.triple_violation(*t) for t in itertools.product(">=<", repeat=3)}  # type: ignore[arg-type]
    circular = {t for t, kind in kinds.items() if kind == "circular"}
    equivalence = {t for t, kind in kinds.items() if kind == "equivalence"}
    # Circular: the two strict cycles, plus a tie composed with a strict relation that o3 reverses.
    assert circular == {(">", ">", "<"), ("<", "<", ">"), ("=", ">", "<"), ("=", "<", ">"), (">", "=", "<"),
                        ("<", "=", ">")}
    # Equivalence: two ties imply "=" but o3 is strict, or a strict composition that o3 calls a tie.
    assert equivalence == {("=", "=", ">"), ("=", "=", "<"), (">", ">", "="), ("<", "<", "="), ("=", ">", "="),
                           ("=", "<", "="), (">", "=", "="), ("<", "=", "=")}
    assert len(circular | equivalence) == 14
    # Opposite strict relations imply nothing, so any o3 is fine.
    assert all(kinds[(o1, o2, o3)] is None for o1, o2 in ((">", "<"), ("<", ">")) for o3 in ">=<")


def test_ntr3_circular_equivalence_and_consistent_items() -> None:
    records = (chain("cyc", {("a", "b"): "first", ("b", "c"): "first", ("a", "c"): "second"})
               + chain("eq", {("a", "b"): "tie", ("b", "c"): "tie", ("a", "c"): "first"})
               + chain("ok", {("a", "b"): "first", ("b", "c"): "tie", ("a", "c"): "first"}))
    res = A.ntr(records, "likelihood", 3)
    assert (res.violating, res.circular, res.equivalence, res.valid_subsets, res.items) == (2, 1, 1, 3, 3)
    assert res.ratio == pytest.approx(2 / 3)
    assert (res.judged, res.ties) == (9, 3)
    assert A.ntr(records[:3], "likelihood", 3).circular == 1
    assert A.ntr(records[3:6], "likelihood", 3).equivalence == 1
    assert A.ntr(records[6:], "likelihood", 3).violating == 0


FOUR = {("a", "b"): "first", ("b", "c"): "first", ("a", "c"): "second",  # a > b > c > a: a strict cycle
        ("a", "d"): "tie", ("b", "d"): "second", ("c", "d"): "second"}   # d = a, d > b, d > c


def test_ntr_on_a_four_response_item_by_hand() -> None:
    # Triangles: abc is the cycle (circular); abd: a = d > b (fine); acd: c > a = d > c (a tie is
    # involved: equivalence); bcd: d > b > c, d > c (fine). So NTR_3 = 2/4, and the only 4-subset
    # contains abc, which makes it circular.
    records = chain("q", FOUR)
    r3, r4 = A.ntr(records, "likelihood", 3), A.ntr(records, "likelihood", 4)
    assert (r3.violating, r3.circular, r3.equivalence, r3.valid_subsets) == (2, 1, 1, 4)
    assert (r4.violating, r4.circular, r4.equivalence, r4.valid_subsets) == (1, 1, 0, 1)
    assert math.isnan(A.ntr(records, "likelihood", 5).ratio)


def test_ntr_counts_only_subsets_whose_pairs_are_all_judged() -> None:
    records = [r for r in chain("q", FOUR) if {r["first_id"], r["second_id"]} != {"b", "d"}]
    records.append(cmp("q", "b", "d", unscored="context_overflow"))
    r3, r4 = A.ntr(records, "likelihood", 3), A.ntr(records, "likelihood", 4)
    assert (r3.violating, r3.valid_subsets) == (2, 2)  # only abc and acd are fully judged
    assert (r4.valid_subsets, r4.items) == (0, 0) and math.isnan(r4.ratio)
    with pytest.raises(ValueError):
        A.ntr(records, "likelihood", 2)


def test_a_pair_stored_in_reverse_is_flipped() -> None:
    base = {("a", "b"): "first", ("b", "c"): "first"}
    # (c, a) with "second": a beats c, consistent with a > b > c.
    consistent = chain("q", {**base, ("c", "a"): "second"})
    # (c, a) with "first": c beats a, a cycle.
    cycle = chain("q", {**base, ("c", "a"): "first"})
    assert A.ntr(consistent, "likelihood", 3).violating == 0
    assert A.ntr(cycle, "likelihood", 3).circular == 1


def test_subset_kind_does_not_depend_on_response_order() -> None:
    # x = y, y > z, z > x: a cycle through one tie. triple_violation labels its orientations differently;
    # per subset it is always equivalence, and a strict cycle is always circular.
    tie_cycle = {("x", "y"): "tie", ("y", "z"): "first", ("z", "x"): "first"}
    strict_cycle = {("x", "y"): "first", ("y", "z"): "first", ("z", "x"): "first"}
    for perm in itertools.permutations("xyz"):
        rename = dict(zip("xyz", perm, strict=True))
        for rels, kind in ((tie_cycle, "equivalence"), (strict_cycle, "circular")):
            renamed = {(rename[a], rename[b]): v for (a, b), v in rels.items()}
            records = sorted(chain("q", renamed), key=lambda r: (r["first_id"], r["second_id"]))
            res = A.ntr(records, "likelihood", 3)
            assert (res.violating, getattr(res, kind)) == (1, 1), (perm, kind)


def test_ntr_skips_items_with_too_many_subsets() -> None:
    records = [cmp("q", f"r{i}", f"r{j}", "first") for i, j in itertools.combinations(range(8), 2)]
    assert A.ntr(records, "likelihood", 4, max_subsets=69).skipped_items == 1  # C(8, 4) = 70
    full = A.ntr(records, "likelihood", 4)
    assert (full.valid_subsets, full.violating, full.skipped_items) == (70, 0, 0)


# -- conflict ratio ---------------------------------------------------------------------------------


def cr_case() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    scores = [sc("q", "r1", 3.0), sc("q", "r2", 3.2), sc("q", "r3", 4.0), sc("q", "r4", 4.0), sc("q", "r5", 3.1),
              sc("q", "r6", None, unscored="no_label_mass")]
    pairs = [cmp("q", "r1", "r2", "tie"),      # gap 0.2: conflicts at delta 0 only
             cmp("q", "r2", "r3", "first"),    # r3 higher but r2 wins: conflicts at every delta below 0.8
             cmp("q", "r3", "r4", "tie"),      # equal scores, tie: never conflicts
             cmp("q", "r1", "r3", "second"),   # gap 1.0, r3 wins: conflicts once delta >= 1 calls it a tie
             cmp("q", "r5", "r2", "second"),   # gap 0.1, r2 wins: conflicts once delta >= 0.1
             cmp("q", "r1", "r6", "first"),    # r6 unscored: excluded
             cmp("q", "r4", "r5", unscored="truncated")]  # no verdict: excluded
    return scores, pairs


def test_conflict_ratio_with_ties_and_tolerance() -> None:
    scores, pairs = cr_case()
    res = A.conflict_ratio(scores, pairs, "expected", "likelihood")
    assert (res.conflicts, res.counted, res.ties_in_verdicts, res.excluded, res.items) == (2, 5, 2, 2, 1)
    assert res.ratio == pytest.approx(0.4)
    sweep = A.delta_sweep(scores, pairs, "expected", "likelihood", [0.0, 0.25, 0.9, 1.0])
    # 0.25: (r1,r2) becomes a tie, (r5,r2) a conflict; 0.9: (r2,r3) is a tie zone with a winner (still
    # conflicts); 1.0: (r1,r3) too.
    assert [r.conflicts for r in sweep] == [2, 2, 2, 3]
    assert [r.delta for r in sweep] == [0.0, 0.25, 0.9, 1.0]


def test_conflict_ratio_counts_every_conflict_condition() -> None:
    scores = [sc("q", "x", 2.0), sc("q", "y", 1.0)]
    conflicts = {v: A.conflict_ratio(scores, [cmp("q", "x", "y", v)], "expected", "likelihood").conflicts
                 for v in ("first", "second", "tie")}
    assert conflicts == {"first": 0, "second": 1, "tie": 1}
    # The same pair stored as (y, x): the verdict's meaning flips with it.
    flipped = {v: A.conflict_ratio(scores, [cmp("q", "y", "x", v)], "expected", "likelihood").conflicts
               for v in ("first", "second", "tie")}
    assert flipped == {"first": 1, "second": 0, "tie": 1}


def test_conflict_ratio_rejects_mixed_scales() -> None:
    with pytest.raises(ValueError):
        A.conflict_ratio([sc("q", "a", 1.0), sc("q", "b", 2.0, scale=100)], [], "expected", "likelihood")


def test_later_duplicate_records_replace_earlier_ones() -> None:
    scores = [sc("q", "x", 1.0), sc("q", "y", 2.0), sc("q", "x", 3.0)]
    pairs = [cmp("q", "x", "y", "second"), cmp("q", "y", "x", "second")]  # the newest says x wins
    res = A.conflict_ratio(scores, pairs, "expected", "likelihood")
    assert (res.counted, res.conflicts) == (1, 0)


# -- position, swap and length --------------------------------------------------------------------


def bias_pairs() -> list[dict[str, Any]]:
    return [
        # order 1: A (a wins); order 2 shows b first: A (b wins). Flip.
        cmp("q", "a", "b", "first", orders=[order("a", .7, .2, .1), order("b", .6, .3, .1)]),
        # order 1: B (d wins); order 2: A (d wins). No flip. Orders listed in reverse.
        cmp("q", "c", "d", "second", orders=[order("d", .8, .1, .1), order("c", .2, .7, .1)]),
        # order 1: C (tie); order 2: A (f wins). Flip.
        cmp("q", "e", "f", "tie", orders=[order("e", .3, .2, .5), order("f", .5, .3, .2)]),
        # order 2 failed: no swap verdict, but order 1 (A) still shows position.
        cmp("q", "g", "h", unscored="truncated", orders=[order("g", .9, .05, .05), order("h", 0, 0, 0, "truncated")]),
        # order 1: A (i wins); order 2 shows j first: B (i wins). No flip, though the labels differ.
        cmp("q", "i", "j", "first", orders=[order("i", .6, .3, .1), order("j", .2, .7, .1)]),
    ]


def test_swap_flip_rate_on_hand_made_pairs() -> None:
    res = A.swap_flip_rate(bias_pairs())
    assert (res.flips, res.pairs) == (2, 4)
    assert res.rate == pytest.approx(0.5)


def test_position_bias_per_order_and_pooled() -> None:
    res = A.position_bias(bias_pairs())
    # Order 1 labels: A, B, C, A, A. Order 2 labels: A, A, A, B.
    assert (res.order1.judged, res.order1.first_shown_wins, res.order1.ties) == (5, 3, 1)
    assert (res.order2.judged, res.order2.first_shown_wins, res.order2.ties) == (4, 3, 0)
    assert res.overall.first_shown_rate == pytest.approx(6 / 9)
    assert res.overall.tie_rate == pytest.approx(1 / 9)


def test_length_bias_against_scipy_and_by_hand() -> None:
    pairs = [cmp("q", "a", "b", "first"), cmp("q", "a", "c", "first"), cmp("q", "b", "c", "second"),
             cmp("q", "c", "d", "tie"), cmp("q", "a", "e", "first")]  # e has no length
    lengths = {("q", "a"): 300, ("q", "b"): 100, ("q", "c"): 200, ("q", "d"): 200}
    res = A.length_bias(pairs, lengths, "likelihood")
    signs, diffs = [1, 1, -1, 0], [200, 100, -100, 0]
    assert res.n == 4
    assert res.pearson == pytest.approx(stats.pearsonr(signs, diffs)[0])
    assert res.spearman == pytest.approx(stats.spearmanr(signs, diffs)[0])
    assert (res.longer_wins, res.strict_unequal) == (3, 3)
    assert math.isnan(A.length_bias(pairs[:1], lengths, "likelihood").pearson)


# -- agreement with humans --------------------------------------------------------------------------


def agreement_pairs() -> list[dict[str, Any]]:
    # human \ judge   first second tie
    #   first           3     1     0
    #   second          0     2     1
    #   tie             1     0     2
    # accuracy 7/10; margins 4,3,3 both ways: chance (16+9+9)/100 = .34; kappa (.7-.34)/.66 = 6/11.
    # Without ties: the 2x2 block [[3,1],[0,2]], 5 of 6 right.
    cells = {("first", "first"): 3, ("first", "second"): 1, ("second", "second"): 2, ("second", "tie"): 1,
             ("tie", "first"): 1, ("tie", "tie"): 2}
    pairs: list[dict[str, Any]] = []
    for (human, verdict), count in cells.items():
        for _ in range(count):
            pairs.append(cmp(f"q{len(pairs) % 3}", f"r{len(pairs)}", "z", verdict, human=human))
    pairs.append(cmp("q0", "r98", "z", "first"))  # no human label: not counted
    pairs.append(cmp("q0", "r99", "z", human="first", unscored="backend_error"))
    return pairs


def test_pairwise_accuracy_and_kappa_by_hand() -> None:
    res = A.pairwise_agreement(agreement_pairs(), "likelihood")
    assert res.n == 10 and res.items == 3
    assert res.accuracy == pytest.approx(0.7)
    assert res.kappa == pytest.approx(6 / 11)
    assert res.n_no_ties == 6
    assert res.accuracy_no_ties == pytest.approx(5 / 6)
    assert res.confusion == ((3, 1, 0), (0, 2, 1), (1, 0, 2))
    assert res.annotators is None


def test_cohen_kappa_edge_cases() -> None:
    assert A.cohen_kappa([("first", "first"), ("second", "second"), ("tie", "tie")]) == pytest.approx(1.0)
    assert math.isnan(A.cohen_kappa([("tie", "tie"), ("tie", "tie")]))  # chance agreement is 1
    assert math.isnan(A.cohen_kappa([]))
    # Always disagreeing on a balanced 2-class split: po = 0, pe = .5, kappa = -1.
    assert A.cohen_kappa([("first", "second"), ("second", "first")]) == pytest.approx(-1.0)


def test_annotator_ceiling_by_hand() -> None:
    pairs = [cmp("q", "a", "b", "first", human="first", annotators=["first", "first", "first"]),
             cmp("q", "a", "c", "first", human="first", annotators=["first", "second", "first"]),
             cmp("q", "b", "c", "first", human="second", annotators=["tie", "second", "second"]),
             cmp("q", "c", "d", "first", human="tie", annotators=["tie"])]  # one annotator: not used
    ann = A.pairwise_agreement(pairs, "likelihood").annotators
    assert ann is not None
    # Positions (0,1): po 1/3, pe 2/9 -> 1/7; (0,2): po 2/3, pe 4/9 -> 2/5; (1,2): same -> 2/5.
    assert ann.mean_kappa == pytest.approx((1 / 7 + 2 / 5 + 2 / 5) / 3)
    assert (ann.pairs, ann.annotator_pairs) == (3, 3)
    # Leave-one-out: pair 1 gives 3 hits; in pairs 2 and 3 every majority of the others is split (tie)
    # or unanimous against the label: 0 hits. 3 of 9.
    assert ann.loo_accuracy == pytest.approx(1 / 3)
    assert ann.loo_n == 9


def test_score_agreement_item_mean_vs_pooled() -> None:
    records = [sc("q1", "a", 1, human=1), sc("q1", "b", 2, human=3), sc("q1", "c", 3, human=2),
               sc("q2", "a", 1, human=3), sc("q2", "b", 2, human=2), sc("q2", "c", 3, human=1),
               sc("q3", "a", 1, human=2), sc("q3", "b", 5, human=2),   # humans tie: no within-item value
               sc("q2", "d", None, human=5, unscored="empty_response"), sc("q1", "d", 4)]  # no human score
    res = A.score_agreement(records, "expected")
    # q1: rank differences (0, -1, 1): rho = 1 - 6*2/(3*8) = .5; tau = (2 - 1)/3. q2: rho = tau = -1.
    assert res.spearman_mean == pytest.approx((0.5 - 1) / 2)
    assert res.kendall_mean == pytest.approx((1 / 3 - 1) / 2)
    assert (res.items, res.items_total, res.n) == (2, 3, 8)
    xs, ys = [1, 2, 3, 1, 2, 3, 1, 5], [1, 3, 2, 3, 2, 1, 2, 2]
    assert res.spearman_pooled == pytest.approx(stats.spearmanr(xs, ys)[0])
    assert res.kendall_pooled == pytest.approx(stats.kendalltau(xs, ys)[0])
    assert res.spearman_mean != pytest.approx(res.spearman_pooled)


def test_within_item_correlations_match_scipy_with_ties() -> None:
    rng = np.random.default_rng(4)
    records, rhos, taus = [], [], []
    for q in range(30):
        n = int(rng.integers(2, 9))
        xs, ys = rng.integers(1, 4, size=n), rng.integers(1, 6, size=n)  # few values: many ties
        records += [sc(f"q{q}", f"r{i}", float(x), human=float(y)) for i, (x, y) in enumerate(zip(xs, ys, strict=True))]
        if np.ptp(xs) > 0 and np.ptp(ys) > 0:
            rhos.append(stats.spearmanr(xs, ys)[0])
            taus.append(stats.kendalltau(xs, ys)[0])
    res = A.score_agreement(records, "expected")
    assert res.items == len(rhos) > 20
    assert res.spearman_mean == pytest.approx(np.mean(rhos), abs=1e-12)
    assert res.kendall_mean == pytest.approx(np.mean(taus), abs=1e-12)


def test_unscored_records_are_counted_by_reason() -> None:
    records = [sc("q", "a", None, unscored="no_label_mass"), sc("q", "b", None, unscored="no_label_mass"),
               sc("q", "c", None, unscored="truncated"), sc("q", "d", 3.0)]
    assert A.unscored_counts(records) == {"no_label_mass": 2, "truncated": 1}
    assert A.unscored_counts(cr_case()[1]) == {"truncated": 1}
    # A record marked unscored never counts, even if it carries (stale) verdicts.
    stale = cmp("q", "a", "b", "first") | {"unscored": "backend_error"}
    assert A.ntr([*chain("q", {("b", "c"): "first", ("a", "c"): "first"}), stale], "likelihood", 3).valid_subsets == 0


# -- bootstrap and the whole audit ------------------------------------------------------------------


def synthetic(n_items: int, seed: int, *, identical: bool = False) -> tuple[dict[int, list[dict[str, Any]]],
                                                                            list[dict[str, Any]]]:
    rng = np.random.default_rng(seed)
    scores: dict[int, list[dict[str, Any]]] = {5: [], 100: []}
    pairs: list[dict[str, Any]] = []
    for q in range(n_items):
        item = f"q{q}"
        rng_q = np.random.default_rng(seed) if identical else rng
        quality = rng_q.permutation(5).astype(float)
        for r in range(5):
            scores[5].append(sc(item, f"r{r}", round(quality[r] + rng_q.normal(0, 1)), scale=5, method="all",
                                human=quality[r]))
            value = float(quality[r] * 20 + rng_q.normal(0, 15))
            scores[100].append(sc(item, f"r{r}", value, scale=100, human=quality[r]) | {
                "scores": {"discrete": None, "geval": None, "expected": value, "trustjudge": value}})
        for a, b in itertools.combinations(range(5), 2):
            noisy = quality[a] - quality[b] + rng_q.normal(0, 1.5)
            verdict = "first" if noisy > 0.5 else "second" if noisy < -0.5 else "tie"
            human = "first" if quality[a] > quality[b] else "second"
            pairs.append(cmp(item, f"r{a}", f"r{b}", verdicts={m: verdict for m in AGGS}, human=human,
                             orders=[order(f"r{a}", .6, .3, .1), order(f"r{b}", .5, .2, .3)]))
    return scores, pairs


def test_bootstrap_is_seeded_and_contains_the_estimate() -> None:
    scores, pairs = synthetic(40, seed=3)
    one = A.audit(scores, pairs, bootstrap=500, seed=7)
    A._resample_counts.cache_clear()  # recompute the resamples rather than reuse the cached ones
    two = A.audit(scores, pairs, bootstrap=500, seed=7)
    other = A.audit(scores, pairs, bootstrap=500, seed=8)
    assert one.to_dict() == two.to_dict()
    assert one.to_dict() != other.to_dict()
    estimates = ([(r.ratio, r.ci) for r in one.conflict.values()] + [(r.ratio, r.ci) for r in one.ntr.values()]
                 + [(r.accuracy, r.accuracy_ci) for r in one.pairwise.values()]
                 + [(r.kappa, r.kappa_ci) for r in one.pairwise.values()]
                 + [(r.spearman_mean, r.spearman_ci) for r in one.scores.values()])
    assert len(estimates) == 6 * 4 + 3 * 4 + 4 + 4 + 6
    for value, (low, high) in estimates:
        assert low <= value <= high
        assert low < high


def test_bootstrap_has_zero_width_when_every_item_is_identical() -> None:
    scores, pairs = synthetic(15, seed=5, identical=True)
    report = A.audit(scores, pairs, bootstrap=200, seed=1)
    intervals = ([(r.ratio, r.ci) for r in report.conflict.values()] + [(r.ratio, r.ci) for r in report.ntr.values()]
                 + [(r.accuracy, r.accuracy_ci) for r in report.pairwise.values()]
                 + [(r.kappa, r.kappa_ci) for r in report.pairwise.values()])
    defined = [(value, ci) for value, ci in intervals if not math.isnan(value)]
    assert len(defined) >= 30
    for value, (low, high) in defined:
        assert low == high == pytest.approx(value, abs=1e-12)
    # Every item has the same within-item Spearman.
    res = A.score_agreement([r | {"item_id": f"q{i}"} for i in range(10) for r in
                             [sc("x", "a", 1, human=1), sc("x", "b", 2, human=3), sc("x", "c", 3, human=2)]],
                            "expected", bootstrap=200)
    assert res.spearman_ci == (0.5, 0.5)


def test_bootstrap_of_a_thousand_items() -> None:
    # Its speed is measured by bench/throughput.py (scale part), not by a timed test on a shared machine.
    rng = np.random.default_rng(0)
    den = rng.integers(1, 50, size=1000).astype(float)
    num = np.floor(den * rng.random(1000))
    low, high = A.bootstrap_ratio(num, den, bootstrap=1000, seed=0)
    assert low < num.sum() / den.sum() < high
    assert A.bootstrap_ratio(num, den, bootstrap=1000, seed=0) == (low, high)
    assert all(math.isnan(x) for x in A.bootstrap_ratio(num, np.zeros(1000), bootstrap=10))


def test_audit_report_covers_every_method_and_serialises() -> None:
    scores, pairs = synthetic(6, seed=2)
    scores[5].append(sc("q0", "r9", None, scale=5, unscored="no_label_mass"))
    pairs.append(cmp("q0", "r0", "r9", unscored="context_overflow"))
    lengths = {(r["item_id"], r["response_id"]): 10 * len(r["response_id"]) + int(r["response_id"][1:])
               for r in scores[5]}
    report = A.audit(scores, pairs, ks=(3, 4), lengths=lengths, bootstrap=50)
    assert set(report.conflict) == ({(5, m, a) for m in METHODS for a in AGGS}
                                    | {(100, m, a) for m in ("expected", "trustjudge") for a in AGGS})
    assert set(report.ntr) == {(a, k) for a in AGGS for k in (3, 4)}
    assert set(report.scores) == {(5, m) for m in METHODS} | {(100, "expected"), (100, "trustjudge")}
    assert set(report.length) == set(AGGS) and set(report.pairwise) == set(AGGS)
    assert (report.items, report.pairs) == (6, 61)
    assert report.unscored_scores == {5: {"no_label_mass": 1}, 100: {}}
    assert report.unscored_compare == {"context_overflow": 1}
    assert report.conflict[(5, "expected", "likelihood")].excluded == 1
    text = json.dumps(report.to_dict(), allow_nan=False)
    data = json.loads(text)
    assert data["unscored_compare"] == {"context_overflow": 1}
    assert data["conflict"]["5/expected/likelihood"]["excluded"] == 1
    assert data["ntr"]["likelihood/4"]["k"] == 4
    rows = report.rows()
    assert all(len(row) == 7 and isinstance(row[6], int) for row in rows)
    cr_rows = [row for row in rows if row[0] == "conflict"]
    assert len(cr_rows) == len(report.conflict)
    assert ("unscored", "compare", "context_overflow", 1.0) in [row[:4] for row in rows]
