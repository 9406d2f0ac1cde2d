"""Judging for the prompt-ensemble estimator (:mod:`~trustjudge.audit._ensemble`): a judge's records of pairs
under its own template and each ensemble template, combined (what ``Judge.calibrate`` and ``Judge.select`` run)."""

from __future__ import annotations

from typing import Any

from ._panel import twin
from .audit._ensemble import ENSEMBLE, TEMPLATES, combine, template_text
from .errors import ConfigError
from .modes._registry import get_mode, registered_modes

ENSEMBLE_TEMPLATE = "pairwise"
"""The template the ensemble's templates replace: a mode that judges under it (declares it in ``Mode.templates``)
is the one the ensemble judges."""


def _ensembled() -> list[str]:
    return [name for name, mode in registered_modes().items() if ENSEMBLE_TEMPLATE in mode.templates]


def sibling(judge: Any, name: str) -> Any:
    """A twin of ``judge`` (same backend, store and settings) judging pairs under the template ``name``."""
    return twin(judge, templates={**judge.config.templates, ENSEMBLE_TEMPLATE: template_text(name)})


def judged(judge: Any, task: Any, items: Any, confidence: str, progress: Any = None, mapping: Any = None,
           panel: dict[str, Any] | None = None, size: int | None = None) -> tuple[list[dict[str, Any]], Any]:
    """``judge``'s records of ``task`` (a task, or a mode: its calibration task) on ``items`` (dicts); for the
    ensemble, combined over the templates; for a panel estimator, over ``panel`` (a calibration's; ``None``: a
    new one of ``size``, drawn from ``items``). Returns the records and the panel (``None`` but for a panel)."""
    from ._panel import run_panel, spec
    from .audit._panel import PANELS
    from .io._sources import as_items

    task = judge.calibration_task(task) if isinstance(task, str) else task
    if confidence not in (ENSEMBLE, *PANELS):
        return [r.to_dict() for r in judge.run(task, items, progress=progress, mapping=mapping)], None
    if ENSEMBLE_TEMPLATE not in get_mode(task.kind).templates:
        raise ConfigError(f"the {confidence} estimator judges pairs under the {ENSEMBLE_TEMPLATE} template (the "
                          f"modes {', '.join(_ensembled())}), not {task.kind} verdicts")
    todo = list(as_items(items, mapping))
    if confidence in PANELS:
        fresh = panel is None
        panel = spec(judge, confidence, size, todo) if fresh else panel
        assert panel is not None
        return run_panel(judge, task, todo, panel, progress, calibrating=fresh), panel
    own = [r.to_dict() for r in judge.run(task, todo, progress=progress)]
    others = []
    for name in TEMPLATES:
        twin = sibling(judge, name)
        others.append([r.to_dict() for r in twin.run(twin.calibration_task(task.kind), todo)])
    return combine(own, others), None
