"""The public judging API, :class:`Judge` with generic verbs and each registered mode's conveniences.

The verbs: ``run``, ``task``, ``plan``, ``calibrate``, ``select``, ``cascade``, ``audit``, ``rank``; the
conveniences (``judge.score``, ``judge.score_task``) come from the registry (:mod:`trustjudge._mode_methods`);
:func:`score` and :func:`compare` judge once."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _calibrate, _cascade
from ._calibrate import task_for_calibration as task_for_calibration
from ._config import JudgeConfig
from ._mode_methods import ModeRun, ModeTask, convenience, convenience_names, keyword_options
from ._progress import RunBar, judgments
from ._settings import judge_name, project_settings, store_path
from .audit._audit import AuditRun
from .audit._audit import audit as run_audit
from .audit._calibration import Selection
from .audit._injection import injected as steer
from .audit._trust import Calibration
from .backends import Backend, get_backend
from .backends._names import engine_options
from .backends._speeds import shipped as shipped_speed
from .engine._asking import Question, Sampling, ask
from .engine._asking import plan as plan_questions
from .engine._engine import Engine, EngineStats, Outcome, PlanSummary, ProgressFn
from .engine._store import Store
from .errors import ConfigError
from .io._items import Item
from .io._sources import Mapped, as_items, item_list
from .modes._base import Asking, Task, check_item, ruled, run_task, with_turns
from .modes._prompts import Prompts, Protocol
from .modes._prompts import scale as make_scale
from .modes._records import (
    ChecklistRecord,
    ClaimsRecord,
    CompareRecord,
    CriteriaCompareRecord,
    CriteriaRecord,
    RecordBase,
    ScoreRecord,
)
from .modes._registry import get_mode

if TYPE_CHECKING:  # the ranking loads scipy: only when one is asked for
    from .audit._ranking import Ranking

__all__ = ["AuditRun", "ChecklistRecord", "CompareRecord", "CriteriaRecord", "Judge", "ScoreRecord", "compare",
           "score", "task_for_calibration"]


ItemSource = Any
"""What the judging methods take: :class:`Item` objects, a list of dicts, a pandas DataFrame or a Hugging Face
``Dataset`` (with ``mapping=``, the CLI's ``--map``); see :func:`trustjudge.read_items`."""

ProgressArg = ProgressFn | bool | None
"""A progress callback, ``True`` for a bar, or ``None``/``False`` for none."""


def _with_bar(judge: Judge, task: Task, items: Iterable[Item]) -> Iterator[RecordBase]:
    """``judge``'s records of ``task`` on ``items`` with a progress bar on standard error."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    ahead = judgments(task, items) if isinstance(items, Sequence) else None
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True)) as progress:
        bar = RunBar(progress, progress.add_task(f"{task.kind} ({judge.name})", total=ahead), ahead)
        yield from judge._judged(task, items, bar)


class Judge:
    """An LLM judge with TrustJudge's scoring and aggregation, backed by a judgment store.

    Its verbs are generic (:meth:`run`, :meth:`task`, :meth:`plan`, :meth:`calibrate`, :meth:`select`,
    :meth:`cascade`, :meth:`audit`, :meth:`rank`); every registered mode adds ``judge.<mode>(items, ...)`` and
    ``judge.<mode>_task(...)`` from the registry (``judge.score``, ``judge.criteria_compare``, a plug-in's
    ``judge.relevance``: :mod:`trustjudge._mode_methods`).

    Args:
        judge: a judge name (``hf/smollm2-135m``, ``hf//path``, ``mock/...``, or an alias of the project's
            ``[tool.trustjudge.aliases]``) or a :class:`~trustjudge.backends.Backend`; ``None``:
            ``TRUSTJUDGE_JUDGE``, else the project's ``judge``, else ``llamacpp/qwen2.5-coder-1.5b``.
        store: a :class:`Store`, a path, or ``None``: ``TRUSTJUDGE_STORE``, else the project's ``store``, else
            the default store file. ``scale``, where neither it nor ``config`` is given: the project's ``scale``.
        config: every other setting, as one :class:`~trustjudge.JudgeConfig`; keyword settings change it
            (``Judge(name, scale=5)``; ``templates={"pointwise": PATH}``, or ``pointwise_template=PATH``).
        protocol: ``direct`` (labels read right after the question) or ``cot`` (critique first).
        scale: the ``score`` scale: a top value (5, 10, 100: 1..N) or an integer range (``"0-5"``, ``"0-10"``);
            default 10: on the default judge it separated answers the 100-point scale tied, at half the
            cost (bench/results/consistency.md).
        system: the system prompt of every judgment (default :data:`~trustjudge.modes._prompts.SYSTEM`); a
            benchmark's own one replaces it. It is part of each prompt, so of each store key.
        closing: ``every`` (default) reads each label with its closing bracket, "57]": the exact
            probability that the judge writes that label and stops. ``needed`` reads the bracket only
            after labels that begin another label ("5" of "57"), so two-digit labels count the judge's
            digits whatever follows: a 100-point score reads 10 label-trie nodes instead of 100 (about
            1.5x faster on the embedded judge), no longer exact. Stored judgments of one mode are not
            reused by the other.
        max_retries, retry_base_s: transient backend failures (timeouts, HTTP 429/5xx) are retried
            this many times, waiting ``retry_base_s * 2**attempt`` (with jitter) or the server's
            ``Retry-After``.
    """

    def __init__(self, judge: str | Backend | None = None, *, store: Store | str | Path | None = None,
                 config: JudgeConfig | None = None, **settings: Any) -> None:
        project = project_settings()  # [tool.trustjudge]: what neither the call nor the environment gives
        if config is None and "scale" not in settings and project.scale is not None:
            settings["scale"] = project.scale
        config = JudgeConfig.of(config, **settings)
        if not isinstance(judge, Backend):
            judge = judge_name(judge, project)
        if not isinstance(store, Store):
            store = store_path(store, project)
        self.config = config
        """Every setting of this judge (:class:`JudgeConfig`): ``Judge(name, config=judge.config)`` is a twin."""
        self.name = judge if isinstance(judge, str) else getattr(judge, "name", type(judge).__name__)
        self._backend = judge if isinstance(judge, Backend) else None
        self._named = not isinstance(judge, Backend)
        """Whether the judge was given by name (its options, ``?labels=sampled``, then apply)."""
        self._backend_lock = threading.Lock()  # the service checks calibrations off its judge thread
        self._store = store if isinstance(store, Store) else Store(store)
        self.protocol: Protocol = config.protocol
        self.scale = make_scale(config.scale)
        self.template = config.template  # a mode's template by name: the judge's own, else the mode's file
        self.prompts = Prompts.of(self.template, system=config.system)
        self.delta = config.delta
        self.chunk_size = config.chunk_size
        self.keep_distribution = config.keep_distribution
        self._closing_mark = None if config.closing == "every" else config.closing  # named only when not exact
        self._sampling = dict(temperature=config.temperature, seed=config.seed, max_new_tokens=config.max_new_tokens)
        self._engine_args = dict(seed=config.seed, min_label_mass=config.min_label_mass, batch_size=config.batch_size,
                                 max_retries=config.max_retries, retry_base_s=config.retry_base_s,
                                 closing=config.closing)
        self._engine: Engine | None = None
        self.source: str | None = None
        """The input file's name, for errors about an item that a task cannot judge (set by the CLI)."""

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            with self._backend_lock:  # two threads asking first must not load the model twice
                if self._backend is None:
                    self._backend = get_backend(self.name)
        return self._backend

    @property
    def store(self) -> Store:
        return self._store

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            base, samples = engine_options(self.name) if self._named else (self.name, 0)
            self._engine = Engine(self.backend, self._store, speed_hint=shipped_speed(base), samples=samples,
                                  judge=self.name,
                                  **self._engine_args)  # type: ignore[arg-type]
        return self._engine

    @property
    def stats(self) -> EngineStats:
        return self.engine.stats

    # -- tasks ----------------------------------------------------------------------------------------
    @property
    def closing_mark(self) -> str | None:
        """``needed`` where labels are read without the closing bracket (records then say so), else ``None``."""
        return self._closing_mark

    def task(self, mode: str, /, *args: Any, **options: Any) -> Task:
        """The task of the registered mode ``mode`` (:func:`~trustjudge.get_mode`) with this judge's settings.

        ``options`` are the mode's option fields (:attr:`Mode.options`): by keyword, or by position in the order
        its options dataclass declares them (``judge.task("score", 100)``; unknown ones are a ConfigError naming
        the mode's). ``judge.<mode>_task(...)`` is the same (:mod:`trustjudge._mode_methods`)."""
        found = get_mode(mode)
        return found.task_of(self, **keyword_options(found, args, options))

    def sampling(self, protocol: Protocol) -> Sampling:
        return Sampling(protocol, **self._sampling)  # type: ignore[arg-type]

    # -- running ------------------------------------------------------------------------------------
    def _chunks(self, items: Iterable[Item], task: Task) -> Iterator[list[Item]]:
        """Items in chunks of about ``chunk_size / task.chunk_weight`` questions, each checked by the task first."""
        chunk: list[Item] = []
        size = 0
        for item in items:
            check_item(task, item, self.source, None if self.backend.accepts_images else self.name)
            chunk.append(item)
            size += task.size(item) * task.chunk_weight
            if size >= self.chunk_size:
                yield chunk
                chunk, size = [], 0
        if chunk:
            yield chunk

    def asking(self, progress: ProgressFn | None = None) -> Asking:
        """What a task's :meth:`Task.run` may ask of this judge (labels and generations through the store)."""
        engine = self.engine
        samplings = {p: self.sampling(p) for p in ("direct", "cot")}

        def labels(questions: Sequence[Question | str], protocol: Protocol) -> list[Outcome]:
            return ask(engine, questions, samplings[protocol], progress)

        return Asking(self.name, self.backend.format_prompt, labels, engine.generate, samplings["direct"])

    def run(self, task: Task | str, items: ItemSource, *, progress: ProgressArg = None, mapping: Mapped = None,
            **options: Any) -> Iterator[RecordBase]:
        """Run any task, or the registered mode named ``task`` with ``options`` (``judge.run("score", items,
        scale=100)``: :meth:`task` builds it; ``judge.score(items, scale=100)`` is the same, and so is each mode's
        ``judge.<mode>(items, ...)``, :mod:`trustjudge._mode_methods`). Records come out in input order, item by
        item (chunk by chunk, through the task's :meth:`Task.run`).

        ``progress``: a callable given the number of judgments each finished batch made, or ``True`` for a
        progress bar on standard error (rendered as a widget in a Jupyter notebook, one plain line when
        standard error is not a terminal) whose total is the judgments the run asks: known before any call
        for a list or table, counted chunk by chunk for a stream, and where a task only bounds them (extracted
        claims) corrected as each chunk finishes, so that it ends on done/done.

        ``items``: :class:`Item` objects, a list of dicts, a pandas DataFrame or a Hugging Face ``Dataset``;
        ``mapping`` (``{field: column}`` or ``"question=prompt,response=output"``, as ``--map``) reads a table
        in another schema. Rows without an id column take the source's index as their item id. Anything
        else is a ``TypeError``; a bad row an :class:`~trustjudge.InputError` before anything is judged."""
        task = self._task_of(task, options)
        checked = as_items(items, mapping)  # refused here, before a model loads, not at the first record
        return self._run(task, checked, progress)

    def _task_of(self, task: Task | str, options: dict[str, Any]) -> Task:
        """``task``, or the task of the mode it names with ``options`` (which a task given whole cannot take)."""
        if isinstance(task, str):
            return self.task(task, **options)
        if options:
            raise ConfigError(f"options ({', '.join(sorted(options))}) go with a mode's name: a {task.kind} task "
                              "carries its own")
        return task

    def _run(self, task: Task, items: Iterable[Item], progress: ProgressArg) -> Iterator[RecordBase]:
        task = self._for_backend(task)
        if progress is True:
            yield from _with_bar(self, task, items)
            return
        yield from self._judged(task, items, progress or None)

    def _judged(self, task: Task, items: Iterable[Item], progress: ProgressFn | None) -> Iterator[RecordBase]:
        """``task``'s records of ``items``, chunk by chunk (rules first: what one fires on asks nothing); a
        progress bar (:class:`RunBar`) hears of each chunk before and after it is judged."""
        asking = self.asking(progress)
        bar = progress if isinstance(progress, RunBar) else None
        counted = isinstance(items, Sequence)  # the bar's total holds every chunk from the start
        for chunk in self._chunks(items, task):
            if bar is not None:
                bar.chunk(judgments(task, chunk), counted)
            yield from with_turns(run_task(task, chunk, asking), chunk)
            if bar is not None:
                bar.chunk_done()

    # -- the modes' conveniences: judge.<mode>(items, ...) and judge.<mode>_task(...) from the registry ------------
    # The built-in modes' are declared here for type checkers only (no value: at run time each comes from the
    # registry, through __getattr__, as a plug-in mode's does); tests/test_mode_methods.py keeps this list whole.
    score: ModeRun[ScoreRecord]
    compare: ModeRun[CompareRecord]
    criteria: ModeRun[CriteriaRecord]
    criteria_compare: ModeRun[CriteriaCompareRecord]
    compare_criteria: ModeRun[CriteriaCompareRecord]
    """Deprecated: :attr:`criteria_compare` (the mode's name)."""
    checklist: ModeRun[ChecklistRecord]
    claims: ModeRun[ClaimsRecord]
    steps: ModeRun[RecordBase]
    score_task: ModeTask
    compare_task: ModeTask
    criteria_task: ModeTask
    criteria_compare_task: ModeTask
    checklist_task: ModeTask
    claims_task: ModeTask
    steps_task: ModeTask

    if not TYPE_CHECKING:  # a type checker sees the declarations above, and no attribute besides Judge's own
        def __getattr__(self, name: str) -> ModeRun[RecordBase] | ModeTask:
            """A mode's convenience (:mod:`trustjudge._mode_methods`): ``judge.<mode>`` or ``judge.<mode>_task``."""
            found = None if name.startswith("_") else convenience(self, name)
            if found is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r} (nor does any "
                                     "registered mode have that name)")
            return found

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *convenience_names()})

    # -- audit ------------------------------------------------------------------------------------
    def audit(self, items: ItemSource, *, scales: Sequence[int] = (5, 100), delta: float = 0.0,
              ks: Sequence[int] = (3, 4, 5), bootstrap: int = 1000, seed: int = 0, progress: ProgressArg = None,
              injection: bool = False, protocol: Protocol | None = None, mapping: Mapped = None) -> AuditRun:
        """Judge what the store lacks (pointwise on each scale, pairwise in both orders), then audit.

        ``items`` and ``mapping`` as :meth:`run`'s. Items with one response are scored but not compared. All
        that is stored is reused, so re-running with another delta, k or method makes no model call. With
        ``injection``, every response is also scored with :data:`~trustjudge.audit._injection.INJECTION` appended
        (an instruction to give the top label), and the report says how far the judge moved.
        """
        items = item_list(items, mapping)
        by_scale: dict[int, list[dict[str, Any]]] = {}
        injected: dict[int, list[dict[str, Any]]] = {}
        for points in scales:
            task = self.score_task(scale=points, protocol=protocol)
            by_scale[points] = [r.to_dict() for r in self.run(task, items, progress=progress)]
            if injection:
                injected[points] = [r.to_dict() for r in self.run(task, steer(items, points), progress=progress)]
        several = [it for it in items if len(it.responses) >= 2]
        pairs = [r.to_dict() for r in self.run(self.compare_task(protocol=protocol), several, progress=progress)]
        lengths = {(it.id, r.id): len(r.text) for it in items for r in it.responses}
        report = run_audit(by_scale, pairs, delta=delta, ks=ks, lengths=lengths, bootstrap=bootstrap, seed=seed,
                           injected_by_scale=injected)
        return AuditRun(report, by_scale, pairs)

    def rank(self, items: ItemSource, *, scale: int | str | None = None, method: str = "likelihood",
             bootstrap: int = 200, seed: int = 0, progress: ProgressArg = None, mapping: Mapped = None) -> Ranking:
        """Rank the systems that wrote the responses (``system``, else the response id), as ``trustjudge rank``.

        Every response is scored (on ``scale``, default the judge's) and every pair within an item judged in
        both orders (what the store holds is reused: a rerun makes no model call); then Bradley-Terry (soft
        and hard, Davidson ties), Elo, win rates and mean scores with bootstrap intervals over items
        (:func:`trustjudge.audit._ranking.rank`; ``method``: the verdicts of the hard fit). ``ValueError``
        with fewer than two systems or no scored pair between two. ``items`` and ``mapping`` as :meth:`run`'s.
        """
        from .audit._ranking import rank as fit_ranking

        items = item_list(items, mapping)
        scores = [r.to_dict() for r in self.run(self.score_task(scale=scale), items, progress=progress)]
        several = [it for it in items if len(it.responses) >= 2]
        pairs = [r.to_dict() for r in self.run(self.compare_task(), several, progress=progress)]
        return fit_ranking(pairs, scores, method=method, bootstrap=bootstrap, seed=seed)

    def audit_judgments(self, items: Sequence[Item], scales: Sequence[int] = (5, 100), injection: bool = False) -> int:
        """How many judgments :meth:`audit` needs (for progress bars)."""
        per_scale = sum(len(it.responses) for it in items) * (2 if injection else 1)
        return len(scales) * per_scale + sum(2 * len(it.all_pairs()) for it in items if len(it.responses) >= 2)

    # -- calibration and selective verdicts (:mod:`trustjudge._calibrate`) ----------------------------------
    def calibration_task(self, mode: str) -> Task:
        """The task a calibration of ``mode`` (compare, checklist, claims, score, criteria, a plug-in's) is fitted
        and applied under (a task over a scale's levels keeps each distribution: the calibration reads it)."""
        return _calibrate.calibration_task(self, mode)

    def _template_hash(self, mode: str, task: Task | None = None) -> str:
        """The identity of the prompt a calibration of ``mode`` holds for (:func:`_calibrate.template_of`)."""
        return _calibrate.template_of(self, mode, task)

    def calibrate(self, items: ItemSource, mode: str = "compare", *, method: str | None = None,
                  tolerance: float | None = None, task: Task | None = None, progress: ProgressArg = None,
                  mapping: Mapped = None, confidence: str = "calibrated",
                  panel_size: int | None = None) -> Calibration:
        """Fit a calibration of ``mode``'s probabilities on labelled ``items``, judging only what the store lacks.

        ``method``: ``platt`` (default), ``temperature`` or ``isotonic`` for checklists (two classes);
        vector scaling for pairwise verdicts and claims. ``score``: each response's distribution over this
        judge's scale against its ``human_score`` (nearest level); vector scaling on up to 11 levels,
        ``temperature`` above; ``tolerance`` (default 0) the points a verdict may be from the human's level
        and still agree. ``criteria``: the same per criterion (``human_criteria``), every criterion on one
        scale pooled. ``task``: the task to judge with (its mode's; default :meth:`calibration_task`; a score or
        criteria task keeps its distributions). ``items`` and ``mapping`` as :meth:`run`'s. ``confidence``:
        ``calibrated``, ``features``, ``ensemble``, ``annotators`` or ``critiques``
        (:mod:`~trustjudge.audit._estimators`; ``panel_size``: the annotators' k, 3 or 5, default 3, or the
        critiques' n, default 5); save it with ``.save``.
        """
        return _calibrate.calibrate(self, items, mode, method=method, tolerance=tolerance, task=task,
                                    progress=progress, mapping=mapping, confidence=confidence,
                                    panel_size=panel_size)

    def check_calibration(self, calibration: Calibration, *, override: bool = False,
                          task: Task | None = None) -> Calibration:
        """``calibration`` if it was fitted for this judge, template and protocol (ConfigError if not).

        ``task``: the task the calibration is applied to (its mode, protocol and labels are checked; default:
        the mode's task with this judge's settings). With ``override`` a judge, template, protocol or checklist
        label mismatch is accepted and listed in the returned calibration's ``overridden``; a mode or class
        mismatch never is (the verdicts differ).
        """
        return _calibrate.check(self, calibration, override=override, task=task)

    def prepare_calibration(self, calibration: Calibration, *, target: float | None = None, delta: float = 0.1,
                            override: bool = False, task: Task | None = None,
                            force_delta: bool = False) -> tuple[Calibration, Selection | None]:
        """The checked calibration (see :meth:`check_calibration`) and, with ``target``, its selection
        (:meth:`Calibration.selection`: the threshold for agreement >= ``target`` with probability >= 1 - ``delta``,
        a delta above 0.5 only with ``force_delta``, and the map :func:`annotate` applies, fitted on one half).

        Raises:
            ConfigError: a mismatched calibration, or a target its calibration set cannot support.
        """
        selection = calibration.selection(target, delta, force_delta) if target is not None else None
        return self.check_calibration(calibration, override=override, task=task), selection

    def apply_calibration(self, records: Iterable[RecordBase | dict[str, Any]], calibration: Calibration, *,
                          target: float | None = None, delta: float = 0.1, override: bool = False,
                          task: Task | None = None,
                          force_delta: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Add ``calibration``'s probabilities, verdict and confidence to every verdict of ``records`` (and,
        with ``target``, whether it is kept), with zero model calls: the raw fields stay as they were.

        ``records`` are this judge's records (or their dicts) in the calibration's mode, checked against this judge
        first (:meth:`check_calibration`; ``task`` as there). Returns them annotated, and the summary.
        """
        rows = _calibrate.as_rows(records)
        checked, selection = self.prepare_calibration(calibration, target=target, delta=delta, override=override,
                                                      task=task, force_delta=force_delta)
        return _calibrate.apply(checked, rows, selection)

    def select(self, items: ItemSource, calibration: Calibration, *, target: float | None = None,
               delta: float = 0.1, override: bool = False, mapping: Mapped = None, progress: ProgressArg = None,
               force_delta: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Judge ``items`` in the calibration's mode and add calibrated probabilities to every verdict; with
        ``target``, keep only verdicts confident enough for agreement >= ``target`` with probability >= 1 - delta.

        Returns the annotated records (dicts) and a summary (coverage, the guarantee and what it rests on).
        """
        return _calibrate.select(self, items, calibration, target=target, delta=delta, override=override,
                                 mapping=mapping, progress=progress, force_delta=force_delta)

    # -- recorded judges and cascades -----------------------------------------------------------------
    def _for_backend(self, task: Task) -> Task:
        """``task`` as this judge's backend can answer it (:meth:`Task.for_backend`: a recorded judge,
        ``recorded/<path>``, answers pairs from its file and refuses every other mode)."""
        return task.for_backend(self.backend)

    def sibling(self, judge: str | Backend) -> Judge:
        """Another judge with this one's settings and store (a cascade's tier named by a string).

        Closing it closes its backend only: the store stays open for this judge.
        """
        other = copy.copy(self)
        if isinstance(judge, str):
            judge = judge_name(judge)
        other.name = judge if isinstance(judge, str) else getattr(judge, "name", type(judge).__name__)
        other._backend = judge if isinstance(judge, Backend) else None
        other._named = not isinstance(judge, Backend)
        other._engine = None
        other.close = other._close_backend  # type: ignore[method-assign]
        return other

    def _close_backend(self) -> None:
        if self._backend is not None:
            self._backend.close()

    def cascade(self, items: ItemSource, tiers: Sequence[tuple[Judge | str | Backend, Calibration | None]], *,
                target: float, delta: float = 0.1, override: bool = False, mapping: Mapped = None,
                progress: ProgressArg = None, force_delta: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Judge through a cascade of judges: tier k judges only the verdicts the tiers before it abstained on.

        ``tiers``: ``(judge, calibration)`` in order, cheapest first; a judge is a :class:`Judge`, a backend
        or a judge name (built with this judge's settings and store; this judge's own name means this
        judge). The last tier may be ``("human", None)``: what no model tier keeps is then for people
        (:func:`trustjudge._cascade.human_items` writes it in the items format). Each model tier's threshold
        is chosen on the calibration units the earlier tiers abstained on, so that agreement with humans on
        the verdicts each tier keeps is >= ``target`` with probability >= 1 - ``delta`` (see
        :mod:`trustjudge._cascade`). The calibration files must be of one mode (compare: pairs; checklist:
        checks; claims: claim verifications), fitted on the same labelled items.

        Returns the records and a summary (coverage, agreement and calls per tier, against the calls each
        tier would need alone). A pair's record, or each check or claim of a response's record, has ``tier``,
        ``tier_judge`` and the ``cascade`` trail (:func:`trustjudge._cascade.run`).
        """
        built: list[Judge] = []
        steps: list[_cascade.Tier] = []
        try:
            for judge, calibration in tiers:
                if isinstance(judge, str) and judge == _cascade.HUMAN:
                    steps.append(_cascade.Tier(None, None))
                    continue
                if isinstance(judge, Judge):
                    tier = judge
                elif isinstance(judge, str) and judge == self.name:
                    tier = self
                else:
                    tier = self.sibling(judge)
                    built.append(tier)
                steps.append(_cascade.Tier(tier, calibration))
            return _cascade.run(item_list(items, mapping), steps, target=target, delta=delta, override=override,
                                progress=progress, force_delta=force_delta)
        finally:
            for tier in built:
                tier.close()

    # -- planning ---------------------------------------------------------------------------------
    def plan(self, items: ItemSource, task: Task | str, *, mapping: Mapped = None, **options: Any) -> PlanSummary:
        """What ``task`` would do on ``items``, without calling the model (a string names a registered mode,
        whose task is built with this judge's settings and ``options``: :meth:`task`; ``items`` and ``mapping``
        as :meth:`run`'s).

        The plan counts the label questions a task knows before any model call: for claims, those of the
        given claims (and given gold claims); extractions, and the claims they would give, are not counted.
        """
        task = self._for_backend(self._task_of(task, options))
        fmt = self.backend.format_prompt
        questions: list[Question | str] = []
        for chunk in self._chunks(as_items(items, mapping), task):
            questions.extend(q for item in ruled(task, chunk)[0] for q in task.questions(item, fmt))
        return plan_questions(self.engine, questions, self.sampling(task.protocol))

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._store.close()
        if self._backend is not None:
            self._backend.close()


def _judged_once(mode: str, items: ItemSource, judge: str | Backend | None, mapping: Mapped, progress: ProgressArg,
                 settings: dict[str, Any]) -> list[RecordBase]:
    """Every record of ``mode`` on ``items`` from a judge built for this call (and closed after it)."""
    with Judge(judge, **settings) as j:
        return list(j.run(mode, items, mapping=mapping, progress=progress))


def score(items: ItemSource, judge: str | Backend | None = None, *, mapping: Mapped = None,
          progress: ProgressArg = None, **kwargs: Any) -> list[ScoreRecord]:
    """Score every response (see :class:`Judge` for the options; ``mapping`` and ``progress`` as
    :meth:`Judge.run`'s)."""
    return _judged_once("score", items, judge, mapping, progress, kwargs)  # type: ignore[return-value]


def compare(items: ItemSource, judge: str | Backend | None = None, *, mapping: Mapped = None,
            progress: ProgressArg = None, **kwargs: Any) -> list[CompareRecord]:
    """Compare every pair in both orders (see :class:`Judge` for the options; ``mapping`` and ``progress`` as
    :meth:`Judge.run`'s)."""
    return _judged_once("compare", items, judge, mapping, progress, kwargs)  # type: ignore[return-value]
