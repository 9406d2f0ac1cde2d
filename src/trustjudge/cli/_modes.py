"""``trustjudge criteria``, ``checklist`` and ``claims``: what their commands add to the registry's (their help,
criteria's --scale check, claims' --template STAGE=PATH and refused judge options).

The commands themselves, and every mode option they take, are built from the mode registry
(:mod:`trustjudge.cli._mode_command`): they read the same items as ``score`` (with ``criteria`` /
``checklist`` fields, or a ``--suite`` file that gives them to items carrying none), take every judge and
engine option, resume from the store, and with ``--audit`` also write the mode's audit (JSON) after the
records (``--report``: as a self-contained HTML page): the audits are the modes' own hooks, reached through the
registry (:meth:`trustjudge.modes._base.Task.audit`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from ..modes._registry import get_mode
from ._mode_command import Hooks, Run


def _criteria_check(run: Run) -> None:
    if "scale" not in {f.name for f in dataclasses.fields(run.mode.options)} and "--scale" in run.given \
            and not run.auditing:  # --pairwise: the mode that runs takes no scale
        raise click.UsageError("--scale is the scale of criteria scores: with --pairwise only the audit "
                               "(--audit or --report) scores them")


CRITERIA = Hooks(
    doc="Judge every response on every criterion (rubric), with the weighted aggregate and its spread.",
    check=_criteria_check, shared=frozenset({"--scale"}))
CHECKLIST = Hooks(
    doc="Ask every response every check: P(pass) per check, expected satisfaction, P(all), counts; with "
        "--calibration, each check's P(pass) also calibrated (and with --target-agreement, kept or abstained on).")


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
    options=(STAGE_TEMPLATES,),
    check=_claims_check,
    fill=_claims_templates,
    own=frozenset({"--template"}),
    refuses={
        "--protocol": "claims asks its verification and matching questions directly, with no critique",
        "--max-new-tokens": "claims writes no critique to bound; the extraction's length is --extract-tokens",
    })
