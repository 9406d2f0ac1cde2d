"""Judging for the panel estimators (:mod:`~trustjudge.audit._panel`): a judge's records of pairs under each
simulated annotator or sampled critique, combined (what ``Judge.calibrate`` and ``Judge.select`` run)."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from .audit._panel import ANNOTATORS, EXAMPLES, TEMPERATURE, check_size, combine, draw_examples, examples_block
from .audit._split import selection_split
from .modes._prompts import Prompts


def twin(judge: Any, **changes: Any) -> Any:
    """A copy of ``judge`` (same backend, engine and store) whose settings differ by ``changes``."""
    _ = judge.engine  # the twins share the judge's engine (its store, stats and batching)
    other = copy.copy(judge)
    other.config = replace(judge.config, **changes)
    other.template = other.config.template
    other.prompts = Prompts.of(other.template, system=other.config.system)
    other.protocol = other.config.protocol
    other._sampling = dict(temperature=other.config.temperature, seed=other.config.seed,
                           max_new_tokens=other.config.max_new_tokens)
    return other


def annotator(judge: Any, examples: list[dict[str, Any]]) -> Any:
    """A twin of ``judge`` whose pairwise template is headed by one simulated annotator's ``examples``."""
    own = judge.prompts.pairwise.template
    return twin(judge, templates={**judge.config.templates, "pairwise": examples_block(examples) + own})


def critic(judge: Any, i: int, temperature: float) -> Any:
    """A twin of ``judge`` that critiques first (``cot``) at ``temperature``, with its own seed (sample ``i``)."""
    return twin(judge, protocol="cot", temperature=temperature, seed=judge.config.seed + 1 + i)


def _pool(items: list[Any]) -> list[dict[str, Any]]:
    """The labelled pairs of ``items`` in part A of their selection split."""
    labelled = []
    for it in items:
        text = {r.id: r.text for r in it.responses}
        for p in it.pairs or ():
            if p.human in ("first", "second", "tie") and p.first in text and p.second in text:
                labelled.append({"key": (str(it.id), str(p.first), str(p.second)), "question": it.question,
                                 "response_a": text[p.first], "response_b": text[p.second], "human": p.human})
    part_a = selection_split([list(e["key"]) for e in labelled], len(labelled))
    return [e for e, a in zip(labelled, part_a, strict=True) if a]


def spec(judge: Any, confidence: str, size: int | None, items: list[Any]) -> dict[str, Any]:
    """A new calibration's panel: its size and, for annotators, the examples drawn from part A of ``items``."""
    n = check_size(confidence, size)
    if confidence == ANNOTATORS:
        return {"estimator": confidence, "size": n, "per_annotator": EXAMPLES,
                "examples": draw_examples(_pool(items), n)}
    t = judge.config.temperature if judge.config.temperature > 0 else TEMPERATURE
    return {"estimator": confidence, "size": n, "temperature": float(t)}


def run_panel(judge: Any, task: Any, items: list[Any], panel: dict[str, Any], progress: Any = None,
              calibrating: bool = False) -> list[dict[str, Any]]:
    """The records of ``items`` judged by ``panel``, combined; ``calibrating``: the example pairs left out."""
    if panel["estimator"] == ANNOTATORS:
        twins = [annotator(judge, ex) for ex in panel["examples"]]
    else:
        twins = [critic(judge, i, panel["temperature"]) for i in range(panel["size"])]
    runs = []
    for i, twin in enumerate(twins):
        runs.append([r.to_dict() for r in twin.run(twin.calibration_task(task.kind), items,
                                                   progress=progress if i == 0 else None)])
    out = combine(panel["estimator"], runs)
    if calibrating and panel["estimator"] == ANNOTATORS:
        shown = {tuple(e["key"]) for ex in panel["examples"] for e in ex}
        out = [r for r in out if (str(r.get("item_id")), str(r.get("first_id")), str(r.get("second_id")))
               not in shown]
    return out


def planned_calls(judge: Any, kind: str, items: list[Any], panel: dict[str, Any]) -> int:
    """The model calls ``panel`` would need on ``items`` (what the store lacks)."""
    twins = ([annotator(judge, ex) for ex in panel["examples"]] if panel["estimator"] == ANNOTATORS
             else [critic(judge, i, panel["temperature"]) for i in range(panel["size"])])
    return sum(int(t.plan(items, t.calibration_task(kind)).model_calls) for t in twins)
