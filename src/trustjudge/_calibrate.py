"""What :class:`~trustjudge.Judge`'s calibration methods do: the task a calibration is fitted and applied under,
what it holds for (template, protocol), fitting, checking and applying one. Every mode is asked through its
contract: its units (``Mode(calibration=...)``, :mod:`trustjudge.audit._readers`) and its task's calibration
hooks (:meth:`Task.calibration_prompt`, :meth:`Task.check_calibration`, :meth:`Task.calibration_labels`); no
mode is named here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from ._ensemble import judged
from .audit._calibration import Selection
from .audit._readers import scaled
from .audit._trust import Calibration, annotate, calibrates, calibration_modes, reader, template_hash
from .audit._trust import fit as fit_calibration
from .audit._trust import summary as trust_summary
from .errors import ConfigError
from .modes._base import Task
from .modes._registry import get_mode

Judge = Any
"""A :class:`~trustjudge.Judge` (not imported: it imports this module)."""

__all__ = ["task_for_calibration"]


def task_for_calibration(task: Task) -> Task:
    """``task`` as a calibration reads it: a score or criteria calibration reads each distribution over the
    levels, so a task that would drop it keeps it (as with ``--distribution``); any other task as it is."""
    if getattr(task, "keep_distribution", True) is False:
        return replace(task, keep_distribution=True)  # type: ignore[type-var]
    return task


def calibration_task(judge: Judge, mode: str) -> Task:
    """The task a calibration of ``mode`` is fitted and applied under (a task whose units are distributions over
    a scale's levels keeps each: the calibration reads it)."""
    get_mode(mode)  # a plug-in mode registers its calibration when loaded
    if not calibrates(mode):
        raise ConfigError(f"the {mode} mode has no calibration (a mode declares its units with "
                          "Mode(calibration=...))")
    task: Task = judge.task(mode, keep_distribution=True) if scaled(reader(mode)) else judge.task(mode)
    return task


def template_of(judge: Judge, mode: str, task: Task | None = None) -> str:
    """The identity of the prompt a calibration of ``mode`` holds for: what its task says it holds for
    (:meth:`Task.calibration_prompt`; default task: :func:`calibration_task`), and the system prompt where it
    is not the default (so a calibration fitted before ``system=`` existed still fits)."""
    from .modes._prompts import SYSTEM, strip_image_fields
    text = (task if task is not None else calibration_task(judge, mode)).calibration_prompt()
    system, text = judge.prompts.system, strip_image_fields(text)  # a text item's prompt is as it was
    return template_hash(text if system == SYSTEM else f"{system}\x00{text}")


def protocol_of(task: Task) -> str:
    return str(getattr(task, "protocol", "direct"))


def calibrate(judge: Judge, items: Any, mode: str, *, method: str | None, tolerance: float | None,
              task: Task | None, progress: Any, mapping: Any, confidence: str,
              panel_size: int | None = None) -> Calibration:
    """:meth:`Judge.calibrate`."""
    from .audit._estimators import check_estimator
    from .audit._panel import PANELS
    if check_estimator(confidence) not in PANELS and panel_size is not None:  # before any judging
        raise ConfigError(f"a panel size applies to the {' and '.join(PANELS)} estimators, not to {confidence!r} "
                          "(which judges each pair once: leave it out)")
    if task is not None and task.kind != mode:
        raise ConfigError(f"a {task.kind} task cannot calibrate the {mode} mode")
    task = task_for_calibration(task if task is not None else calibration_task(judge, mode))
    records, panel = judged(judge, task, items, confidence, progress, mapping, size=panel_size)
    scale = getattr(task, "scale", None)
    levels = scale.values if getattr(reader(mode), "task_scale", False) and scale is not None else None
    cal = fit_calibration(mode, records, judge=judge.name, fingerprint=judge.backend.fingerprint,
                          template=template_of(judge, mode), protocol=protocol_of(task), method=method,
                          levels=levels, tolerance=tolerance, confidence=confidence)
    return replace(cal, panel=panel) if panel is not None else cal


def check(judge: Judge, calibration: Calibration, *, override: bool, task: Task | None) -> Calibration:
    """:meth:`Judge.check_calibration`."""
    task = task if task is not None else calibration_task(judge, calibration.mode)
    mode = task.kind
    if not calibrates(mode):
        raise ConfigError(f"calibration covers the modes {', '.join(calibration_modes())}, not {mode} (no "
                          f"{mode} calibration units yet)")
    if calibration.mode == mode:
        task.check_calibration(calibration)  # another scale or other classes: never overridable
    checked = calibration.check(mode=mode, judge=judge.name, fingerprint=judge.backend.fingerprint,
                                template=template_of(judge, mode, task), protocol=protocol_of(task),
                                override=override)
    labels = task.calibration_labels()  # asked with other labels than the calibration was fitted on
    if labels is not None:
        what, fitted, now = labels
        if not override:
            raise ConfigError(f"the calibration file does not fit this judging ({what}: calibrated {fitted}, now "
                              f"{now}; it was fitted for judge {calibration.judge}): pass --calibration-override "
                              "to use it anyway (every record then says so)")
        checked = replace(checked, overridden=[*checked.overridden, "labels"])
    return checked


def apply(calibration: Calibration, rows: Sequence[dict[str, Any]],
          selection: Selection | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``rows`` annotated with ``calibration`` (and ``selection``), and their summary."""
    annotated = annotate(calibration.mode, rows, calibration, selection)
    return annotated, trust_summary(calibration.mode, annotated, calibration, selection)


def select(judge: Judge, items: Any, calibration: Calibration, *, target: float | None, delta: float,
           override: bool, mapping: Any, progress: Any,
           force_delta: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """:meth:`Judge.select`."""
    calibration = check(judge, calibration, override=override, task=None)
    selection = calibration.selection(target, delta, force_delta) if target is not None else None
    records, _ = judged(judge, calibration.mode, items, calibration.confidence, progress, mapping,
                        panel=calibration.panel)
    return apply(calibration, records, selection)


def as_rows(records: Iterable[Any]) -> list[dict[str, Any]]:
    return [r if isinstance(r, dict) else r.to_dict() for r in records]
