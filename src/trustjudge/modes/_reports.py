"""The report sections of the built-in modes' audits, as plain data (:mod:`._sections`).

Each function reads an audit dict of :mod:`._audits` (``criteria_audit``, ``checklist_audit``,
``claims_audit``; with ``grounding`` / ``sensitivity`` inside where they were run; missing keys and null
numbers are tolerated: an audit read back from JSON may lack any) and returns the sections the mode's
:meth:`~._base.Task.report_sections` hook gives; :mod:`trustjudge.report` draws them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..engine._scoring import AGGREGATIONS, SCORE_METHODS
from ._sections import (
    Bars,
    Bin,
    Block,
    Cell,
    Column,
    Group,
    Heading,
    Note,
    Reliability,
    Row,
    Section,
    Series,
    Table,
    count,
    fields_section,
    interval,
    mapping,
    number,
    of,
    real,
)

CRITERIA_KEYS = frozenset({"criteria", "aggregate_vs_human_overall", "wins_every_criterion", "grounding"})
CHECKLIST_KEYS = frozenset({"responses", "checks_with_human_labels", "calibration", "value_mae",
                            "conflict_ratio_vs_pairwise", "grounding"})
CLAIMS_KEYS = frozenset({"responses", "claims", "unscored_claims", "with_human_labels", "responses_unscored",
                         "supported_calibration", "label_agreement", "sensitivity"})
"""The audit fields each mode's sections draw (the rest go to "Other fields")."""


def _ordered(names: Iterable[str], known: Sequence[str]) -> list[str]:
    seen = list(dict.fromkeys(names))
    return [n for n in known if n in seen] + [n for n in seen if n not in known]


def _table(name: str, head: Sequence[tuple[str, bool]], groups: Iterable[tuple[str | None, Sequence[tuple[
        Sequence[Cell], bool]]]]) -> Table:
    return Table(tuple(Column(label, numeric) for label, numeric in head),
                 tuple(Group(tuple(Row(tuple(cells), hi) for cells, hi in rows), title) for title, rows in groups),
                 name)


def _metrics_table(rows: Sequence[tuple[str, Any, str]]) -> Table:
    """(metric, value, what it means) rows; integers print without decimals."""
    body = [([name, count(value) if isinstance(value, int) else number(value), meaning], False)
            for name, value, meaning in rows]
    return _table("metrics", [("metric", False), ("value", True), ("reading", False)], [(None, body)])


# -- calibration ------------------------------------------------------------------------------------------
def _bins(calibration: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out = []
    for b in calibration.get("reliability") or []:
        if isinstance(b, Mapping) and real(b.get("count")) and real(b.get("mean_prob")) is not None \
                and real(b.get("frequency")) is not None:
            out.append(b)
    return out


def _reliability_table(calibration: Mapping[str, Any], what: str) -> Block:
    rows: list[tuple[Sequence[Cell], bool]] = []
    for b in _bins(calibration):
        lo, hi = real(b.get("lo")), real(b.get("hi"))
        gap = (real(b["frequency"]) or 0.0) - (real(b["mean_prob"]) or 0.0)
        closing = "]" if hi is not None and hi >= 1.0 else ")"  # the last bin holds p = 1
        rows.append(([f"[{number(lo, 2)}, {number(hi, 2)}{closing}", count(b.get("count")),
                      number(b.get("mean_prob")), number(b.get("frequency")), f"{gap:+.3f}"], False))
    if not rows:
        return Note("No reliability bins (no judgments with human labels).")
    return _table("reliability", [("bin", False), ("count", True), (f"mean {what}", True),
                                  ("observed frequency", True), ("frequency − predicted", True)], [(None, rows)])


def _calibration_blocks(calibration: Mapping[str, Any], what: str, positive: str, extra: Sequence[tuple[
        str, Any, str]]) -> list[Block]:
    bins = tuple(Bin(real(b["mean_prob"]) or 0.0, real(b["frequency"]) or 0.0, int(real(b["count"]) or 0),
                     real(b.get("lo")), real(b.get("hi"))) for b in _bins(calibration))
    figure = Reliability(
        "plot-reliability", f"Reliability of {what}",
        f"Each point is one bin of {what} (equal-width bins of [0, 1], empty bins left out): the mean predicted "
        f"probability against the share of human {positive} labels, labelled with its count; the dashed diagonal "
        "is perfect calibration and the orange segments the gaps. Below: judgments per bin.",
        what, positive, bins, real(calibration.get("ece")), real(calibration.get("brier")))
    rows = [("Brier score", calibration.get("brier"), "mean squared error of the probability (lower is better)"),
            ("ECE", calibration.get("ece"), "expected calibration error over the bins (lower is better)"),
            ("AUROC", calibration.get("auroc"), "P(a positive outranks a negative); 0.5 is chance"),
            ("accuracy", calibration.get("accuracy"), f"{what} > 0.5 against the human label"),
            *([("Cohen's kappa", calibration["kappa"], "chance-corrected agreement of the thresholded decision")]
              if "kappa" in calibration else []),
            ("base rate", calibration.get("base_rate"), f"share of human {positive} labels"),
            *extra]
    return [figure, Heading("Calibration metrics"), _metrics_table(rows), Heading("Reliability bins"),
            _reliability_table(calibration, what)]


# -- consistency and agreement ----------------------------------------------------------------------------
_CR_HEAD = [("", False), ("CR", True), ("95% CI", True), ("conflicts / pairs", True), ("tied verdicts", True),
            ("excluded", True), ("items", True)]
_AGREEMENT_HEAD = [("scoring method", False), ("Spearman pooled", True), ("Kendall pooled", True), ("n", True),
                   ("Spearman within item", True), ("Kendall within item", True), ("95% CI (within)", True),
                   ("items varying / all", True)]


def _cr_rows(results: Mapping[str, Any], order: Sequence[str], highlight: str) -> list[tuple[Sequence[Cell], bool]]:
    rows: list[tuple[Sequence[Cell], bool]] = []
    for name in _ordered(results, order):
        r = mapping(results[name])
        rows.append(([name, number(r.get("ratio")), interval(r.get("ci")), of(r.get("conflicts"), r.get("counted")),
                      count(r.get("ties_in_verdicts")), count(r.get("excluded")), count(r.get("items"))],
                     name == highlight))
    return rows


def _agreement_rows(agreement: Mapping[str, Any]) -> list[tuple[Sequence[Cell], bool]]:
    rows: list[tuple[Sequence[Cell], bool]] = []
    for method in _ordered(agreement, SCORE_METHODS):
        a = mapping(agreement[method])
        rows.append(([method, number(a.get("spearman_pooled")), number(a.get("kendall_pooled")), count(a.get("n")),
                      number(a.get("spearman_mean")), number(a.get("kendall_mean")), interval(a.get("spearman_ci")),
                      of(a.get("items"), a.get("items_total"))], method == "trustjudge"))
    return rows


def _agreement_plot(criteria: Mapping[str, Any]) -> Bars:
    names = [n for n, entry in criteria.items() if mapping(entry).get("human_agreement")]
    methods = _ordered((m for n in names for m in mapping(mapping(criteria[n]).get("human_agreement"))),
                       SCORE_METHODS)
    series = tuple(Series(method, tuple(real(mapping(mapping(mapping(criteria[n]).get("human_agreement"))
                                                     .get(method)).get("spearman_pooled")) for n in names))
                   for method in methods)
    return Bars("plot-agreement", "Agreement per criterion",
                "Pooled Spearman correlation of each criterion's scores with its human scores, per scoring method.",
                "Agreement with the human per-criterion scores (pooled Spearman, higher is better)", tuple(names),
                series, xlabel="criterion", ylabel="Spearman rho", ylim=(-1.05, 1.05), legend="scoring method")


def _ntr_sort(s: str) -> tuple[bool, float, str]:
    x = real(s)
    return x is None, x or 0.0, s


def criteria_sections(audit: Mapping[str, Any]) -> list[Section]:
    """The criteria audit: agreement per criterion, then consistency (CR, NTR_k, wins every criterion)."""
    criteria = mapping(audit.get("criteria"))
    agreement: list[Block] = []
    with_humans = [n for n, e in criteria.items() if mapping(e).get("human_agreement")]
    if with_humans:
        agreement.append(_agreement_plot(criteria))
        agreement.append(Note("Spearman and Kendall (tau-b) pooled over every response, and averaged within items "
                              "where both sides vary. Highlighted: TrustJudge's distribution-sensitive score."))
        agreement.append(_table("agreement", _AGREEMENT_HEAD, [
            (f"criterion {n}", _agreement_rows(mapping(mapping(criteria[n]).get("human_agreement"))))
            for n in with_humans]))
    else:
        agreement.append(Note("No criterion has human scores."))
    overall = mapping(audit.get("aggregate_vs_human_overall"))
    if overall:
        agreement.append(Heading("Weighted aggregate against the human overall score"))
        agreement.append(_table("agreement", _AGREEMENT_HEAD, [(None, _agreement_rows(overall))]))

    consistency: list[Block] = []
    counts: list[tuple[Sequence[Cell], bool]] = [
        ([n, count(mapping(e).get("judged")), count(mapping(e).get("unscored"))], False) for n, e in criteria.items()]
    if counts:
        consistency.append(_table("judged", [("criterion", False), ("judged", True), ("unscored", True)],
                                  [(None, counts)]))
    with_cr = [n for n, e in criteria.items() if mapping(e).get("conflict_ratio")]
    if with_cr:
        consistency.append(Heading("Conflict ratio (CR)"))
        consistency.append(Note("Share of the criterion's pairwise verdicts that contradict its pointwise scores, per "
                                "scoring method (lower is better)."))
        head = [("scoring method", False), *_CR_HEAD[1:]]
        consistency.append(_table("cr", head, [(f"criterion {n}", _cr_rows(
            mapping(mapping(criteria[n]).get("conflict_ratio")), SCORE_METHODS, "trustjudge")) for n in with_cr]))
    with_ntr = [n for n, e in criteria.items() if mapping(e).get("ntr")]
    if with_ntr:
        consistency.append(Heading("Non-transitivity (NTR_k)"))
        consistency.append(Note("Share of k-response subsets whose per-criterion verdicts fit no weak order (lower is "
                                "better); read it next to the tie rate of the verdicts."))
        groups = []
        for n in with_ntr:
            ntr = mapping(mapping(criteria[n]).get("ntr"))
            rows: list[tuple[Sequence[Cell], bool]] = []
            for k in sorted(ntr, key=_ntr_sort):
                r = mapping(ntr[k])
                judged, ties = real(r.get("judged")), real(r.get("ties"))
                tie_rate = ties / judged if judged and ties is not None else None
                rows.append(([f"NTR_{k}", number(r.get("ratio")), interval(r.get("ci")),
                              of(r.get("violating"), r.get("valid_subsets")), count(r.get("circular")),
                              count(r.get("equivalence")), number(tie_rate), count(r.get("items"))], False))
            groups.append((f"criterion {n}", rows))
        consistency.append(_table("ntr", [("k", False), ("NTR", True), ("95% CI", True),
                                          ("violating / subsets", True), ("circular", True), ("equivalence", True),
                                          ("tie rate", True), ("items", True)], groups))
    if not with_cr and not with_ntr:
        consistency.append(Note("No per-criterion pairwise verdicts were audited."))
    wins = mapping(audit.get("wins_every_criterion"))
    if wins:
        consistency.append(Heading("Wins every criterion, loses the aggregate"))
        consistency.append(Note("Pairs where one response wins every criterion's pairwise verdict, and how many of "
                                f"them the pointwise aggregate ({wins.get('method', 'trustjudge')}) or the pairwise "
                                "aggregate verdict give to the other response."))
        consistency.append(_table("wins", [("", False), ("pairs", True), ("share of sweeps", True)], [(None, [
            (["won on every criterion", count(wins.get("pairs_won_on_every_criterion")), ""], False),
            (["lost the pointwise aggregate", count(wins.get("lost_pointwise_aggregate")),
              number(wins.get("share_lost_pointwise"))], False),
            (["lost the pairwise aggregate", count(wins.get("lost_pairwise_aggregate")),
              number(wins.get("share_lost_pairwise"))], False)])]))
    return [Section("agreement", "Agreement with human scores, per criterion", tuple(agreement)),
            Section("consistency", "Consistency per criterion: conflict ratio and transitivity", tuple(consistency)),
            *_appendix(audit, CRITERIA_KEYS)]


def criteria_facts(audit: Mapping[str, Any]) -> list[tuple[str, str]]:
    criteria = mapping(audit.get("criteria"))
    return [("criteria", str(len(criteria))),
            ("judgments", count(sum(real(mapping(e).get("judged")) or 0 for e in criteria.values())))]


def checklist_sections(audit: Mapping[str, Any]) -> list[Section]:
    """The checklist audit: calibration of P(pass), then the conflict ratio against pairwise verdicts."""
    calibration = mapping(audit.get("calibration"))
    sections = [Section("calibration", "Calibration of P(pass)", (
        Note("A check passes for the human when its human value is 1 (YES, FULL)."),
        *_calibration_blocks(calibration, "P(pass)", "pass",
                             [("mean P(pass)", calibration.get("mean_p_pass"), "compare with the base rate"),
                              ("value MAE", audit.get("value_mae"),
                               "mean |expected value − human value| per check")])))]
    cr = mapping(audit.get("conflict_ratio_vs_pairwise"))
    if cr:
        sections.append(Section("consistency", "Conflict ratio against holistic pairwise verdicts", (
            Note("Share of pairs whose holistic pairwise verdict contradicts the two responses' expected checklist "
                 "satisfaction, per aggregation (lower is better)."),
            _table("cr", [("aggregation", False), *_CR_HEAD[1:]], [(None, _cr_rows(cr, AGGREGATIONS, "likelihood"))]))))
    return [*sections, *_appendix(audit, CHECKLIST_KEYS)]


def checklist_facts(audit: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [("responses", count(audit.get("responses"))),
            ("checks with human labels", count(audit.get("checks_with_human_labels")))]


def claims_sections(audit: Mapping[str, Any]) -> list[Section]:
    """The claims audit: calibration of P(supported), sensitivity, unscored responses."""
    calibration = mapping(audit.get("supported_calibration"))
    labels = mapping(audit.get("label_agreement"))
    extra = [("label accuracy", labels.get("accuracy"), "most probable label against the human label"),
             ("label kappa", labels.get("kappa"), "Cohen's kappa of the most probable label")] if labels else []
    sections = [Section("calibration", "Calibration of P(supported)", (
        Note("A claim counts as positive when its human label is SUPPORTED (PARTIAL, UNSUPPORTED and UNKNOWN count "
             "as not supported)."),
        *_calibration_blocks(calibration, "P(supported)", "SUPPORTED", extra)))]
    sensitivity = mapping(audit.get("sensitivity"))
    if sensitivity:
        order, negation, extractor = (mapping(sensitivity.get(k)) for k in ("evidence_order", "negation", "extractor"))
        sections.append(Section("sensitivity", "Sensitivity", (
            Note("How much the verification moves when nothing it should depend on changes (lower is better "
                 "throughout)."),
            _table("sensitivity", [("probe", False), ("measure", False), ("value", True), ("n", True)], [(None, [
                (["evidence order reversed", "mean |shift| of P(supported)", number(order.get("mean_abs_shift")),
                  count(order.get("claims"))], False),
                (["evidence order reversed", "max |shift| of P(supported)", number(order.get("max_abs_shift")),
                  count(order.get("claims"))], False),
                (["negation", "share of claims supported with their negation", number(negation.get("share")),
                  count(negation.get("claims"))], False),
                (["negation", "claims supported with their negation", count(negation.get("both_supported")),
                  count(negation.get("claims"))], False),
                (["second extraction", "mean |difference| in claims per response",
                  number(extractor.get("mean_abs_count_difference")), count(extractor.get("responses"))],
                 False)])]))))
    unscored = mapping(audit.get("responses_unscored"))
    if unscored:
        sections.append(Section("unscored", "Unscored responses", (
            _table("unscored", [("reason", False), ("responses", True)],
                   [(None, [([str(k), count(v)], False) for k, v in unscored.items()])]),)))
    return [*sections, *_appendix(audit, CLAIMS_KEYS)]


def claims_facts(audit: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [("responses", count(audit.get("responses"))), ("claims", count(audit.get("claims"))),
            ("unscored claims", count(audit.get("unscored_claims"))),
            ("claims with human labels", count(audit.get("with_human_labels")))]


# -- what every mode's report ends with ---------------------------------------------------------------------
def grounding_section(grounding: Mapping[str, Any]) -> Section:
    """The grounding audit (:func:`._audits.grounding_audit`)."""
    rows: list[tuple[Sequence[Cell], bool]] = [
        (["responses compared", of(grounding.get("compared"), grounding.get("responses"))], False),
        (["mean shift (with − without grounding)", number(grounding.get("mean_shift"))], False),
        (["mean |shift|", number(grounding.get("mean_abs_shift"))], False),
        (["Spearman with human, with grounding", number(grounding.get("agreement_with_grounding"))], False),
        (["Spearman with human, without grounding", number(grounding.get("agreement_without_grounding"))], False)]
    wrong = mapping(grounding.get("wrong_profile"))
    if wrong:
        rows += [(["wrong profile: items / responses", of(wrong.get("items"), wrong.get("responses"))], False),
                 (["wrong profile: share of scores not dropping", number(wrong.get("share_not_dropping"))], False),
                 (["wrong profile: mean drop", number(wrong.get("mean_drop"))], False)]
    return Section("grounding", "Grounding", (
        Note(f"The same items judged without their profile/knowledge/evidence, and with each item's profile swapped "
             f"for another's (scoring method {grounding.get('method', 'trustjudge')}); under a wrong profile a "
             "personalised score should drop."),
        _table("grounding", [("measure", False), ("value", True)], [(None, rows)])), appendix=True)


def _appendix(audit: Mapping[str, Any], known: frozenset[str]) -> list[Section]:
    """The grounding section (where the audit has one), then the fields no section drew."""
    out = []
    grounding = mapping(audit.get("grounding"))
    if grounding:
        out.append(grounding_section(grounding))
    other = fields_section(audit, known)
    if other is not None:
        out.append(other)
    return out
