"""One ``trustjudge`` command per judging mode, built from the mode registry (issue 22).

:func:`mode_command` builds the command of every mode whose :attr:`~trustjudge.Mode.command` names it: a mode
whose command is one word is the command's own (``criteria``), one whose command adds a flag is run with that
flag (``criteria --pairwise`` runs ``criteria-compare``). The command's mode options come from the fields of
the modes' options dataclasses, each field's ``metadata`` saying how (see :func:`trustjudge.modes._registry.option`):

* ``bool`` is a flag (``--x``; ``--x/--no-x`` where the default is true); ``int``, ``float`` and ``str`` are
  typed options (``ge`` / ``gt`` / ``le`` / ``lt`` bound numbers; floats are always finite); a ``Literal``
  or ``choices`` is a choice; an optional field's option defaults to ``None`` (the mode's own default);
* ``parse`` (``callable(str) -> value``) reads a type the command line cannot spell (a label set);
* ``suite`` names the suite file field that supplies the option where the command line does not; a command
  whose modes have such fields takes ``--suite``;
* ``flag`` names the option (default ``--`` and the field's name with dashes); a field spelled like a judge
  option (``protocol``) is that option: ``--protocol`` fills it; ``metavar`` is how its value reads in the
  help (``N|LO-HI``);
* a field of another type without ``parse`` or ``suite``, or with ``cli=False``, is not on the command line.

Every such command also takes what every judging command takes: the input options, the judge and engine
options (``--template`` sets the mode's template where the judge loads it), ``--out`` and ``--dry-run``, the
calibration options (refused, saying why, for a mode without calibration units), ``--max-pairs`` where a
mode of the command judges pairs, and ``--audit`` / ``--report`` where a mode of the command has an audit (its
task's :meth:`~trustjudge.modes._base.Task.audit` hook, with a flag per name of its ``audit_options``; the report
is drawn from its ``report_sections`` hook). A built-in command's other extra behaviour (more checks, the
end-of-run tables) comes from its :class:`Hooks`; a third party's mode gets its command, audit and report
included, from the registry alone, with none.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.markup import escape

from .._judge import Judge
from .._plugins import disabled_message
from ..engine._engine import BACKEND_ERROR
from ..errors import BackendError, ConfigError, InputError
from ..io._files import Suite, load_suite
from ..io._items import Item
from ..io._outputs import atomic_output, readable_input, record_output, write_text
from ..modes._base import RULE_MODES, AuditContext, Task, check_item
from ..modes._records import RecordBase
from ..modes._registry import MODES, Mode, disabled_mode_plugins, mode_plugins
from ..modes._registry import PLUGINS_ENV as MODE_PLUGINS_ENV
from ..report._modes import render_mode_report
from ..report._trust import calibration_section
from . import _calibrated as calibrated
from ._common import err, is_utf8, print_plan, progress, records_note
from ._inputs import changed, digest, read_items, scan, stream_items
from ._mode_options import _Option, _options, build_options, suite_values
from ._options import (
    MAX_PAIRS_OPTION,
    OWN_TEMPLATE,
    TEMPLATE_FIELDS,
    CalibrationOptions,
    Command,
    JudgeOptions,
    Template,
    calibration_options,
    input_options,
    judge_options,
    make_judge,
    output_options,
)
from ._summary import SystemTally

__all__ = ["Hooks", "Run", "Summary", "mode_command", "mode_commands", "suite_values"]

SUITE_HELP = "A suite file (JSON or TOML) whose {} apply where the items and the options give none."
AUDIT = click.option("--audit", "audit_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="Also audit the mode and write the report (JSON) here.")
REPORT = click.option("--report", "report_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
                      help="Also audit the mode and write it as a self-contained HTML report (plots, tables) here.")


# -- the end-of-run summary ---------------------------------------------------------------------------------


class Summary:
    """What a command says after its records: one line (records, calls, unscored); a mode's hook may table it."""

    def __init__(self) -> None:
        self.records = 0
        self.unscored: Counter[str] = Counter()

    def add(self, row: dict[str, Any]) -> None:
        self.records += 1
        if row.get("unscored"):
            self.unscored[row["unscored"]] += 1

    def show(self, j: Judge, task: Task, out: Path | None, items: Path, quiet: bool) -> None:
        s = j.stats
        if not quiet:
            err.print(escape(f"{task.kind}: {self.records} records; model calls {s.model_calls}"
                             f"{s.recorded_note()}, from store {s.from_store}; unscored: "
                             f"{dict(self.unscored) or 'none'}; store: {j.store.path}"),
                      highlight=False)
            records_note(j, self.records, out, items)
        if self.unscored.get(BACKEND_ERROR) and s.last_error:
            err.print(f"[yellow]backend error:[/] {escape(s.last_error)}", highlight=False)

    def check(self, j: Judge) -> None:
        """Fail (exit non-zero) when the judge failed every judgment it was asked for."""
        if self.records and self.unscored.get(BACKEND_ERROR) == self.records:
            raise BackendError(f"every judgment failed ({self.records} records say backend_error): "
                               f"{j.stats.last_error or 'no message'}")


# -- what a command is given --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Run:
    """One invocation of a mode's command: the mode chosen, its options, and everything else given."""

    command: str
    mode: Mode
    """The mode the command runs (``criteria-compare`` for ``criteria --pairwise``)."""
    options: Any
    """An instance of ``mode.options``: the command line's values, else the suite's, else the defaults."""
    given: Mapping[str, Any]
    """The mode options given on the command line, by flag."""
    suite: Suite
    suite_path: Path | None
    items: Path
    fmt: str
    skip_invalid: bool
    quiet: bool
    judging: JudgeOptions
    out: Path | None
    dry_run: bool
    audit_out: Path | None = None
    report_out: Path | None = None
    max_pairs: int | None = None
    """The most pairs an item may have (``None``: no bound, where no pair is judged)."""
    calibrating: CalibrationOptions | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The values of the hooks' own options, by parameter name."""
    min_responses: int = 1
    """The fewest responses an item needs: the fewest any mode of the command needs (an item is read alike
    whichever mode the command runs)."""
    modes: tuple[str, ...] = ()
    """The names of the command's modes."""
    asked: frozenset[str] = frozenset()
    """The optional parts of the mode's audit asked for (``--grounding-audit``: ``grounding-audit``)."""

    @property
    def auditing(self) -> bool:
        return self.audit_out is not None or self.report_out is not None

    def options_of(self, name: str) -> Any:
        """The options of another mode of the command, from the same command line and suite (for an audit)."""
        return build_options(MODES[name], self.given, self.suite, self.judging)

    def task(self, j: Judge, name: str | None = None) -> Task:
        """The task of the chosen mode (or of the command's mode ``name``) for the judge ``j``."""
        try:
            if name is None or name == self.mode.name:
                return self.mode.task_of(j, self.options)
            return MODES[name].task_of(j, self.options_of(name))
        except InputError as exc:  # a suite's rule the task cannot take (a label its scale lacks): the file named
            if exc.file is None and self.suite_path is not None and (exc.field or "").startswith("rules"):
                raise InputError(exc.reason, file=str(self.suite_path), line=exc.line, field=exc.field) from None
            raise

    def items_list(self) -> list[Item]:
        """Every valid item of the input (for an audit's further judgments)."""
        return read_items(self.items, self.skip_invalid, 1, self.fmt, max_pairs=self.max_pairs)

    def audit_context(self, j: Judge) -> AuditContext:
        """What the mode's audit hook may use: the input's items, ``j`` to judge more, the other modes' tasks
        (the command's own with its options, any other with its defaults), and a second judge sampling at
        temperature 0.7 with the next seed."""
        def task_of(name: str) -> Task:
            return self.task(j, name) if name in self.modes or name == self.mode.name else j.task(name)

        def resampled(items: Sequence[Item]) -> list[RecordBase]:
            other = dataclasses.replace(self.judging, temperature=0.7, seed=self.judging.seed + 1).make()
            try:
                return list(other.run(self.task(other), items))
            finally:
                other.close()

        return AuditContext(self.items_list, j.run, task_of, self.asked, resampled)


@dataclasses.dataclass(frozen=True)
class Hooks:
    """What a built-in command adds to the command its modes give (a third party's mode needs none)."""

    doc: str | None = None
    """The command's help (default: its mode's summary)."""
    options: tuple[Callable[[Command], Command], ...] = ()
    """More click options; their values reach the other hooks as :attr:`Run.extra`."""
    check: Callable[[Run], None] | None = None
    """More checks of the command line, before any work (raise :class:`click.UsageError`)."""
    summary: Callable[[], Summary] = Summary
    """The end-of-run summary."""
    refuses: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Judge options (``--protocol``, ``--max-new-tokens``, ``--template``) the command refuses, with why."""
    shared: frozenset[str] = frozenset()
    """Flags of the command's own mode that the hooks use under another mode's flag too (else refused there)."""
    fill: Callable[[Run], Mapping[str, Any]] | None = None
    """Mode option values from the hooks' own options (:attr:`Run.extra`), by field name, over the command
    line's and the suite's: for a field the factory cannot spell (``claims``' repeated ``--template
    STAGE=PATH``). The paths among the values (or in a mapping value) are inputs: no output may overwrite them."""
    own: frozenset[str] = frozenset()
    """Judge flags (``--template``) that the hooks' options take themselves: the factory neither adds nor refuses
    them."""


# -- the command --------------------------------------------------------------------------------------------


def _templates(command: str, base: Mode | None, variants: list[tuple[str, Mode]]) -> list[Template]:
    """``--template`` for the first template of the command's own mode the judge loads, ``--FLAG-template`` for
    a variant's (``--pairwise-template``)."""
    found: list[Template] = []
    for flag, mode in [("", base), *variants]:
        if mode is None:
            continue
        loadable = [name for name in mode.templates if name in TEMPLATE_FIELDS] or list(mode.templates)[:1]
        if not loadable:
            continue
        name = loadable[0]
        dest = TEMPLATE_FIELDS.get(name, OWN_TEMPLATE + name)  # a mode's own template: Judge(templates=...)
        if not flag:
            what = name.replace("_", " ")
            found.append(("--template", dest,
                          f"Your own {what} prompt template (string.Template fields, see docs/formats.md)."))
        else:
            found.append((f"{flag}-template", dest,
                          f"Your own {name.replace('_', ' ')} prompt template ({flag})."))
    if found and found[0][0] != "--template":  # no own template: the first variant's takes --template
        found[0] = ("--template", *found[0][1:])
    return found


def _split(command: str, modes: list[Mode]) -> tuple[Mode | None, list[tuple[str, Mode]]]:
    base: Mode | None = None
    variants: list[tuple[str, Mode]] = []
    for mode in modes:
        words = (mode.command or "").split()
        if words == [command]:
            base = mode if base is None else base
        elif len(words) == 2 and words[0] == command and words[1].startswith("--"):
            variants.append((words[1], mode))
    return base, variants


def _paths(values: Mapping[str, Any]) -> list[Path]:
    """The paths among ``values`` and in its mapping values (a hook's filled options: files the run reads)."""
    found: list[Path] = []
    for value in values.values():
        for one in value.values() if isinstance(value, Mapping) else (value,):
            if isinstance(one, Path):
                found.append(one)
    return found


@dataclasses.dataclass(frozen=True)
class _Shape:
    """What a mode command is made of: its modes (``base`` and the ``variants`` by flag), their options by flag
    (with the modes that have each), and where its variant and audit-part flags land."""

    base: Mode | None
    variants: list[tuple[str, Mode]]
    ordered: list[Mode]
    by_mode: dict[str, list[_Option]]
    flags: dict[str, _Option]
    owners: dict[str, list[str]]
    variant_dest: dict[str, str]
    audit_parts: dict[str, tuple[str, list[str]]]
    part_dest: dict[str, str]
    min_responses: int


def mode_command(command: str, modes: list[Mode], hooks: Hooks | None = None) -> click.Command:
    """The ``trustjudge COMMAND`` of ``modes`` (those whose :attr:`Mode.command` is ``COMMAND`` or
    ``COMMAND --FLAG``), with ``hooks``' additions."""
    hooks = hooks or Hooks()
    base, variants = _split(command, modes)
    if base is None and not variants:
        raise ConfigError(f"no mode's command is {command!r}")
    ordered = [m for m in [base, *(m for _, m in variants)] if m is not None]
    first = ordered[0]
    by_mode = {m.name: _options(m) for m in ordered}
    # An option only a variant has says so: "With --pairwise: ..."
    shown = {**({base.name: by_mode[base.name]} if base is not None else {}),
             **{m.name: _options(m, f"With {flag}: ") for flag, m in variants if base is not None}}
    flags: dict[str, _Option] = {}
    owners: dict[str, list[str]] = {}
    for mode in ordered:
        for opt in shown.get(mode.name, by_mode[mode.name]):
            if opt.click_option is None:
                continue
            flags.setdefault(opt.flag, opt)
            owners.setdefault(opt.flag, []).append(mode.name)
    templates = _templates(command, base, variants)
    refuses = dict(hooks.refuses)
    if "--template" in hooks.own:
        templates = []
    elif not templates and "--template" not in refuses:
        refuses["--template"] = "it renders no prompt template"
    suite_fields = sorted({str(o.meta["suite"]) for m in ordered for o in by_mode[m.name] if "suite" in o.meta})
    pairwise = any(m.min_responses >= 2 for m in ordered)
    min_responses = min(m.min_responses for m in ordered)
    variant_dest = {flag: f"variant__{flag[2:].replace('-', '_')}" for flag, _ in variants}
    audits = any(m.audits for m in ordered)
    audit_parts: dict[str, tuple[str, list[str]]] = {}
    for m in ordered:
        if m.audits:
            for part, part_help in m.task.audit_options.items():
                audit_parts.setdefault(part, (part_help, []))[1].append(m.name)
    part_dest = {part: f"audit__{part.replace('-', '_')}" for part in audit_parts}
    shape = _Shape(base, variants, ordered, by_mode, flags, owners, variant_dest, audit_parts, part_dest,
                   min_responses)

    def callback(**params: Any) -> None:
        _invoke(shape, hooks, command, params)

    params: list[Callable[[Command], Command]] = [
        input_options,
        judge_options(templates=templates, refuses=refuses, command=command),
        output_options(stdout=True),
        *(click.option(flag, variant_dest[flag], is_flag=True,
                       help=f"{m.summary.rstrip('.')} (the {m.name} mode)." if m.summary else f"The {m.name} mode.")
          for flag, m in variants),
        *(opt.click_option for opt in flags.values() if opt.click_option is not None),
    ]
    if suite_fields:
        params.append(click.option("--suite", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                                   default=None, help=SUITE_HELP.format("/".join(suite_fields))))
    params.extend(hooks.options)
    params.extend(click.option(f"--{part}", part_dest[part], is_flag=True, help=part_help)
                  for part, (part_help, _) in audit_parts.items())
    if audits:
        params += [AUDIT, REPORT]
    params.append(calibration_options(base.name if base is not None else first.name))
    if pairwise:
        params.append(MAX_PAIRS_OPTION)
    fn: Command = callback
    for decorate in reversed(params):
        fn = decorate(fn)
    doc = hooks.doc or first.summary or f"Judge ITEMS with the {first.name} mode."
    made = click.command(command, help=doc)(fn)
    seen: dict[str, str] = {}
    for param in made.params:
        for spelled in [*param.opts, *param.secondary_opts]:
            if spelled in seen:
                raise ConfigError(f"trustjudge {command}: two options are {spelled} (a field of mode "
                                  f"{'/'.join(m.name for m in ordered)}): give one metadata['flag']")
            seen[spelled] = str(param.name)
    return made



def _invoke(shape: _Shape, hooks: Hooks, command: str, params: dict[str, Any]) -> None:
    """Run ``trustjudge COMMAND`` with its parsed ``params``: the mode chosen, its options checked and built."""
    base, variants, flags, by_mode = shape.base, shape.variants, shape.flags, shape.by_mode
    owners, variant_dest, audit_parts, part_dest = shape.owners, shape.variant_dest, shape.audit_parts, shape.part_dest
    min_responses, ordered = shape.min_responses, shape.ordered
    ctx = click.get_current_context()
    chosen = [(flag, m) for flag, m in variants if params.pop(variant_dest[flag])]
    if len(chosen) > 1:
        raise click.UsageError(f"{chosen[0][0]} and {chosen[1][0]} do not go together")
    if chosen:
        mode = chosen[0][1]
    elif base is not None:
        mode = base
    else:
        raise click.UsageError(f"trustjudge {command} needs one of {', '.join(f for f, _ in variants)}")
    given: dict[str, Any] = {}
    for flag, opt in flags.items():
        value = params.pop(opt.dest)
        if ctx.get_parameter_source(opt.dest) is not ParameterSource.DEFAULT:
            given[flag] = opt.convert(value)
    mine = {o.flag for o in by_mode[mode.name]}
    for flag in given:
        if flag in mine or (mode is not base and flag in hooks.shared):
            continue
        needs = [f for f, m in variants if m.name in owners[flag]]
        if needs:
            raise click.UsageError(f"{flag} needs {' or '.join(needs)}")
        raise click.UsageError(f"{flag} does not apply with {chosen[0][0]}")
    asked = frozenset(part for part in audit_parts if params.pop(part_dest[part]))
    judging: JudgeOptions = params.pop("judging")
    suite_path: Path | None = params.pop("suite", None)
    run = Run(command, mode, None, given, Suite(), suite_path, params.pop("items"), params.pop("fmt"),
              params.pop("skip_invalid"), params.pop("quiet"), judging, params.pop("out"), params.pop("dry_run"),
              params.pop("audit_out", None), params.pop("report_out", None), params.pop("max_pairs", None),
              params.pop("calibrating", None), dict(params), min_responses, tuple(m.name for m in ordered), asked)
    for part in sorted(asked):
        if not run.auditing:
            raise click.UsageError(f"--{part} needs --audit or --report", ctx=ctx)
        if mode.name not in audit_parts[part][1]:
            raise click.UsageError(f"--{part} does not apply with {chosen[0][0] if chosen else command}", ctx=ctx)
    if run.auditing and not mode.audits:
        what = "--audit" if run.audit_out is not None else "--report"
        raise click.UsageError(f"{what} does not apply with {chosen[0][0] if chosen else command}: the "
                               f"{mode.name} mode has no audit", ctx=ctx)
    if run.max_pairs is not None and not (mode.min_responses >= 2 or run.auditing):
        run = dataclasses.replace(run, max_pairs=None)  # no pair is judged
    if hooks.check is not None:
        hooks.check(run)
    filled = dict(hooks.fill(run)) if hooks.fill is not None else {}
    cal = run.calibrating
    judging.guard(run.items, {"--out": run.out, "--audit": run.audit_out, "--report": run.report_out,
                              "--summary": cal.summary if cal is not None else None},
                  inputs=(suite_path, cal.path if cal is not None else None, *_paths(filled)))
    suite = load_suite(suite_path) if suite_path is not None else Suite()
    if suite.rules and "rules" not in {f.name for f in dataclasses.fields(mode.options)}:
        raise InputError(f"the {mode.name} mode takes no rules (rules apply to the modes "
                         f"{', '.join(RULE_MODES)})", file=str(suite_path), field="rules")
    options = build_options(mode, given, suite, judging)
    if filled:
        try:
            options = dataclasses.replace(options, **filled)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"mode {mode.name!r}: {exc}") from None
    run = dataclasses.replace(run, suite=suite, options=options, items=readable_input(run.items))
    run_mode(run, hooks)


# -- running ------------------------------------------------------------------------------------------------


def _checked(task: Task, path: Path) -> Callable[[Item], int]:
    """Per item: its judgment count, after the task's own check (so a missing criterion stops the run
    before any model call, naming the file, line and item)."""
    def count(item: Item) -> int:
        check_item(task, item, str(path))
        return task.size(item)

    return count


def run_mode(run: Run, hooks: Hooks) -> None:
    """Judge the input with the run's mode, streaming: items are validated first (against the task, before any
    store is opened), then read, judged and written chunk by chunk; with ``--calibration`` each record is
    annotated as it is written; then the summary, and the audit where ``--audit`` / ``--report`` ask."""
    loaded = calibrated.load(run.calibrating, run.mode.name) if run.calibrating is not None else None
    if loaded is not None and loaded.domains is not None and run.report_out is not None:
        raise click.UsageError("--report draws one calibration's reliability: with --calibration-by give --audit")
    path, fmt, bound = run.items, run.fmt, run.max_pairs
    min_responses = run.min_responses
    if run.dry_run:
        items = read_items(path, run.skip_invalid, min_responses, fmt, max_pairs=bound)
        j = run.judging.make()
        try:
            print_plan(j, items, run.task(j))
        finally:
            j.close()
        return
    sha256 = digest(path)
    # The task, to validate the items against it, from a judge that opens no store file and starts no Ray:
    # bad input stops the run before anything is created or loaded.
    probe = dataclasses.replace(run.judging, store=Path(":memory:"), ray_address=None, factory=make_judge).make()
    try:
        total = scan(path, run.skip_invalid, min_responses, fmt, _checked(run.task(probe), path), max_pairs=bound)
    finally:
        probe.close()
    if digest(path) != sha256:
        raise changed(path)
    j = run.judging.make()
    j.source = str(path)
    summary = hooks.summary()
    tally = SystemTally(run.calibrating.summary if run.calibrating is not None else None, run.mode.name)
    records: list[dict[str, Any]] = []
    try:
        task = calibrated.task_for(loaded, run.task(j))
        calibrator = calibrated.Calibrator.start(loaded, j, task, sha256) if loaded is not None else None
        with record_output(run.out, "--out") as stream, progress(run.quiet) as bar:
            bar_task = bar.add_task(f"{run.mode.name} ({j.name}, {task.protocol})", total=total)
            todo = stream_items(path, min_responses, fmt, run.skip_invalid, sha256, max_pairs=bound)
            todo = calibrator.watch(todo) if calibrator is not None else todo  # --calibration-by: each item's domain
            ascii_only = not is_utf8(stream)
            for record in j.run(task, todo, progress=lambda n: bar.advance(bar_task, n)):
                row = record.to_dict()
                if calibrator is not None:
                    row = calibrator.annotate(row)
                stream.write(json.dumps(row, ensure_ascii=ascii_only) + "\n")
                stream.flush()
                summary.add(row)
                tally.add(row)
                if run.auditing:
                    records.append(row)
        summary.show(j, task, run.out, path, run.quiet)
        tally.finish(run.quiet, calibrator.finish(None, run.quiet) if calibrator is not None else None)
        report = task.audit(records, run.audit_context(j)) if run.auditing else None
        if report is not None:
            if run.audit_out is not None:
                with atomic_output(run.audit_out, "--audit") as fh:
                    fh.write(json.dumps(report, indent=2) + "\n")
                if not run.quiet:
                    err.print(escape(f"audit written to {run.audit_out}"), highlight=False)
            if run.report_out is not None:
                extra_sections = [calibration_section(calibrator.evaluation(records))] if calibrator is not None \
                    else []
                write_text(run.report_out, render_mode_report(
                    report, title=f"trustjudge {run.command} audit", mode=run.mode.name, label=run.command,
                    details={"judge": j.name, "data": str(path)}, extra_sections=extra_sections), "--report")
                if not run.quiet:
                    err.print(escape(f"audit report written to {run.report_out}"), highlight=False)
        summary.check(j)
    finally:
        j.close()


# -- the commands of the registry ---------------------------------------------------------------------------


def _word(mode: Mode) -> str | None:
    return mode.command.split()[0] if mode.command else None


def registered_modes() -> list[Mode]:
    """The modes registered now (built-in and registered; installed plug-ins are not loaded)."""
    plugins = set(mode_plugins())
    return [MODES[name] for name in MODES if name not in plugins]


def _all_modes(wanted: str | None = None) -> list[Mode]:
    """Every mode, plug-ins loaded: one that fails to load is left out, unless it is named ``wanted`` (its
    error then stops the command, naming the plug-in)."""
    found = registered_modes()
    for name in sorted(mode_plugins()):
        try:
            found.append(MODES[name])
        except (ConfigError, KeyError):
            if name == wanted:
                raise
    return found


def mode_commands(modes: list[Mode], hooks: Mapping[str, Hooks]) -> dict[str, click.Command]:
    """The command of every command name of ``modes``, by name."""
    names = list(dict.fromkeys(w for w in map(_word, modes) if w))
    return {name: mode_command(name, [m for m in modes if _word(m) == name], hooks.get(name)) for name in names}


class ModeGroup(click.Group):
    """A command group that also finds the commands of modes registered or installed after it was built."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = set(super().list_commands(ctx))
        return sorted(names | {w for w in map(_word, _all_modes()) if w})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None:
            return found
        modes = [m for m in _all_modes(cmd_name) if _word(m) == cmd_name]
        if modes:
            return mode_command(cmd_name, modes)
        off = disabled_mode_plugins().get(cmd_name)  # a plug-in's command is named like it, as a rule
        if off:
            raise click.UsageError(f"no command {cmd_name!r}: " + disabled_message(off[0], "mode plug-in",
                                                                                  MODE_PLUGINS_ENV), ctx)
        return None

