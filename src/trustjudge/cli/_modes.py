"""``trustjudge criteria``, ``checklist`` and ``claims``: what their commands add to the registry's (the audits
of ``--audit`` / ``--report`` and their options; claims' --template STAGE=PATH and refused judge options).

The commands themselves, and every mode option they take, are built from the mode registry
(:mod:`trustjudge.cli._mode_command`): they read the same items as ``score`` (with ``criteria`` /
``checklist`` fields, or a ``--suite`` file that gives them to items carrying none), take every judge and
engine option, resume from the store, and with ``--audit`` also write the mode's audit (JSON) after the
records (``--report``: as a self-contained HTML page).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from .._judge import Judge
from ..modes._audits import checklist_audit, claims_audit, claims_sensitivity, criteria_audit, grounding_audit
from ..modes._base import Task
from ..modes._registry import get_mode
from ._mode_command import Hooks, Run

GROUNDING = click.option("--grounding-audit", "grounding_audit_", is_flag=True,
                         help="With --audit: judge the items again without their profile/knowledge/evidence and "
                              "with swapped profiles, and report the shift.")


def _needs_audit(run: Run, name: str, flag: str) -> None:
    """Refuse an audit option given without ``--audit`` / ``--report`` (it would do nothing)."""
    ctx = click.get_current_context(silent=True)
    if run.extra.get(name) and not run.auditing:
        raise click.UsageError(f"{flag} needs --audit or --report", ctx=ctx)


def _criteria_check(run: Run) -> None:
    _needs_audit(run, "grounding_audit_", "--grounding-audit")
    if run.mode.name != "criteria" and "--scale" in run.given and not run.auditing:
        raise click.UsageError("--scale is the scale of criteria scores: with --pairwise only the audit "
                               "(--audit or --report) scores them")


def _criteria_audit(run: Run, j: Judge, task: Task, records: list[dict[str, Any]]) -> dict[str, Any]:
    listed = run.items_list()
    several = [it for it in listed if len(it.responses) >= 2]
    scoring = run.task(j, "criteria")
    if run.mode.name == "criteria":
        pairs = [r.to_dict() for r in j.run(run.task(j, "criteria-compare"), several)]
        report = criteria_audit(records, pairs)
    else:
        report = criteria_audit([r.to_dict() for r in j.run(scoring, listed)], records)
    if run.extra.get("grounding_audit_"):
        report["grounding"] = grounding_audit(j.run, listed, scoring)
    return report


def _checklist_audit(run: Run, j: Judge, task: Task, records: list[dict[str, Any]]) -> dict[str, Any]:
    listed = run.items_list()
    several = [it for it in listed if len(it.responses) >= 2]
    pairs = [r.to_dict() for r in j.compare(several)] if several else []
    report = checklist_audit(records, pairs, labels=run.options.labels)
    if run.extra.get("grounding_audit_"):
        report["grounding"] = grounding_audit(j.run, listed, task)
    return report


def _claims_audit(run: Run, j: Judge, task: Task, records: list[dict[str, Any]]) -> dict[str, Any]:
    report = claims_audit(records)
    if run.extra.get("sensitivity"):
        listed = run.items_list()
        other = dataclasses.replace(run.judging, temperature=0.7, seed=run.judging.seed + 1).make()
        try:
            report["sensitivity"] = claims_sensitivity(j.run, listed, task, [list(other.run(run.task(other),
                                                                                           listed))])
        finally:
            other.close()
    return report


CRITERIA = Hooks(
    doc="Judge every response on every criterion (rubric), with the weighted aggregate and its spread.",
    options=(GROUNDING,), check=_criteria_check, audit=_criteria_audit, shared=frozenset({"--scale"}))
CHECKLIST = Hooks(
    doc="Ask every response every check: P(pass) per check, expected satisfaction, P(all), counts; with "
        "--calibration, each check's P(pass) also calibrated (and with --target-agreement, kept or abstained on).",
    options=(GROUNDING,), check=lambda run: _needs_audit(run, "grounding_audit_", "--grounding-audit"),
    audit=_checklist_audit)
def _stage_paths(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, Path]:
    """``--template STAGE=PATH`` (repeatable) of ``claims``: each stage's template file, by stage name."""
    stages = tuple(get_mode("claims").templates)
    out: dict[str, Path] = {}
    for value in values:
        name, sep, path = value.partition("=")
        name = name.strip()
        if not sep or not name or not path:
            raise click.BadParameter(f"expected NAME=PATH with NAME one of {', '.join(stages)}, got {value!r}",
                                     ctx=ctx, param=param)
        if name not in stages:
            raise click.BadParameter(f"unknown stage {name!r}: the stages are {', '.join(stages)}",
                                     ctx=ctx, param=param)
        if not Path(path).is_file():
            raise click.BadParameter(f"{path}: no such file (the {name} template)", ctx=ctx, param=param)
        if name in out:
            raise click.BadParameter(f"the {name} template is given twice", ctx=ctx, param=param)
        out[name] = Path(path)
    return out


STAGE_TEMPLATES = click.option(
    "--template", "claims_templates", multiple=True, metavar="STAGE=PATH", callback=_stage_paths,
    help="Your own prompt template for a stage: extract=PATH, verify=PATH or match=PATH (repeatable; "
         "string.Template fields, see docs/modes.md).")


def _claims_check(run: Run) -> None:
    _needs_audit(run, "sensitivity", "--sensitivity")
    if run.given.get("--verify") is False and not run.given.get("--match"):
        raise click.UsageError("--no-verify needs --match (match-only: extraction and matching, no verification)",
                               ctx=click.get_current_context(silent=True))


def _claims_templates(run: Run) -> dict[str, Any]:
    templates = run.extra.get("claims_templates")
    return {"templates": dict(templates)} if templates else {}


CLAIMS = Hooks(
    doc="Extract each response's claims (or take the given ones), verify each against the item's evidence, and "
        "report expected precision, the distribution of supported claims and, with --match, recall; with "
        "--calibration, each verification also calibrated (and with --target-agreement, kept or abstained on).",
    options=(STAGE_TEMPLATES,
             click.option("--sensitivity", is_flag=True, help="With --audit: evidence order, negation and extractor "
                                                              "stability (a second extraction at temperature 0.7)."),),
    check=_claims_check,
    audit=_claims_audit,
    fill=_claims_templates,
    own=frozenset({"--template"}),
    refuses={
        "--protocol": "claims asks its verification and matching questions directly, with no critique",
        "--max-new-tokens": "claims writes no critique to bound; the extraction's length is --extract-tokens",
    })
