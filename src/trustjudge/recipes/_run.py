"""Running a recipe: judge the items with its mode, options and prompts, then compute its metric (and audit)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._judge import Judge
from ..audit._stats import finite
from ..errors import InputError
from ..io._items import Check, Item
from ..io._rules import first_rule
from ..modes._base import AuditContext, Split, split_steps
from ..modes._registry import get_mode
from ..modes._templates import read_template
from ._answers import extract_answers
from ._execute import attempt_rows, execute_items, given_kinds
from ._fields import rubric_kind
from ._groups import group_items, merged_options
from ._metrics import MetricResult, compute, get_metric
from ._recipe import Part, Recipe

__all__ = ["RecipeRun", "audit_recipe", "prepare_items", "run_recipe"]


@dataclass
class RecipeRun:
    """A recipe's records, its metric over them, and (when asked) its audit."""

    recipe: Recipe
    records: list[dict[str, Any]]
    result: MetricResult
    audit: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, MetricResult] = field(default_factory=dict)
    """A recipe with parts: each part's metric over its records (``result`` combines them)."""
    readings: dict[str, MetricResult] = field(default_factory=dict)
    """The metric's hard (argmax) and soft (expected) readings, the published one (``result``) first; and,
    where the benchmark's code scores an unparsed answer (``unparsed``), ``convention``: that number."""

    part_readings: dict[str, dict[str, MetricResult]] = field(default_factory=dict)
    """A recipe with parts: each part's readings (hard and soft, its published one first)."""
    execution: dict[str, Any] = field(default_factory=dict)
    """``[input] execute``: the attempts run, how many executed, the pass rates and the failures by kind."""

    def to_dict(self) -> dict[str, Any]:
        published = next(iter(self.readings), "")
        return {"recipe": self.recipe.to_dict(), "prompt": self.recipe.prompt_used(), "result": self.result.to_dict(),
                **({"readings": {name: {"published": name == published, **r.to_dict()}
                                 for name, r in self.readings.items()}} if self.readings else {}),
                **({"parts": {name: {**r.to_dict(), **_readings_dict(self.part_readings.get(name, {}))}
                             for name, r in self.parts.items()}} if self.parts else {}),
                **({"execution": self.execution} if self.execution else {}),
                **({"audit": self.audit} if self.audit else {})}


def _readings_dict(readings: Mapping[str, MetricResult]) -> dict[str, Any]:
    if len(readings) < 2:
        return {}
    first = next(iter(readings))
    return {"readings": {name: {"published": name == first, **r.to_dict()} for name, r in readings.items()}}


def recipe_judge(recipe: Recipe, judge: str = "mock/hash", **kwargs: Any) -> Judge:
    """A judge with the recipe's settings and prompts (``kwargs``: other ``Judge`` arguments, e.g. ``store``)."""
    return Judge(judge, **{**recipe.judge_kwargs(), **kwargs})


def prepare_items(recipe: Recipe, items: Sequence[Item], file: str | None = None) -> list[Item]:
    """The items as the recipe judges them: checked for its required fields (:meth:`Recipe.check_items`, before
    any call), and with ``[input] checklist_from = "reference"`` one check per step of the reference (PuzzleWorld
    judges each reference step: does the response include it and reach its intermediate result?)."""
    recipe.check_items(items, file)
    if recipe.input.get("execute") == "response":
        for item in items:  # an item the benchmark executed: one kind per attempt, checked before any run
            given_kinds(item, file)
    if recipe.input.get("checklist_from") != "reference":
        return list(items)
    split: Split = "numbered" if recipe.input.get("split") == "numbered" else "lines"
    out = []
    for item in items:
        steps = split_steps(item.reference or "", split)
        if not steps:
            raise InputError("has no steps to judge against (the recipe asks one question per reference step)",
                             file=file, line=item.line, field="reference")
        checks = tuple(Check(f"step{i}", _step_question(i, len(steps), text, item.context))
                       for i, text in enumerate(steps, 1))
        out.append(dataclasses.replace(item, checklist=checks))
    return out


def _step_question(i: int, n: int, text: str, answer: str | None) -> str:
    """The check for reference step ``i`` of ``n``. As PuzzleWorld's scorer asks it (``src/judge_utils.py``,
    ``make_step_prompt``): each step, does the response include it with its intermediate result; the last one,
    does the response give the reference's final answer (``answer``: the item's context, the puzzle's solution)."""
    if i < n:
        return f"Does the response include reference step {i} and reach its intermediate result? Step {i}: {text}"
    given = f' ("{answer}")' if answer else ""
    return (f"Does the response give the reference solution's final answer{given}? (Reference step {i}, the last: "
            f"{text})")


def _by_rubric(recipe: Recipe, items: Sequence[Item]) -> list[tuple[str | None, list[Item]]]:
    """The items in groups by the rubric that judges them (``None``: the recipe's own template), in file order."""
    if not recipe.rubrics:
        return [(None, list(items))]
    groups: dict[str | None, list[Item]] = {}
    for item in items:
        value = item.fields.get(recipe.rubrics_by)
        key = str(value) if value is not None and str(value) in recipe.rubrics else None
        groups.setdefault(key, []).append(item)
    return list(groups.items())


def _with_rubric(judge: Judge, recipe: Recipe, value: str) -> Judge:
    """``judge`` (same backend, store and settings) with the rubric of ``value`` as its template of the mode's kind:
    the benchmark's own where it was read from a checkout (:attr:`Recipe.rubric_texts`), else the recipe's file."""
    kind = rubric_kind(recipe.mode)
    _ = judge.engine  # made before the copy, so that both share it: its stats count the rubric's calls too
    other = copy.copy(judge)
    template = read_template(recipe.rubric_texts.get(value) or str(recipe.rubrics[value]), f"{kind}.txt",
                             get_mode(recipe.mode).templates[kind].fields)
    changes: dict[str, Any] = {kind: template}
    other.prompts = dataclasses.replace(judge.prompts, **changes)
    return other


def run_recipe(recipe: Recipe, items: Sequence[Item], judge: Judge, *, bootstrap: int = 1000, seed: int = 0,
               audit: bool = False, progress: Callable[[int], None] | None = None) -> RecipeRun:
    """Judge ``items`` as ``recipe`` says with ``judge`` (built with :meth:`Recipe.judge_kwargs`: see
    :func:`recipe_judge`), then its metric with a bootstrap interval; ``audit``: also its checks."""
    items = prepare_items(recipe, items)
    if recipe.parts:
        return _run_parts(recipe, items, judge, bootstrap=bootstrap, seed=seed, progress=progress)
    executed: dict[str, Any] = {}
    if recipe.input.get("execute") == "response":
        items, executed = execute_items(items, judge.store)
    items, sent = extract_answers(recipe.answers, items)  # what the benchmark's code sends its judge
    task = judge.task(recipe.mode, **recipe.options)
    prompt = recipe.prompt_used()
    records: list[dict[str, Any]] = []
    for name, group in group_items(recipe.groups_by, recipe.groups, items) if recipe.groups else ():
        options = merged_options(recipe.options, recipe.groups[name]) if name is not None else recipe.options
        own = (recipe.groups[name]["options"].get("templates") or {}) if name is not None else {}
        used = {**(recipe.group_prompts.get(name or "") or ({"source": "recipe", "files": {
            k: Path(v).name for k, v in own.items()}} if own else prompt)), **({"group": name} if name else {})}
        records += [{**r.to_dict(), "prompt": used}
                    for r in judge.run(judge.task(recipe.mode, **options), group, progress=progress)]
    for value, group in _by_rubric(recipe, items) if not recipe.groups else ():
        if value is None:
            records += [{**r.to_dict(), "prompt": prompt} for r in judge.run(task, group, progress=progress)]
        else:
            ruled = _with_rubric(judge, recipe, value)
            own = recipe.rubric_prompts.get(value)
            name = f"the benchmark's {Path(own['file']).name}" if own else recipe.rubrics[value].name
            used = {**(own or prompt), "rubric": f"{recipe.rubrics_by}={value} ({name})"}
            records += [{**r.to_dict(), "prompt": used}
                        for r in ruled.run(ruled.task(recipe.mode, **recipe.options), group, progress=progress)]
    if sent:
        records = [{**r, "answer": sent[key]} if (key := (str(r.get("item_id")), str(r.get("response_id")))) in sent
                   else r for r in records]
    by_id = {item.id: item for item in items}
    scored = records
    if executed:
        kinds = executed["kinds"]
        records = [{**r, "execution": kinds.get((str(r.get("item_id")), str(r.get("response_id"))))}
                   for r in records]
        scored = attempt_rows(records, kinds)  # the metric reads one row per task: its first attempt that drew
    result = compute(get_metric(recipe.metric), scored, recipe.metric_params, bootstrap=bootstrap, seed=seed,
                     items=by_id, by=recipe.by)
    run = RecipeRun(recipe, records, result,
                    readings=readings(recipe.metric, recipe.metric_params, scored, result, by_id, recipe.by,
                                      bootstrap=bootstrap, seed=seed),
                    execution=executed.get("summary", {}))
    if recipe.ours_rules:
        name, ours = _ours_reading(recipe, task, items, scored, bootstrap=bootstrap, seed=seed)
        run.readings[name] = ours
    if audit:
        run.audit = audit_recipe(recipe, items, judge, records, bootstrap=bootstrap, seed=seed)
    return run


def _ours_reading(recipe: Recipe, task: Any, items: Sequence[Item], records: list[dict[str, Any]], *,
                  bootstrap: int, seed: int) -> tuple[str, MetricResult]:
    """The reading ``ours (rule ids)``: the published parameters on the records with each judged response that
    one of the recipe's ``[[ours_rules]]`` fires on given that rule's record instead (the benchmark judged it)."""
    by_id = {item.id: item for item in items}
    responses = {(item.id, r.id): (item, r) for item in items for r in item.responses}
    changed = []
    for r in records:
        found = responses.get((str(r.get("item_id")), str(r.get("response_id"))))
        rule = first_rule(recipe.ours_rules, *found) if found is not None and r.get("rule") is None else None
        if rule is not None and found is not None:
            r = {**r, **task.rule_record(found[0], found[1], rule, str(r.get("judge"))).to_dict()}
        changed.append(r)
    ids = ", ".join(rule.id for rule in recipe.ours_rules)
    return f"ours ({ids})", compute(get_metric(recipe.metric), changed, recipe.metric_params, bootstrap=bootstrap,
                                    seed=seed, items=by_id, by=recipe.by)


def readings(metric_name: str, params: Mapping[str, Any], records: list[dict[str, Any]], result: MetricResult,
             items: Mapping[str, Item], by: str = "", *, bootstrap: int, seed: int) -> dict[str, MetricResult]:
    """The published reading (``result``, the recipe's own parameters) first, then the metric's other reading
    (hard beside soft), then ``convention`` where ``unparsed`` gives the benchmark's score for an unparsed answer."""
    metric = get_metric(metric_name)
    mine = metric.reading_of(params)
    out: dict[str, MetricResult] = {mine or "published": result}
    for name, overrides in metric.readings.items():
        if name != mine:
            out[name] = compute(metric, records, {**params, **overrides}, bootstrap=bootstrap, seed=seed,
                                items=items, by=by)
    fill = params.get("unparsed")
    if isinstance(fill, (int, float)) and not isinstance(fill, bool):
        value = (float(fill) + float(params.get("offset", 0.0))) * float(params.get("factor", 1.0))
        out[f"convention (unparsed = {fill:g})"] = compute(metric, records, params, bootstrap=bootstrap, seed=seed,
                                                          items=items, by=by, fill=value)
    return out


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
    prompt = recipe.prompt_used()
    records = [{**r, "part": ",".join(p.name for p in parts), "prompt": prompt} for parts, records in runs.values()
               for r in records]
    part_readings = {part.name: readings(part.metric, get_metric(part.metric).checked(part.metric_params, "metric"),
                                         by_part[part.name], results[part.name], by_id, recipe.by,
                                         bootstrap=bootstrap, seed=seed) for part in recipe.parts}
    return RecipeRun(recipe, records, result, parts=results, part_readings=part_readings)


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
        elif get_mode(recipe.mode).audits:  # the mode's own audit hook, on the records alone
            own = judge.task(recipe.mode, **recipe.options).audit(records, AuditContext.records_only(judge.task))
            if own is not None:
                out["mode"] = own
    return out

