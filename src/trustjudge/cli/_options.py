"""The options the commands share, each defined once.

Every judging command (score, compare, audit, rank, report) takes :func:`judge_options`, which hands
the command one :class:`JudgeOptions`: the judge is built from it alone (:meth:`JudgeOptions.make`),
so a new judge or engine option reaches every command, and no command can drop one. Input, output and
audit options are shared the same way (:func:`input_options`, :func:`output_options`,
:func:`audit_options`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from .._judge import Judge
from .._settings import JUDGE_ENV, STORE_ENV, judge_name, store_path
from ..audit._support import DEFAULT_RISK_DELTA
from ..audit._trust import calibrates, calibration_modes, levelled
from ..backends import DEFAULT_JUDGE
from ..engine._store import default_store_path
from ..errors import ConfigError
from ..io._adapters import FORMATS
from ..io._frames import parse_mapping
from ..io._outputs import check_outputs, check_record_path
from ..modes._prompts import SCALE_METAVAR, check_system, scale_text
from ..modes._registry import get_mode
from ._inputs import MAX_PAIRS, InputFormat

Command = Callable[..., Any]
JudgeFactory = Callable[..., Judge]
JUDGE_FACTORY = "trustjudge.judge_factory"
"""Key of ``click.Context.meta`` under which the command group puts the factory the commands build their
judge with (:func:`make_judge` when a command runs on its own)."""
JUDGE_HELP = ("Judge name: llamacpp/qwen2.5-coder-1.5b, hf/smollm2-135m, hf/gemma3-270m, hf//path (folder or "
              ".gguf), mock/hash, or an alias of [tool.trustjudge.aliases] (`trustjudge judges` lists them).")


class ScaleRange(click.ParamType):  # type: ignore[type-arg,unused-ignore]
    """A rating scale as ``score --scale`` takes it: a top value (``10``: 1..10, given as an int) or an integer
    range (``0-5``, given as its text), checked before any work."""

    name = SCALE_METAVAR

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        try:
            return scale_text(str(value))
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)


SCALE_RANGE = ScaleRange()


class Finite(click.FloatRange):
    """A float range that also refuses NaN and infinities (which FloatRange lets through)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


# One definition per option; `trustjudge serve` shares the first ones too.
def _judge_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    """``--judge``, else ``TRUSTJUDGE_JUDGE``, else ``[tool.trustjudge] judge``, else the default; aliases resolved."""
    try:
        return judge_name(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def _store_path(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """``--store``, else ``TRUSTJUDGE_STORE``, else ``[tool.trustjudge] store``, else ``None`` (the default)."""
    try:
        return store_path(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


JUDGE = click.option("--judge", "-j", default=None, callback=_judge_name,
                     help=JUDGE_HELP + f" [default: ${JUDGE_ENV}, else [tool.trustjudge] judge in pyproject.toml, "
                                       f"else {DEFAULT_JUDGE}]")
STORE = click.option("--store", type=click.Path(dir_okay=False, path_type=Path), default=None, callback=_store_path,
                     help=f"SQLite judgment store. [default: ${STORE_ENV}, else [tool.trustjudge] store, else "
                          f"{default_store_path()}]")
BATCH_SIZE = click.option("--batch-size", default=8, show_default=True, type=click.IntRange(min=1),
                          help="Prompts per backend call and store write.")
PROTOCOL = click.option("--protocol", type=click.Choice(["direct", "cot"]), default="direct", show_default=True,
                        help="direct: labels read right after the prompt; cot: the judge writes a critique first.")
TEMPERATURE = click.option("--temperature", default=0.0, show_default=True, type=Finite(min=0.0),
                           help="cot sampling temperature (0 = greedy).")
SEED = click.option("--seed", default=0, show_default=True, help="Seed for cot sampling.")
MAX_NEW_TOKENS = click.option("--max-new-tokens", default=256, show_default=True, type=click.IntRange(min=1),
                              help="cot critique length limit.")
MIN_LABEL_MASS = click.option("--min-label-mass", default=1e-3, show_default=True, type=Finite(min=0.0, max=1.0),
                              help="Below this probability on valid labels a judgment is unscored (no_label_mass).")
CLOSING = click.option("--closing", type=click.Choice(["every", "needed"]), default="every", show_default=True,
                       help="every: each label read with its closing bracket (exact); needed: only labels that "
                            "begin another (5 of 57): 10x fewer label reads on 100 points, not exact.")


def _system_text(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--system``: the text of an existing file (UTF-8), else the text as given; checked before any work."""
    if value is None:
        return None
    path = Path(value)
    text = value
    try:
        if path.is_file():
            text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read the system prompt file {value}: {exc}", ctx=ctx, param=param) from None
    except ValueError:  # a text that cannot be a path (a NUL in it): the text itself, refused below
        pass
    try:
        return check_system(text)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


SYSTEM = click.option("--system", "system", metavar="FILE|TEXT", default=None, callback=_system_text,
                      help="The judge's system prompt: a file's text, or the text itself (default: the built-in "
                           "one). Part of every prompt, so of every store key.")
MAX_PAIRS_OPTION = click.option(
    "--max-pairs", default=MAX_PAIRS, show_default=True, type=click.IntRange(min=1),
    help="Refuse (before any judging) an item with more pairs than this: n responses make n(n-1)/2 pairs, each "
         "judged in both orders, so pairwise work grows with the square of the responses.")
RAY = click.option("--ray", "ray_address", is_flag=False, flag_value="local", default=None,
                   help="Run the judgments on Ray Data actors (`--ray` starts a local Ray; `--ray ADDRESS` joins "
                        "a cluster). Results and store are those of a local run.")


def make_judge(judge: str, store: Path | None, protocol: str, batch_size: int, temperature: float, seed: int,
               max_new_tokens: int, min_label_mass: float, ray_address: str | None = None, **extra: Any) -> Judge:
    """Build the judge of a command; ``ray_address`` (``"local"`` or a cluster address) runs it on Ray."""
    backend: Any = judge
    if ray_address is not None:
        from ..backends._ray import ray_backend

        backend = ray_backend(judge, None if ray_address == "local" else ray_address)
        # Each engine batch is one Ray Data job (actors start and load the model): send whole chunks.
        batch_size = max(batch_size, 256)
    return Judge(backend, store=store, protocol=protocol, batch_size=batch_size,
                 temperature=temperature, seed=seed, max_new_tokens=max_new_tokens,
                 min_label_mass=min_label_mass, **extra)


@dataclass(frozen=True)
class JudgeOptions:
    """The judge and engine options of a command, as given on the command line."""

    judge: str
    store: Path | None
    protocol: str
    batch_size: int
    temperature: float
    seed: int
    max_new_tokens: int
    min_label_mass: float
    closing: str
    ray_address: str | None
    pointwise_template: Path | None = None
    pairwise_template: Path | None = None
    criterion_template: Path | None = None
    criterion_pair_template: Path | None = None
    check_template: Path | None = None
    system: str | None = None
    templates: Mapping[str, Path] | None = None
    """Other modes' own templates by name (a plug-in's ``--template``): ``Judge(templates=...)``."""
    factory: JudgeFactory = field(default=make_judge, repr=False, compare=False)

    def make(self, **extra: Any) -> Judge:
        """Build the judge with every option, plus the command's own ``Judge`` arguments (``scale=``...)."""
        return self.factory(self.judge, self.store, self.protocol, self.batch_size, self.temperature, self.seed,
                            self.max_new_tokens, self.min_label_mass, self.ray_address, closing=self.closing,
                            pointwise_template=self.pointwise_template, pairwise_template=self.pairwise_template,
                            **{name: getattr(self, name) for name in _MODE_TEMPLATES if getattr(self, name)},
                            **({"templates": dict(self.templates)} if self.templates else {}),
                            **({"system": self.system} if self.system is not None else {}), **extra)

    def guard(self, items: Path, outputs: dict[str, Path | None], inputs: tuple[Path | None, ...] = ()) -> None:
        """Refuse, before any work, outputs that would overwrite the input, a template, the command's other
        ``inputs`` (a ``--suite``), the store or each other, and a records ``--out`` of no known format."""
        check_outputs(outputs, inputs=[items, self.pointwise_template, self.pairwise_template,
                                       *(getattr(self, name) for name in _MODE_TEMPLATES),
                                       *(self.templates or {}).values(), *inputs],
                      store=self.store if self.store is not None else default_store_path())
        check_record_path(outputs.get("--out"))


_FIELDS = tuple(f.name for f in fields(JudgeOptions) if f.name != "factory")
_MODE_TEMPLATES = ("criterion_template", "criterion_pair_template", "check_template")
OWN_TEMPLATE = "template__"
"""The destination prefix of a mode's own template option (``template__relevance``): into ``templates``."""


def _template(name: str, text: str, dest: str) -> Callable[[Command], Command]:
    return click.option(name, dest, type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
                        help=text)


def _refused(name: str, default: Any, mode: str, why: str, expose: bool = True) -> Callable[[Command], Command]:
    """A hidden option that a command keeps only to refuse it, naming it and saying why, when it is given (its
    default reaches the command, with ``expose``)."""
    def refuse(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if param.name is not None and ctx.get_parameter_source(param.name) is not ParameterSource.DEFAULT:
            raise click.BadOptionUsage(name, f"{name} does not apply to {mode}: {why}", ctx=ctx)
        return value

    return click.option(name, default=default, hidden=True, expose_value=expose, callback=refuse)


Template = tuple[str, str, str]
"""A template option: its flag, the :class:`JudgeOptions` field it sets, and its help."""
JUDGE_FLAGS = {"--judge": "judge", "--protocol": "protocol", "--store": "store", "--batch-size": "batch_size",
               "--temperature": "temperature", "--seed": "seed", "--max-new-tokens": "max_new_tokens",
               "--min-label-mass": "min_label_mass", "--closing": "closing", "--ray": "ray_address",
               "--system": "system"}
"""The judge and engine options by flag, with the :class:`JudgeOptions` field each sets."""
TEMPLATE_FIELDS = {"pointwise": "pointwise_template", "pairwise": "pairwise_template",
                   "criterion": "criterion_template", "criterion_pair": "criterion_pair_template",
                   "check": "check_template"}
"""The templates a judge loads (:class:`~trustjudge.modes._prompts.Prompts`), by a mode's template name."""


def _kind_templates(modes: tuple[str, ...]) -> list[Template]:
    """The template options of a command judging under ``modes`` (mode names): each mode's templates that a judge
    loads (:data:`TEMPLATE_FIELDS`), as the mode declares them (:attr:`Mode.templates`). One template is
    ``--template``; with more, ``--template`` is the first and each other one is ``--<name>-template``."""
    names = [name for mode in modes for name in get_mode(mode).templates if name in TEMPLATE_FIELDS]
    if not names:
        raise ConfigError(f"no judge template among the modes {', '.join(modes)}: declare the command's templates")
    if len(names) == 1:
        return [("--template", TEMPLATE_FIELDS[names[0]],
                 "Your own prompt template (string.Template fields, see docs/formats.md).")]
    first, *others = names
    return [("--template", TEMPLATE_FIELDS[first],
             f"Your own {first} prompt template (string.Template fields, see docs/formats.md)."),
            *((f"--{name.replace('_', '-')}-template", TEMPLATE_FIELDS[name],
               f"Your own {name} prompt template (--template sets the {first} one).") for name in others)]


def judge_options(*kinds: str, templates: list[Template] | None = None, refuses: dict[str, str] | None = None,
                  command: str = "") -> Callable[[Command], Command]:
    """Add the judge and engine options; the command receives them as one ``judging: JudgeOptions``.

    Args:
        kinds: The modes whose judgments the command asks for (``"score"``, ``"compare"``): their templates
            become the command's template options (:func:`_kind_templates`; ``score`` and ``compare``:
            ``--template``, the pointwise one, beside ``--pairwise-template``).
        templates: The template options instead (a mode's command: flag, :class:`JudgeOptions` field, help).
        refuses: Options (``--protocol``, ``--max-new-tokens``, ``--template``) that ``command`` keeps only to
            refuse them, by flag, with why: given, they stop the command (exit 2) before any work.
    """
    listed = _kind_templates(kinds) if templates is None else templates
    refused = dict(refuses or {})
    protocol = _refused("--protocol", "direct", command, refused["--protocol"]) if "--protocol" in refused \
        else PROTOCOL
    max_new_tokens = _refused("--max-new-tokens", 256, command, refused["--max-new-tokens"]) \
        if "--max-new-tokens" in refused else MAX_NEW_TOKENS
    template_options = [_template(flag, text, dest) for flag, dest, text in listed]
    if "--template" in refused:
        template_options = [_refused("--template", None, command, refused["--template"], expose=False)]
    options: list[Callable[[Command], Command]] = [
        JUDGE, protocol, STORE, BATCH_SIZE, TEMPERATURE, SEED, max_new_tokens, MIN_LABEL_MASS, CLOSING,
        *template_options[:1], SYSTEM, RAY, *template_options[1:]]

    def decorate(fn: Command) -> Command:
        @functools.wraps(fn)
        def command(**params: Any) -> Any:
            ctx = click.get_current_context(silent=True)
            factory = ctx.meta.get(JUDGE_FACTORY, make_judge) if ctx is not None else make_judge
            own = {k[len(OWN_TEMPLATE):]: params.pop(k) for k in [k for k in params if k.startswith(OWN_TEMPLATE)]}
            judging = JudgeOptions(**{name: params.pop(name, None) for name in _FIELDS}, factory=factory)
            if any(own.values()):
                judging = replace(judging, templates={k: v for k, v in own.items() if v is not None})
            return fn(judging=judging, **params)

        return _apply(options, command)

    return decorate


def _apply(options: list[Callable[[Command], Command]], fn: Command) -> Command:
    for option in reversed(options):
        fn = option(fn)
    return fn


def _mapping(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str] | None:
    try:
        return parse_mapping(values) or None
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def input_options(fn: Command) -> Command:
    """Add ITEMS and how to read it: ``--format``, ``--map``, ``--skip-invalid``, and ``--quiet``. The command
    gets ``fmt`` as an :class:`~trustjudge.cli._inputs.InputFormat`: the format, carrying the mapping."""
    @functools.wraps(fn)
    def command(**params: Any) -> Any:
        params["fmt"] = InputFormat(params["fmt"], params.pop("column_map"))
        return fn(**params)

    return _apply([
        click.argument("items", type=click.Path(path_type=Path)),
        click.option("--format", "fmt", type=click.Choice(["auto", *FORMATS]), default="auto", show_default=True,
                     help="Input format: trustjudge items (JSONL/CSV), Parquet, a Hugging Face datasets folder "
                          "or file, or a dataset's own format (see docs/formats.md)."),
        click.option("--map", "column_map", multiple=True, callback=_mapping, metavar="FIELD=COLUMN,...",
                     help="Read a table in another schema: which column holds each field, e.g. "
                          "question=prompt,response=output,id=uid (see docs/formats.md)."),
        click.option("--skip-invalid", is_flag=True, help="Skip invalid lines (reported) instead of stopping."),
        click.option("--quiet", "-q", is_flag=True, help="No progress bar or summary."),
    ], command)


def output_options(*, stdout: bool) -> Callable[[Command], Command]:
    """Add ``--out`` (the records: all a command writes with ``stdout``, as JSON lines or Parquet by the name's
    extension; else the JSONL records its result rests on) and ``--dry-run``."""
    out_help = ("Write the records here: JSON lines, or Parquet for a .parquet name (default: standard output)."
                if stdout
                else "Also write the judgment records the result rests on here (JSONL).")
    return functools.partial(_apply, [
        click.option("--out", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None, help=out_help),
        click.option("--dry-run", is_flag=True, help="Print the plan (calls, tokens, stored, time) and stop."),
    ])


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {text!r}") from None


def parse_scales(text: str, param: Any = None) -> list[int]:
    """``--scales``: comma-separated 5, 10 or 100, at least one (checked before any judging)."""
    values = _int_list(text)
    bad = [v for v in values if v not in (5, 10, 100)]
    if bad or not values:
        raise click.BadParameter(f"scales are 5, 10 or 100, got {text!r}", param=param)
    return list(dict.fromkeys(values))


def parse_ks(text: str, param: Any = None) -> list[int]:
    """``--ks``: comma-separated subset sizes of 3 or more."""
    values = _int_list(text)
    if not values or min(values) < 3:
        raise click.BadParameter(f"subset sizes k must be 3 or more, got {text!r}", param=param)
    return values


def parse_deltas(text: str, param: Any = None) -> list[float]:
    """``--delta-sweep``: comma-separated finite tolerances of 0 or more."""
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {text!r}", param=param) from None
    if any(not math.isfinite(v) or v < 0 for v in values):
        raise click.BadParameter(f"deltas must be finite and 0 or more, got {text!r}", param=param)
    return values


RISK_LEVEL = Finite(min=0.0, max=1.0, min_open=True, max_open=True)
"""``--target-agreement`` and ``--risk-delta`` (the risk level of a guarantee): strictly between 0 and 1, on every
command that takes them."""
RISK_DELTA_HELP = ("With --target-agreement: the allowed probability that the guarantee fails (<= 0.5 unless "
                   "--force-delta).")


def resolve_risk_delta(risk_delta: float | None, old_delta: float | None, command: str,
                       default: float | None) -> float | None:
    """``--risk-delta``, or the deprecated ``--delta`` of ``command`` with a warning (one name per meaning:
    ``--delta`` is compare's tie margin); both, disagreeing, are refused; neither: ``default``."""
    if old_delta is None:
        return default if risk_delta is None else risk_delta
    if risk_delta is not None and risk_delta != old_delta:
        raise click.UsageError(f"--delta {old_delta:g} and --risk-delta {risk_delta:g} disagree: give "
                               "--risk-delta only (--delta is its deprecated spelling)")
    from ._common import err

    err.print(f"warning: `{command} --delta` is deprecated: the risk level is --risk-delta, as on select, compare, "
              "checklist, claims, score and criteria (where --delta, if any, is a tie margin)", highlight=False)
    return old_delta


def audit_options(fn: Command) -> Command:
    """Add what an audit measures: ``--scales``, ``--delta``, ``--ks``, ``--bootstrap``, ``--injection``."""
    return _apply([
        click.option("--scales", default="5,100", show_default=True, callback=lambda c, p, v: parse_scales(v, p),
                     help="Pointwise scales to judge and audit."),
        click.option("--delta", default=0.0, show_default=True, type=Finite(min=0.0),
                     help="Score tolerance of the conflict ratio."),
        click.option("--ks", default="3,4,5", show_default=True, callback=lambda c, p, v: parse_ks(v, p),
                     help="Subset sizes k (3 or more) for NTR_k."),
        click.option("--bootstrap", default=1000, show_default=True, type=click.IntRange(min=0),
                     help="Bootstrap resamples over items (0: no intervals)."),
        click.option("--injection", is_flag=True,
                     help="Also score every response with an appended instruction to give the top score, and "
                          "report how far the judge moves (one more pointwise judgment per response and scale)."),
    ], fn)


# -- calibration on the judging commands --------------------------------------------------------------------

FORCE_DELTA = click.option("--force-delta", is_flag=True,
                           help="Accept a risk delta above 0.5: a guarantee that holds with probability under 1/2, "
                                "so fails more often than it holds (refused without this flag).")

CALIBRATION_BY = click.option(
    "--calibration-by", default=None, metavar="FIELD",
    help="A calibration per domain: --calibration is then a JSON map of domain -> calibration file, and each verdict "
         "is calibrated (and kept) by its item's domain, the value of item field FIELD; an item of a domain without "
         "one is abstained (no_calibration_for_domain).")
_NEEDS_CALIBRATION = ("calibration_override", "target_agreement", "risk_delta", "tolerance", "force_delta",
                      "calibration_by")

_CALIBRATION_FIELDS = ("calibration", "calibration_override", "target_agreement", "risk_delta", "summary",
                       "tolerance", "force_delta", "calibration_by")


SUMMARY_HELP = ("Also write each system's headline value (mean score, aggregate, satisfaction, claims F1 or "
                "precision, win rate) with a 95% bootstrap interval over items and its unscored count, as JSON "
                "here (and print it).")


@dataclass(frozen=True)
class CalibrationOptions:
    """``--calibration`` and the options that go with it, as given (``path`` None: no calibration asked)."""

    path: Path | None = None
    override: bool = False
    target: float | None = None
    delta: float = 0.1
    summary: Path | None = None
    tolerance: float | None = None
    """Score: the agreement tolerance the file must have been fitted with (``None``: the file's)."""
    force_delta: bool = False
    """``--force-delta``: accept a risk delta above 0.5 (refused otherwise)."""
    by: str | None = None
    """``--calibration-by FIELD``: ``path`` is then a map of domain -> calibration file (:mod:`._domains`)."""


def calibration_options(mode: str, *, summary: bool = True) -> Callable[[Command], Command]:
    """Add ``--calibration``, ``--calibration-override``, ``--target-agreement``, ``--risk-delta`` (and, with
    ``summary``, ``--summary``); the command receives them as one ``calibrating: CalibrationOptions``.

    For a mode without calibration units (a plug-in's) the options are hidden and refused when given,
    saying why, so that nobody believes a calibration was applied.
    """
    if not calibrates(mode):
        why = (f"--{{}} does not apply to {mode}: calibration covers {', '.join(calibration_modes())} (the {mode} "
               "mode declares no calibration units)")

        def refuse(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
            if param.name is not None and ctx.get_parameter_source(param.name) is not ParameterSource.DEFAULT:
                name = param.name.replace("_", "-")
                raise click.BadOptionUsage(f"--{name}", why.format(name), ctx=ctx)
            return value

        hidden: list[Callable[[Command], Command]] = [
            click.option("--summary", type=click.Path(dir_okay=False, path_type=Path), default=None,
                         help=SUMMARY_HELP),
            click.option("--calibration", hidden=True, expose_value=False, callback=refuse),
            click.option("--calibration-override", is_flag=True, hidden=True, expose_value=False, callback=refuse),
            *[click.option(f"--{name}", hidden=True, expose_value=False, callback=refuse)
              for name in ("target-agreement", "risk-delta", "calibration-by")],
            click.option("--force-delta", is_flag=True, hidden=True, expose_value=False, callback=refuse)]

        def summary_only(fn: Command) -> Command:
            @functools.wraps(fn)
            def command(**params: Any) -> Any:
                return fn(calibrating=CalibrationOptions(summary=params.pop("summary", None)), **params)

            return _apply(hidden, command)

        return summary_only

    level = RISK_LEVEL
    options: list[Callable[[Command], Command]] = [
        click.option("--calibration", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
                     help=f"A {mode} calibration file (`trustjudge calibrate --mode {mode}`): every verdict also gets "
                          "its calibrated probabilities and confidence (the raw ones stay); zero extra model calls."),
        click.option("--calibration-override", is_flag=True,
                     help="Use the calibration although it was fitted for another judge, template, protocol or "
                          "labels (every record says so)."),
        click.option("--target-agreement", type=level, default=None,
                     help="With --calibration: keep only verdicts confident enough that agreement with humans on "
                          "the kept ones is at least this with probability >= 1 - risk delta; the rest say "
                          "`abstained` and why."),
        click.option("--risk-delta", type=level, default=DEFAULT_RISK_DELTA, show_default=True, help=RISK_DELTA_HELP),
        FORCE_DELTA, CALIBRATION_BY,
    ]
    if levelled(mode):  # a verdict over a scale's levels agrees within a tolerance
        options.append(click.option("--tolerance", type=Finite(min=0.0), default=None,
                                    help="With --calibration: the agreement tolerance in score points (default: the "
                                         "file's); a file fitted with another is refused."))
    if summary:
        options.append(click.option("--summary", type=click.Path(dir_okay=False, path_type=Path), default=None,
                                    help=SUMMARY_HELP + " With --calibration, the run's calibration summary "
                                         "(coverage, guarantee, calibration set) too, the systems under "
                                         "per_system."))

    def decorate(fn: Command) -> Command:
        @functools.wraps(fn)
        def command(**params: Any) -> Any:
            values = {name: params.pop(name, None) for name in _CALIBRATION_FIELDS}
            ctx = click.get_current_context(silent=True)
            if values["calibration"] is None:
                for name in _NEEDS_CALIBRATION:
                    if ctx is not None and name in ctx.params and \
                            ctx.get_parameter_source(name) is not ParameterSource.DEFAULT:
                        raise click.UsageError(f"--{name.replace('_', '-')} needs --calibration")
            calibrating = CalibrationOptions(values["calibration"], bool(values["calibration_override"]),
                                             values["target_agreement"],
                                             0.1 if values["risk_delta"] is None else values["risk_delta"],
                                             values["summary"], values["tolerance"], bool(values["force_delta"]),
                                             values["calibration_by"])
            return fn(calibrating=calibrating, **params)

        return _apply(options, command)

    return decorate
