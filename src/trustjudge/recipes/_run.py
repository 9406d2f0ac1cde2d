"""Running a recipe: judge the items with its mode, options and prompts, then compute its metric (and audit)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._judge import Judge
from ..io._items import Item
from ..modes._audits import checklist_audit, claims_audit, criteria_audit
from ._metrics import MetricResult, compute, get_metric
from ._recipe import Recipe

__all__ = ["RecipeRun", "audit_recipe", "run_recipe"]


@dataclass
class RecipeRun:
    """A recipe's records, its metric over them, and (when asked) its audit."""

    recipe: Recipe
    records: list[dict[str, Any]]
    result: MetricResult
    audit: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"recipe": self.recipe.to_dict(), "result": self.result.to_dict(),
                **({"audit": self.audit} if self.audit else {})}


def recipe_judge(recipe: Recipe, judge: str = "mock/hash", **kwargs: Any) -> Judge:
    """A judge with the recipe's settings and prompts (``kwargs``: other ``Judge`` arguments, e.g. ``store``)."""
    return Judge(judge, **{**recipe.judge_kwargs(), **kwargs})


def run_recipe(recipe: Recipe, items: Sequence[Item], judge: Judge, *, bootstrap: int = 1000, seed: int = 0,
               audit: bool = False, progress: Callable[[int], None] | None = None) -> RecipeRun:
    """Judge ``items`` as ``recipe`` says with ``judge`` (built with :meth:`Recipe.judge_kwargs`: see
    :func:`recipe_judge`), then its metric with a bootstrap interval; ``audit``: also its checks."""
    task = judge.task(recipe.mode, **recipe.options)
    records = [r.to_dict() for r in judge.run(task, items, progress=progress)]
    result = compute(get_metric(recipe.metric), records, recipe.metric_params, bootstrap=bootstrap, seed=seed)
    run = RecipeRun(recipe, records, result)
    if audit:
        run.audit = audit_recipe(recipe, items, judge, records, bootstrap=bootstrap, seed=seed)
    return run


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

