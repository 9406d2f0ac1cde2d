"""A benchmark's judging protocol as a versioned file: ``recipe.toml`` beside its templates and README.

::

    name = "dit"                      # a word: what `trustjudge run dit` finds
    version = "1.0"
    benchmark = "DIT: ..."            # what it reproduces
    source = "https://..."            # where the protocol was read
    mode = "score"                    # a registered mode

    [templates]                       # optional: the prompts, relative to this file
    pointwise = "pointwise.txt"       # pointwise, pairwise, criterion, check, criterion_pair
    [options]                         # optional: the mode's options; [judge], audit, ...: docs/benchmarks.md
    labels = "TRUE=1,FALSE=0"
    [metric]                          # the benchmark's number (trustjudge.recipes.METRICS)
    name = "accuracy"

A protocol that needs several modes (PQR: criteria and claims) gives ``[parts.NAME]`` tables instead of
``mode`` and ``[options]``, each with its ``mode``, ``options`` and ``metric``; parts with the same mode and
options are judged once. Its own ``[metric]`` is then ``parts_mean``: per response the weighted mean of the
parts' values (``weights = {P = 1, ...}``, default equal), unscored where a part is.

The built-in recipes are the folders of this package; packages add recipes through the entry point group
``trustjudge.recipes`` (name: the recipe's; value: a recipe file's path, a :class:`Recipe` or a callable returning
either); any other recipe is loaded by its path. Every problem is an InputError naming the file and field.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

from .._plugins import describe, installed
from ..errors import ConfigError, InputError
from ..io._items import Item, parse_checklist, parse_criteria
from ..io._rules import parse_rules
from ..modes._prompts import LabelSet
from ..modes._registry import get_mode
from ..modes._templates import read_template
from ._answers import parse_answers
from ._fields import (
    RESPONSE_NEEDS,
    _benchmark_prompt,
    _by,
    _input,
    _inside,
    _provenance,
    _requires,
    _rubrics,
    _table,
    _text,
    _toml,
    rubric_kind,
    staged,
)
from ._groups import merged_options, parse_groups
from ._metrics import get_metric, summary_metric_params
from ._prompt import STAGES, BenchmarkPrompt, load_benchmark_prompt

__all__ = ["PLUGIN_GROUP", "RESPONSE_NEEDS", "Part", "Recipe", "get_recipe", "load_recipe", "recipe_names",
           "with_benchmark_dir", "with_benchmark_prompt"]

PLUGIN_GROUP = "trustjudge.recipes"
PLUGINS_ENV = "TRUSTJUDGE_RECIPE_PLUGINS"
HERE = Path(__file__).resolve().parent
FIELDS = {"name", "version", "benchmark", "source", "mode", "audit", "judge", "templates", "options", "metric",
          "description", "parts", "rules", "requires", "provenance", "published_judge", "benchmark_prompt", "input",
          "rubrics", "answers", "ours_rules", "groups"}
ITEM_NEEDS = ("reference", "context", "gold_claims", "sources", "profile", "evidence", "checklist", "criteria")
"""What ``requires`` may name of an item (any other word: an item field such as ``subset``, ``Item.fields``)."""
PART_FIELDS = {"mode", "options", "metric"}
JUDGE_FIELDS = {"protocol": str, "scale": int, "max_new_tokens": int, "temperature": float}
TEMPLATES = ("pointwise", "pairwise", "criterion", "check", "criterion_pair")
AUDITS = ("consistency", "mode")


@dataclass(frozen=True)
class Part:
    """One part of a several-mode recipe: a mode with its options, and the metric of its records."""

    name: str
    mode: str
    options: Mapping[str, Any]
    metric: str
    metric_params: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "mode": self.mode, "metric": {"name": self.metric, **self.metric_params}}


@dataclass(frozen=True)
class Recipe:
    """A benchmark's protocol: the mode and its options, the judge's settings and prompts, and the metric."""

    name: str
    version: str
    benchmark: str
    source: str
    mode: str
    metric: str
    metric_params: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    """The mode's options, converted (criteria, checks, label sets)."""
    judge: Mapping[str, Any] = field(default_factory=dict)
    templates: Mapping[str, Path] = field(default_factory=dict)
    audit: tuple[str, ...] = ()
    description: str = ""
    path: Path | None = None
    parts: tuple[Part, ...] = ()
    """The parts of a several-mode recipe (``mode`` then joins their modes with ``+``); empty: one mode."""
    by: str = ""
    """``[metric] by``: the item field (``subset``) the metric is also given per value of; empty: none."""
    requires: tuple[str, ...] = ()
    """The fields every item must give (``reference``, ``gold_claims``, ``responses.claims``, an item field):
    :meth:`check_items` refuses an item lacking one before any call."""
    provenance: Mapping[str, Any] = field(default_factory=dict)
    """``[provenance]``: where each protocol element was read (paper, repository, commit, and per element its file)."""
    published_judge: str = ""
    """The judge the benchmark's paper used, named as ``run --judge`` takes it (``openai/gpt-4o``)."""
    benchmark_prompt: Mapping[str, Any] = field(default_factory=dict)
    """``[benchmark_prompt]``: the file of the benchmark's repository that holds its own judge prompt, its sha256
    and how its placeholders map (:mod:`trustjudge.recipes._prompt`); empty: none is known."""
    input: Mapping[str, Any] = field(default_factory=dict)
    """``[input]``: how the benchmark's released files are read (``format``) and items prepared
    (``checklist_from``: one check per step of a field)."""

    rubrics: Mapping[str, Path] = field(default_factory=dict)
    """``[rubrics]``: one template per value of the item field ``rubrics_by`` (SC-Arena's per-task rubrics), each
    replacing the recipe's template of the mode's kind for those items; items of other values keep it."""
    rubrics_by: str = ""
    rubric_benchmark: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """``[rubrics.benchmark.VALUE]``: the benchmark's own prompt of each rubric (as ``[benchmark_prompt]``), read
    from the user's checkout by :func:`with_benchmark_dir`; empty: none is known."""
    rubric_texts: Mapping[str, str] = field(default_factory=dict)
    """Rubric texts by value that replace the files of :attr:`rubrics` (the benchmark's own, read from a checkout)."""
    rubric_prompts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Which benchmark file judged each rubric of :attr:`rubric_texts` (what the records say)."""
    template_texts: Mapping[str, str] = field(default_factory=dict)
    """Template texts by kind that replace the files of :attr:`templates` (a benchmark's own prompt)."""
    prompt: Mapping[str, Any] = field(default_factory=dict)
    """Which prompt judges: empty, the recipe's own files; else the benchmark's (file, sha256, whether it is
    the one the recipe was written for). Every record of a run says it (``prompt``)."""
    answers: Mapping[str, Any] = field(default_factory=dict)
    """``[answers]``: what the benchmark's code extracts of a model's output and sends its judge, per value of an
    item field (:mod:`trustjudge.recipes._answers`); empty: each response is judged whole."""
    groups_by: str = ""
    """``[groups] by``: the item field that picks an item's group (empty: no groups)."""
    groups: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """``[groups.NAME]``: items judged with other options of the mode (:mod:`trustjudge.recipes._groups`)."""
    group_prompts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Which benchmark file judged each group whose prompt was read from a checkout (what the records say)."""
    ours_rules: tuple[Any, ...] = ()
    """``[[ours_rules]]``: shortcuts this package applies that the benchmark does not. The responses they fire
    on are judged, as the benchmark judges them (the published number); the reading ``ours (...)`` beside it
    gives them the rule's label instead."""

    def prompt_used(self) -> dict[str, Any]:
        """What the records say of the prompt that judged."""
        if self.prompt:
            return dict(self.prompt)
        files = self.template_files()
        return {"source": "recipe", "files": {k: v.name for k, v in files.items()}} if files else {
            "source": "package"}

    def template_files(self) -> dict[str, Path]:
        """Every template file the recipe reads, by kind (``check``) or claims stage (``match``)."""
        out: dict[str, Path] = dict(self.templates)
        out.update({f"{self.rubrics_by}={value}": path for value, path in self.rubrics.items()})
        for prefix, options in [("", self.options), *[(f"{p.name}.", p.options) for p in self.parts],
                                *[(f"{self.groups_by}={name}.", g["options"]) for name, g in self.groups.items()]]:
            for stage, path in (options.get("templates") or {}).items():
                if isinstance(path, Path) or "\n" not in str(path):
                    out[f"{prefix}{stage}"] = Path(path)
            if isinstance(options.get("generation_template"), str) and "\n" not in options["generation_template"]:
                out[f"{prefix}generation"] = Path(options["generation_template"])
        return out

    def check_items(self, items: Sequence[Item], file: str | None = None) -> None:
        """Refuse, before any call, an item lacking a field of :attr:`requires` (an empty text counts as
        lacking): an :class:`InputError` naming the file, the item's line and the field, with how many lack it."""
        missing: list[tuple[Item, str]] = []
        for item in items:
            for need in self.requires:
                if need.startswith("responses."):
                    name = need.split(".", 1)[1]
                    for i, r in enumerate(item.responses):
                        if _empty(getattr(r, name, None)):
                            missing.append((item, f"responses[{i}].{name}"))
                            break
                elif _empty(getattr(item, need) if need in ITEM_NEEDS else item.fields.get(need)):
                    missing.append((item, need))
        if missing:
            item, where = missing[0]
            more = f" ({len(missing)} items lack a required field)" if len(missing) > 1 else ""
            raise InputError(f"is missing: recipe {self.name!r} judges against it (requires: "
                             f"{', '.join(self.requires)}); item {item.id!r} has none{more}. Nothing was judged",
                             file=file, line=item.line, field=where)

    def judge_kwargs(self) -> dict[str, Any]:
        """The ``Judge`` keyword arguments the recipe fixes (settings and ``<kind>_template`` paths)."""
        return {**self.judge, **{f"{kind}_template": path for kind, path in self.templates.items()},
                **{f"{kind}_template": text for kind, text in self.template_texts.items()}}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "benchmark": self.benchmark, "source": self.source,
                "mode": self.mode, "metric": {"name": self.metric, **self.metric_params}, "audit": list(self.audit),
                "path": None if self.path is None else str(self.path), **({"by": self.by} if self.by else {}),
                **({"parts": [p.to_dict() for p in self.parts]} if self.parts else {}),
                **({"requires": list(self.requires)} if self.requires else {}),
                **({"published_judge": self.published_judge} if self.published_judge else {}),
                **({"provenance": dict(self.provenance)} if self.provenance else {})}


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, (str, tuple, list, dict)) and not (value.strip() if isinstance(
        value, str) else value))


ITEM_LISTS = {"criteria": parse_criteria, "checklist": parse_checklist}
"""The options that list what every item is judged on, with their parsers (``[[options.criteria]]``)."""


def _options(mode: str, raw: Mapping[str, Any], file: str, prefix: str = "") -> dict[str, Any]:
    """The mode's options from the recipe's ``[options]``: names checked, criteria/checks/labels parsed."""
    names = {f.name for f in dataclasses.fields(get_mode(mode).options)}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        where = f"{prefix}options.{key}"
        if key not in names:
            raise InputError(f"is not an option of mode {mode!r} (its options: {', '.join(sorted(names))})",
                             file=file, field=where)
        if key in ITEM_LISTS:  # the criteria or checks every item is judged on
            out[key] = ITEM_LISTS[key](value, file, 1, f"{prefix}options.")
        elif key == "rules":
            out[key] = parse_rules(value, file, None, f"{prefix}options.")
        elif key == "templates" and staged(mode):
            out[key] = _stage_templates(value, file, where)
        elif key == "generation_template" and isinstance(value, str):  # a file beside the recipe, as templates are
            out[key] = str(_inside(Path(file), value, where))
        elif key == "labels":
            if not isinstance(value, str):
                raise InputError('must be a label set such as "YES=1,NO=0"', file=file, field=where)
            try:
                out[key] = LabelSet.parse(value)
            except ConfigError as exc:
                raise InputError(str(exc), file=file, field=where) from None
        else:
            out[key] = value
    return out


def _stage_templates(value: Any, file: str, where: str) -> dict[str, str]:
    """A claims recipe's ``templates = { match = "file.txt" }``: each stage's file, relative to the recipe."""
    if not isinstance(value, dict):
        raise InputError('must be a table of stage -> template file ({ match = "match.txt" })', file=file,
                         field=where)
    out: dict[str, str] = {}
    for stage, name in value.items():
        if not isinstance(name, str) or not name.strip():
            raise InputError("must be a template file's name, relative to the recipe", file=file,
                             field=f"{where}.{stage}")
        out[str(stage)] = str(_inside(Path(file), name, f"{where}.{stage}"))
    return out


def load_recipe(path: str | Path) -> Recipe:
    """Read and check a recipe file (or a folder holding ``recipe.toml``); problems name the file and field."""
    p = Path(path)
    if p.is_dir():
        p = p / "recipe.toml"
    file = str(p)
    data = _toml(p)
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        raise InputError(f"is not a recipe field (known: {', '.join(sorted(FIELDS))})", file=file, field=unknown[0])
    name = _text(data, "name", file)
    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*", name):
        raise InputError(f"must be a word (letters, digits, - _ .), got {name!r}", file=file, field="name")
    version = data.get("version")
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        version = str(version)
    if not isinstance(version, str) or not version.strip():
        raise InputError("must be a version string such as \"1.0\"", file=file, field="version")
    parts = _parts(data, file)
    if parts:
        mode = "+".join(dict.fromkeys(part.mode for part in parts))
        metric_name, params = _metric(data, file, "metric", "parts")
        weights = params.get("weights") or {}
        names = [part.name for part in parts]
        for key, w in weights.items():
            if key not in names:
                raise InputError(f"names no part of this recipe: {key!r} (its parts: {', '.join(names)})", file=file,
                                 field=f"metric.weights.{key}")
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 <= w < float("inf"):
                raise InputError(f"must be a number 0 or more, got {w!r}", file=file, field=f"metric.weights.{key}")
        if weights and sum(weights.values()) <= 0:
            raise InputError("must give some part a weight above 0", file=file, field="metric.weights")
        if data.get("audit"):
            raise InputError("is not available for a recipe with parts (run a part as a recipe of its own to audit "
                             "it)", file=file, field="audit")
    else:
        mode = _text(data, "mode", file)
        try:
            get_mode(mode)
        except ConfigError as exc:
            raise InputError(str(exc), file=file, field="mode") from None
        metric_name, params = _metric(data, file, "metric", mode)
    judge, templates = _judge_table(data, file), _templates(data, p)
    audit = data.get("audit", [])
    if not isinstance(audit, list) or any(a not in AUDITS for a in audit):
        raise InputError(f"must be a list of checks among {', '.join(AUDITS)}, got {audit!r}", file=file,
                         field="audit")
    options = {} if parts else _options(mode, _table(data, "options", file), file)
    if "rules" in data:
        if parts:
            raise InputError("is given by a part in a recipe with [parts] ([[parts.NAME.options.rules]])", file=file,
                             field="rules")
        if "rules" in options:
            raise InputError("is given twice: as [[rules]] and as options.rules (keep one)", file=file, field="rules")
        if "rules" not in {f.name for f in dataclasses.fields(get_mode(mode).options)}:
            raise InputError(f"the {mode} mode takes no rules (rules apply to the modes score, criteria, checklist)",
                             file=file, field="rules")
        options["rules"] = parse_rules(data["rules"], file)
    ours = parse_rules(data.get("ours_rules"), file, prefix="ours_") if "ours_rules" in data else ()
    if ours and parts:
        raise InputError("is for a one-mode recipe", file=file, field="ours_rules")
    if "groups" in data and (parts or "rubrics" in data):
        raise InputError("is for a one-mode recipe without [rubrics] (a group's options are its prompts)", file=file,
                         field="groups")
    groups_by, groups = parse_groups(data.get("groups"), p, lambda raw, prefix: _options(mode, raw, file, prefix))
    recipe = Recipe(name, version.strip(), _text(data, "benchmark", file), _text(data, "source", file), mode,
                    metric_name, params, options, dict(judge), templates, tuple(audit),
                    _text(data, "description", file, required=False), p, parts, _by(data, file),
                    _requires(data, file), _provenance(data, file), _text(data, "published_judge", file,
                                                                           required=False),
                    _benchmark_prompt(data, p), _input(data, file), *_rubrics(data, p),
                    answers=parse_answers(data.get("answers"), file), ours_rules=ours, groups_by=groups_by,
                    groups=groups)
    _probe(recipe, file, top_rules="rules" in data)
    return recipe


def _judge_table(data: Mapping[str, Any], file: str) -> dict[str, Any]:
    """``[judge]``: the judge settings a recipe fixes, each of its type."""
    judge = _table(data, "judge", file)
    for key, value in judge.items():
        kind = JUDGE_FIELDS.get(key)
        if kind is None:
            raise InputError(f"is not a judge setting a recipe fixes (known: {', '.join(sorted(JUDGE_FIELDS))})",
                             file=file, field=f"judge.{key}")
        mistyped = not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool)
        if mistyped and not (kind is float and isinstance(value, int) and not isinstance(value, bool)):
            raise InputError(f"must be a {kind.__name__}, got {value!r}", file=file, field=f"judge.{key}")
    return judge


def _templates(data: Mapping[str, Any], p: Path) -> dict[str, Path]:
    """``[templates]``: each kind's file, inside the recipe's folder."""
    file = str(p)
    templates: dict[str, Path] = {}
    for key, value in _table(data, "templates", file).items():
        if key not in TEMPLATES:
            raise InputError(f"is not a template kind (known: {', '.join(TEMPLATES)})", file=file,
                             field=f"templates.{key}")
        if not isinstance(value, str):
            raise InputError("must be a file name relative to the recipe", file=file, field=f"templates.{key}")
        templates[key] = _inside(p, value, f"templates.{key}")
    return templates


def _metric(data: Mapping[str, Any], file: str, where: str, mode: str) -> tuple[str, dict[str, Any]]:
    """The metric table ``where`` of ``data`` (its name and checked parameters) for records of ``mode``."""
    key = where.rsplit(".", 1)[-1]
    if key not in data:
        raise InputError("is missing (a [metric] table with its name)", file=file, field=where)
    raw = data[key]
    if not isinstance(raw, dict):
        raise InputError(f"must be a table, got {type(raw).__name__}", file=file, field=where)
    metric_name = _text(raw, "name", file) if "name" in raw else ""
    if not metric_name:
        raise InputError("is missing", file=file, field=f"{where}.name")
    try:
        metric = get_metric(metric_name)
        params = metric.checked({k: v for k, v in raw.items()
                                 if k != "name" and not (k == "by" and where == "metric")}, where)
    except ConfigError as exc:
        raise InputError(str(exc), file=file, field=where) from None
    if not metric.modes:
        try:
            return metric_name, summary_metric_params(metric, mode, params)
        except ConfigError as exc:
            raise InputError(str(exc), file=file, field=where) from None
    if mode not in metric.modes:
        what = "a recipe with parts" if mode == "parts" else mode
        raise InputError(f"metric {metric_name!r} reads {', '.join(metric.modes)} records, not {what}", file=file,
                         field=f"{where}.name")
    return metric_name, params


def _parts(data: Mapping[str, Any], file: str) -> tuple[Part, ...]:
    """The ``[parts.NAME]`` tables of a several-mode recipe (none: a one-mode recipe)."""
    raw = _table(data, "parts", file)
    if not raw:
        if "parts" in data:
            raise InputError("must name at least one part ([parts.NAME] with its mode, options and metric)",
                             file=file, field="parts")
        return ()
    for key in ("mode", "options"):
        if key in data:
            raise InputError("is given by each part in a recipe with [parts], not by the recipe", file=file, field=key)
    out: list[Part] = []
    for name, table in raw.items():
        where = f"parts.{name}"
        if not re.fullmatch(r"[A-Za-z][\w-]*", name):
            raise InputError(f"must be a word (letters, digits, - _), got {name!r}", file=file, field=where)
        if not isinstance(table, dict):
            raise InputError(f"must be a table ([{where}]), got {type(table).__name__}", file=file, field=where)
        unknown = sorted(set(table) - PART_FIELDS)
        if unknown:
            raise InputError(f"is not a part field (known: {', '.join(sorted(PART_FIELDS))})", file=file,
                             field=f"{where}.{unknown[0]}")
        mode = table.get("mode")
        if not isinstance(mode, str) or not mode.strip():
            raise InputError("is missing" if mode is None else "must be a non-empty string", file=file,
                             field=f"{where}.mode")
        try:
            get_mode(mode)
        except ConfigError as exc:
            raise InputError(str(exc), file=file, field=f"{where}.mode") from None
        options = table.get("options", {})
        if not isinstance(options, dict):
            raise InputError(f"must be a table, got {type(options).__name__}", file=file, field=f"{where}.options")
        metric_name, params = _metric(table, file, f"{where}.metric", mode)
        out.append(Part(name, mode, _options(mode, options, file, f"{where}."), metric_name, params))
    return tuple(out)


def _probe(recipe: Recipe, file: str, *, top_rules: bool = False) -> None:
    """Build the recipe's task on a judge that loads nothing: bad templates or options fail here, not mid-run."""
    from .._judge import Judge

    try:
        judge = Judge("mock/hash", store=":memory:", **recipe.judge_kwargs())
        try:
            for mode, options, where in [(p.mode, p.options, f"parts.{p.name}.options.") for p in recipe.parts] or [
                    (recipe.mode, recipe.options, "" if top_rules else "options."), *(
                        [(recipe.mode, {**recipe.options, "rules": recipe.ours_rules}, "ours_")]
                        if recipe.ours_rules else []), *[(recipe.mode, merged_options(recipe.options, g),
                                                         f"groups.{name}.options.") for name, g in
                                                        recipe.groups.items()]]:
                try:
                    judge.task(mode, **options)
                except InputError as exc:  # a rule whose label the task's scale or labels lack
                    raise InputError(exc.reason, file=file, field=f"{where}{exc.field}" if exc.field else None) \
                        from None
        finally:
            judge.close()
    except (ConfigError, TypeError, ValueError) as exc:
        raise InputError(str(exc), file=file, field="options" if not recipe.templates else None) from None


def builtin_recipes() -> dict[str, Path]:
    """The shipped recipes by name (each folder of this package holding a ``recipe.toml``)."""
    return {p.parent.name.replace("_", "-"): p for p in sorted(HERE.glob("*/recipe.toml"))}


def recipe_plugins() -> dict[str, list[EntryPoint]]:
    return installed(PLUGIN_GROUP, PLUGINS_ENV, builtin_recipes())


def recipe_names() -> list[str]:
    """Every recipe's name: shipped, then installed."""
    return [*builtin_recipes(), *sorted(recipe_plugins())]


def _from_plugin(ep: EntryPoint) -> Recipe:
    what = describe(ep, "recipe plug-in")
    try:
        value = ep.load()
        if callable(value) and not isinstance(value, Recipe):
            value = value()
    except Exception as exc:
        raise ConfigError(f"{what} cannot be loaded: {type(exc).__name__}: {exc}") from exc
    if isinstance(value, (str, Path)):
        value = load_recipe(value)
    if not isinstance(value, Recipe):
        raise ConfigError(f"{what} gives a {type(value).__name__}, not a recipe path or a trustjudge Recipe")
    if value.name != ep.name:
        raise ConfigError(f"{what} gives the recipe {value.name!r}: the entry point's name must be the recipe's")
    return value


def get_recipe(name_or_path: str | Path) -> Recipe:
    """A recipe by name (shipped, then installed) or by path (a ``.toml`` file or a folder holding one)."""
    text = str(name_or_path)
    shipped = builtin_recipes()
    if text in shipped:
        return load_recipe(shipped[text])
    p = Path(text)
    if text.endswith(".toml") or p.is_dir() or p.exists() or "/" in text:
        return load_recipe(p)
    plugins = recipe_plugins()
    if text in plugins:
        found = plugins[text]
        if len(found) > 1:
            raise ConfigError(f"recipe {text!r}: {len(found)} recipe plug-ins claim it: "
                              + "; ".join(sorted(describe(ep, "recipe plug-in") for ep in found)))
        return _from_plugin(found[0])
    raise ConfigError(f"unknown recipe {text!r}: the recipes are {', '.join(recipe_names())} "
                      "(or give a recipe file's path)")


def with_benchmark_prompt(recipe: Recipe, prompt: BenchmarkPrompt) -> Recipe:
    """The recipe judging with ``prompt`` in place of its own template of that kind (checked as the recipe's are)."""
    if prompt.kind in STAGES:
        def with_stage(options: Mapping[str, Any]) -> dict[str, Any]:
            return {**options, "templates": {**(options.get("templates") or {}), prompt.kind: prompt.text}}
        parts = tuple(dataclasses.replace(p, options=with_stage(p.options)) if staged(p.mode) else p
                      for p in recipe.parts)
        changed = dataclasses.replace(recipe, options=with_stage(recipe.options) if staged(recipe.mode)
                                      else recipe.options, parts=parts, prompt=prompt.describe())
    else:
        changed = dataclasses.replace(recipe, template_texts={**recipe.template_texts, prompt.kind: prompt.text},
                                      prompt=prompt.describe())
    try:
        _probe(changed, str(prompt.file))
    except InputError as exc:
        raise InputError(f"the benchmark's prompt does not make a valid template with the recipe's layout: "
                         f"{exc.reason}", file=str(prompt.file)) from None
    return changed


def with_benchmark_dir(recipe: Recipe, benchmark_dir: str | Path, *, allow_changed: bool = False) -> Recipe:
    """The recipe judging with every prompt of the benchmark's own that it names, read from ``benchmark_dir`` (a
    checkout of the benchmark's repository): its ``[benchmark_prompt]``, and each rubric's
    ``[rubrics.benchmark.VALUE]`` in place of the recipe's rubric file for the items of that value. Each file's
    sha256 is checked (:func:`~trustjudge.recipes._prompt.load_benchmark_prompt`); each record says which judged."""
    if any(g.get("benchmark") for g in recipe.groups.values()):
        recipe = _with_group_prompts(recipe, benchmark_dir, allow_changed)
    if not recipe.rubric_benchmark:
        return with_benchmark_prompt(recipe, load_benchmark_prompt(recipe, benchmark_dir, allow_changed=allow_changed))
    changed = recipe
    if recipe.benchmark_prompt:
        changed = with_benchmark_prompt(recipe, load_benchmark_prompt(recipe, benchmark_dir,
                                                                      allow_changed=allow_changed))
    kind = rubric_kind(recipe.mode)
    fields = get_mode(recipe.mode).templates[kind].fields
    texts, used = dict(changed.rubric_texts), dict(changed.rubric_prompts)
    for value in recipe.rubric_benchmark:
        prompt = load_benchmark_prompt(recipe, benchmark_dir, allow_changed=allow_changed, rubric=value)
        try:
            read_template(prompt.text, f"{kind}.txt", fields)
        except ConfigError as exc:
            raise InputError(f"the benchmark's prompt of rubric {value!r} does not make a valid template with the "
                             f"recipe's layout: {exc}", file=str(prompt.file)) from None
        texts[value], used[value] = prompt.text, prompt.describe()
    return dataclasses.replace(changed, rubric_texts=texts, rubric_prompts=used)


def _with_group_prompts(recipe: Recipe, benchmark_dir: str | Path, allow_changed: bool) -> Recipe:
    """The recipe with each group's benchmark prompt (``[groups.NAME.benchmark]``, a stage's) read from the
    checkout in place of that stage's template for the group's items, checked as a template of the stage."""
    groups, used = dict(recipe.groups), dict(recipe.group_prompts)
    for name, group in recipe.groups.items():
        if not group.get("benchmark"):
            continue
        prompt = load_benchmark_prompt(recipe, benchmark_dir, allow_changed=allow_changed, group=name)
        if prompt.kind not in STAGES:
            raise InputError("must be a stage of the claims mode (match, verify, extract)", file=str(recipe.path),
                             field=f"groups.{name}.benchmark.kind")
        options = dict(group["options"])
        options["templates"] = {**(options.get("templates") or {}), prompt.kind: prompt.text}
        groups[name] = {**group, "options": options}
        used[name] = prompt.describe()
    changed = dataclasses.replace(recipe, groups=groups, group_prompts=used)
    try:
        _probe(changed, str(recipe.path))
    except InputError as exc:
        raise InputError(f"a group's benchmark prompt does not make a valid template with the recipe's layout: "
                         f"{exc.reason}", file=str(recipe.path), field=exc.field) from None
    return changed
