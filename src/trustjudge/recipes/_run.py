"""Running a recipe: judge the items with its mode, options and prompts, then compute its metric (and audit)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._judge import Judge
from ..audit._stats import finite
from ..io._items import Item
from ..modes._audits import checklist_audit, claims_audit, criteria_audit
from ._metrics import MetricResult, compute, get_metric
from ._recipe import Part, Recipe

__all__ = ["RecipeRun", "audit_recipe", "run_recipe"]


@dataclass
class RecipeRun:
    """A recipe's records, its metric over them, and (when asked) its audit."""

    recipe: Recipe
    records: list[dict[str, Any]]
    result: MetricResult
    audit: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, MetricResult] = field(default_factory=dict)
    """A recipe with parts: each part's metric over its records (``result`` combines them)."""

    def to_dict(self) -> dict[str, Any]:
        return {"recipe": self.recipe.to_dict(), "result": self.result.to_dict(),
                **({"parts": {name: r.to_dict() for name, r in self.parts.items()}} if self.parts else {}),
                **({"audit": self.audit} if self.audit else {})}


def recipe_judge(recipe: Recipe, judge: str = "mock/hash", **kwargs: Any) -> Judge:
    """A judge with the recipe's settings and prompts (``kwargs``: other ``Judge`` arguments, e.g. ``store``)."""
    return Judge(judge, **{**recipe.judge_kwargs(), **kwargs})


def run_recipe(recipe: Recipe, items: Sequence[Item], judge: Judge, *, bootstrap: int = 1000, seed: int = 0,
               audit: bool = False, progress: Callable[[int], None] | None = None) -> RecipeRun:
    """Judge ``items`` as ``recipe`` says with ``judge`` (built with :meth:`Recipe.judge_kwargs`: see
    :func:`recipe_judge`), then its metric with a bootstrap interval; ``audit``: also its checks."""
    if recipe.parts:
        return _run_parts(recipe, items, judge, bootstrap=bootstrap, seed=seed, progress=progress)
    task = judge.task(recipe.mode, **recipe.options)
    records = [r.to_dict() for r in judge.run(task, items, progress=progress)]
    result = compute(get_metric(recipe.metric), records, recipe.metric_params, bootstrap=bootstrap, seed=seed,
                     items={item.id: item for item in items}, by=recipe.by)
    run = RecipeRun(recipe, records, result)
    if audit:
        run.audit = audit_recipe(recipe, items, judge, records, bootstrap=bootstrap, seed=seed)
    return run


def _run_parts(recipe: Recipe, items: Sequence[Item], judge: Judge, *, bootstrap: int, seed: int,
               progress: Callable[[int], None] | None) -> RecipeRun:
    """Each part judged (parts with the same mode and options once), its metric, then the weighted mean of the
    parts' values per response. The records are each run's, with ``part`` naming the parts they serve."""
    runs: dict[str, tuple[list[Part], list[dict[str, Any]]]] = {}
    for part in recipe.parts:
        key = repr((part.mode, sorted(part.options.items())))
        if key not in runs:
            task = judge.task(part.mode, **part.options)
            runs[key] = ([], [r.to_dict() for r in judge.run(task, items, progress=progress)])
        runs[key][0].append(part)
    by_part = {part.name: records for parts, records in runs.values() for part in parts}
    by_id = {item.id: item for item in items}
    results = {part.name: compute(get_metric(part.metric), by_part[part.name], part.metric_params,
                                  bootstrap=bootstrap, seed=seed, items=by_id, by=recipe.by) for part in recipe.parts}
    weights = dict(recipe.metric_params.get("weights") or {}) or {part.name: 1.0 for part in recipe.parts}
    combined: dict[tuple[str, str], dict[str, Any]] = {}
    for part in recipe.parts:
        w = float(weights.get(part.name, 0.0))
        if w <= 0:
            continue
        metric, params = get_metric(part.metric), get_metric(part.metric).checked(part.metric_params, "metric")
        latest = {(str(r.get("item_id")), str(r.get("response_id"))): r for r in by_part[part.name]}
        for pair, r in latest.items():
            row = combined.setdefault(pair, {"item_id": r.get("item_id"), "response_id": r.get("response_id"),
                                            "system": r.get("system"), "total": 0.0, "weight": 0.0, "missing": []})
            item = by_id.get(str(r.get("item_id")))
            seen = {**r, "item": item} if item is not None else r
            v = finite(metric.value(seen, params)) if r.get("unscored") is None else None
            if v is None:
                row["missing"].append(part.name)
            else:
                row["total"] += w * v
                row["weight"] += w
    rows = [{"item_id": row["item_id"], "response_id": row["response_id"], "system": row["system"],
             "value": None if row["missing"] else row["total"] / row["weight"],
             "unscored": f"unscored_part: {', '.join(dict.fromkeys(row['missing']))}" if row["missing"] else None}
            for row in combined.values()]
    result = compute(get_metric(recipe.metric), rows, recipe.metric_params, bootstrap=bootstrap, seed=seed,
                     items=by_id, by=recipe.by)
    records = [{**r, "part": ",".join(p.name for p in parts)} for parts, records in runs.values() for r in records]
    return RecipeRun(recipe, records, result, parts=results)


def audit_recipe(recipe: Recipe, items: Sequence[Item], judge: Judge, records: list[dict[str, Any]], *,
                 bootstrap: int = 1000, seed: int = 0) -> dict[str, Any]:
    """The recipe's checks: ``consistency`` (the TrustJudge audit: score-comparison conflict ratio and
    non-transitivity, on the recipe's scale) and ``mode`` (the mode's own audit of the records)."""
    out: dict[str, Any] = {}
    for check in recipe.audit:
        if check == "consistency":
            scale = int(recipe.judge.get("scale", judge.scale.points))
            audited = judge.audit(list(items), scales=(scale,), bootstrap=bootstrap, seed=seed)
            out["consistency"] = audited.report.to_dict()
        elif recipe.mode == "checklist":
            labels = getattr(judge.task(recipe.mode, **recipe.options), "labels")  # noqa: B009 (Task has no labels)
            out["mode"] = checklist_audit(records, labels=labels)
        elif recipe.mode == "claims":
            out["mode"] = claims_audit(records)
        elif recipe.mode == "criteria":
            out["mode"] = criteria_audit(records)
    return out

