"""The per-question conflicts of the audit report: the pairs whose verdict contradicts the two scores.

:func:`conflicts_by_item` finds them by the conflict ratio's rule, so their counts add up to the audit's;
:func:`_conflicts_html` shows the items with the most conflicts, each with its largest contradictions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..audit._stats import dedupe_pairs, dedupe_scores
from ._html import _e, _fmt, _num, _short

if TYPE_CHECKING:
    from ..audit._audit import AuditRun
    from ..io._items import Item

MAX_CONFLICT_ITEMS = 50
MAX_CONFLICTS_PER_ITEM = 12


@dataclass(frozen=True)
class _Conflict:
    first: str
    second: str
    score_first: float
    score_second: float
    verdict: str
    probabilities: Mapping[str, Any] | None
    first_system: str | None
    second_system: str | None


def conflicts_by_item(run: AuditRun, *, scale: int | None = None, score_method: str = "trustjudge",
                      aggregation: str = "likelihood") -> tuple[int | None, dict[str, list[_Conflict]]]:
    """Return the scale used and, per item (input order), the pairs whose verdict contradicts the scores.

    The rule is the conflict ratio's (:func:`trustjudge.audit._consistency.conflict_ratio`) with the report's
    delta, so the counts add up to the audit's ``conflict[(scale, score_method, aggregation)].conflicts``.
    Default scale: 100 when present, else the largest.
    """
    scales = sorted(run.score_records)
    if scale is None:
        scale = 100 if 100 in scales else (scales[-1] if scales else None)
    if scale is None or scale not in run.score_records:
        return scale, {}
    delta = run.report.delta
    scores = {}
    for r in dedupe_scores(run.score_records[scale]):
        value = None if r.get("unscored") is not None else _num((r.get("scores") or {}).get(score_method))
        scores[(str(r["item_id"]), str(r["response_id"]))] = value
    out: dict[str, list[_Conflict]] = {}
    for rec in dedupe_pairs(run.compare_records):
        item, first, second = str(rec["item_id"]), str(rec["first_id"]), str(rec["second_id"])
        verdict = None if rec.get("unscored") is not None else (rec.get("verdicts") or {}).get(aggregation)
        x, y = scores.get((item, first)), scores.get((item, second))
        if verdict not in ("first", "second", "tie") or x is None or y is None:
            continue
        sign = {"first": 1, "second": -1, "tie": 0}[str(verdict)]
        if (x > y + delta and sign <= 0) or (y > x + delta and sign >= 0) or (abs(x - y) <= delta and sign != 0):
            out.setdefault(item, []).append(_Conflict(first, second, x, y, str(verdict), rec.get("probabilities"),
                                                      rec.get("first_system"), rec.get("second_system")))
    return scale, out


def _conflicts_html(run: AuditRun, items: Sequence[Item] | None, max_items: int,
                    max_per_item: int = MAX_CONFLICTS_PER_ITEM) -> str:
    method, agg = "trustjudge", "likelihood"
    scale, found = conflicts_by_item(run, score_method=method, aggregation=agg)
    if scale is None:
        return '<p class="note">No score records: nothing to compare the verdicts with.</p>'
    total = sum(len(v) for v in found.values())
    result = run.report.conflict.get((scale, method, agg))
    counted = f" of {result.counted:,} pairs" if result is not None else ""
    intro = (f'<p class="note">Pairs whose <b>{agg}</b> verdict disagrees with the <b>{scale}-point {method}</b> '
             f"scores (tolerance delta {run.report.delta:g}): {total:,} conflicts{_e(counted)} in {len(found):,} "
             f"items")
    if not found:
        return intro + ".</p>"
    order = {item_id: i for i, item_id in enumerate(dict.fromkeys(str(r["item_id"]) for r in run.compare_records))}
    ranked = sorted(found, key=lambda item_id: (-len(found[item_id]), order.get(item_id, 0)))
    shown = ranked[:max_items]
    intro += (f"; the {len(shown)} items with the most conflicts are shown.</p>" if len(ranked) > len(shown)
              else ".</p>")
    by_id = {it.id: it for it in items or []}
    parts = [intro, ('<table class="conflicts"><thead><tr><th>item</th><th>pair (first vs second)</th>'
                     '<th class="num">scores (first / second)</th><th class="num">Δ score</th>'
                     f'<th>{_e(agg)} verdict</th><th class="num">P(first / second / tie)</th></tr></thead>')]

    def side(item: Item | None, rid: str, system: str | None) -> str:
        label = _e(rid) + (f' <span class="muted">({_e(system)})</span>' if system else "")
        if item is not None:
            try:
                text = item.response(rid).text
            except KeyError:
                text = ""
            if text:
                shown = f'<span class="resp">{_e(_short(text, 70))}</span>'
                return f'<span title="{_e(_short(text, 400))}">{label}{shown}</span>'
        return label

    for item_id in shown:
        item = by_id.get(item_id)
        every = found[item_id]
        # The largest contradictions first; a long tail is summarised in one line.
        conflicts = sorted(every, key=lambda c: -abs(c.score_first - c.score_second))[:max_per_item]
        rest = len(every) - len(conflicts)
        question = f'<span class="q">{_e(_short(item.question, 140))}</span>' if item is not None else ""
        parts.append('<tbody class="item-group">')
        for i, c in enumerate(conflicts):
            head = (f'<td class="item" rowspan="{len(conflicts) + (rest > 0)}"><b>{_e(item_id)}</b> '
                    f'<span class="muted">({len(every)})</span>{question}</td>') if i == 0 else ""
            winner = {"first": c.first, "second": c.second}.get(c.verdict)
            verdict = (f'<span class="v-{_e(c.verdict)}">{_e(c.verdict)}</span>'
                       + (f' <span class="muted">({_e(winner)} wins)</span>' if winner else ""))
            p = c.probabilities or {}
            probs = " / ".join(_fmt(p.get(k), 2) for k in ("first", "second", "tie")) if p else "–"
            parts.append(f"<tr>{head}<td>{side(item, c.first, c.first_system)} <span class=\"muted\">vs</span> "
                         f"{side(item, c.second, c.second_system)}</td>"
                         f'<td class="num">{c.score_first:.1f} / {c.score_second:.1f}</td>'
                         f'<td class="num conflict">{c.score_first - c.score_second:+.1f}</td>'
                         f"<td>{verdict}</td><td class=\"num\">{_e(probs)}</td></tr>")
        if rest:
            parts.append(f'<tr><td colspan="5" class="muted">… and {rest} more conflicting pairs with smaller '
                         "score differences</td></tr>")
        parts.append("</tbody>")
    parts.append("</table>")
    return "\n".join(parts)
