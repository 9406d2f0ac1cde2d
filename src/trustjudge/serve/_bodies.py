"""Request and response bodies: the item schema (documentation only: the library validates items), the
service's own requests (audit, rank, health, stats), and the bodies of a mode's route, built from the mode
(:func:`mode_bodies`: the request from the fields of its options dataclass, the response from its record)."""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, SkipValidation, TypeAdapter, create_model

from ..audit._readers import scaled
from ..errors import ConfigError, InputError
from ..io._items import Check, Criterion, parse_checklist, parse_criteria
from ..modes._prompts import LabelSet, Protocol
from ..modes._registry import Mode

__all__ = ["AuditRequest", "Body", "Calibrated", "Health", "ItemIn", "LevelCalibrated", "ModeBodies", "RankRequest",
           "Stats", "mode_bodies"]

MAX_BOOTSTRAP = 10_000
MAX_SEED = 2**32 - 1
"""The largest bootstrap seed (numpy seeds are 0 .. 2**32 - 1)."""

Scale = Literal[5, 10, 100]

Text = str | float
"""A text field of an item: a string, or a number, read as its JSON text (``"id": 3`` is ``"3"``), as in an items
file and ``items_from_dicts`` (docs/formats.md); a boolean, a list or an object is refused (422 naming it)."""
TEXT_NOTE = " A number where a text is expected is read as its JSON text (`\"id\": 3` is `\"3\"`), as in a file."


# -- request and response bodies --------------------------------------------------------------------
# The item models only document the schema (SkipValidation below): the library validates items, so
# the HTTP API accepts exactly what a JSONL file accepts and reports problems the same way.


class CriterionIn(BaseModel):
    """A rubric criterion."""

    model_config = ConfigDict(extra="forbid")
    name: Text = Field(description="Unique within the item (or suite).")
    description: Text = Field(description="What the criterion asks.")
    weight: float = Field(1.0, ge=0.0, description="Weight in the aggregate.")
    levels: list[Text] | None = Field(None, description="Descriptions of the levels 1..N, lowest first (2-10); "
                                                        "default: the request's scale.")


class CheckIn(BaseModel):
    """A yes/no checklist question."""

    model_config = ConfigDict(extra="forbid")
    id: Text | None = Field(None, description="Default: the check's 1-based position.")
    text: Text = Field(description="The question asked about the response.")
    weight: float = Field(1.0, ge=0.0, description="Weight in the expected satisfaction.")


class ClaimIn(BaseModel):
    """A claim a response makes, given instead of extracted by the judge (/v1/claims)."""

    model_config = ConfigDict(extra="forbid")
    text: Text = Field(description="The claim.")
    human: Text | None = Field(None, description="Human verification label: SUPPORTED, PARTIAL, UNSUPPORTED or "
                                                 "UNKNOWN (any case), for the audit.")
    source: Text | None = Field(None, description="The id of the item's source the claim cites (a key of the item's "
                                                  "sources): it is verified against that text alone.")


class TurnIn(BaseModel):
    """One turn of a response given as a trajectory (an agent's run)."""

    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant", "tool"] = Field(description="Who spoke.")
    content: Text = Field(description="What the turn says (may be empty only with a tool_output).")
    tool_output: Text | None = Field(None, description="What the tool the turn called returned.")
    name: Text | None = Field(None, description="The tool's or agent's name: 1-64 letters, digits or _.:/-.")


class ResponseIn(BaseModel):
    """One response to judge: its text, or its turns."""

    model_config = ConfigDict(extra="allow")
    id: Text | None = Field(None, description="Unique within the item; default: the response's 0-based index.")
    text: Text | None = Field(None, description="The response text (may be empty: then it is unscored, "
                                                 "`empty_response`). Required unless turns are given.")
    turns: list[TurnIn] | None = Field(
        None, description="The response as a trajectory, instead of text: judged as a transcript in which "
                          "each turn is quoted (no turn can close it or pose as the judge's).")
    system: Text | None = Field(None, description="The system that wrote it (used by /v1/rank).")
    human_score: float | None = Field(None, description="Optional human score, for the audit.")
    checklist: list[CheckIn | str] | None = Field(None, description="Checks asked of this response only.")
    human_criteria: dict[str, float] | None = Field(None, description="Human score per criterion name.")
    human_checks: dict[str, bool | float | str] | None = Field(
        None, description="Human label per check id: true/false, a number in [0, 1], or a label name.")
    claims: list[ClaimIn | str] | None = Field(
        None, description="The response's claims (/v1/claims), verified as given; default: extracted by the judge.")
    images: list[str] | str | None = Field(
        None, description="Images of the response (what the model drew), as data: URIs (one or a list, up to 64).")


class PairIn(BaseModel):
    """Two responses of an item to compare."""

    model_config = ConfigDict(extra="allow")
    first: Text = Field(description="Response id shown first.")
    second: Text = Field(description="Response id shown second.")
    human: Text | None = Field(None, description="Human preference: first/second/tie (also A/B/C, 1/2/0).")
    annotators: list[Text] | None = Field(None, description="Each annotator's preference.")


class ItemIn(BaseModel):
    """A question with its responses: the schema of one JSONL line (nested or flat pairwise form). A number where
    a text is expected is read as its JSON text (`"id": 3` is `"3"`), as in an items file."""

    model_config = ConfigDict(extra="allow")
    id: Text | None = Field(None, description="Item id (required in the nested form).")
    question: Text
    context: Text | None = Field(None, description="Optional input or context (`input` is a synonym).")
    input: Text | None = None
    reference: Text | None = Field(None, description="Optional reference answer.")
    responses: list[ResponseIn] | None = Field(None, description="Nested form: one or more responses.")
    pairs: list[PairIn] | None = Field(None, description="Pairs to compare; default: every pair of responses.")
    response_a: Text | None = Field(None, description="Flat pairwise form: first response.")
    response_b: Text | None = Field(None, description="Flat pairwise form: second response.")
    system_a: Text | None = None
    system_b: Text | None = None
    label: Text | None = Field(None, description="Flat pairwise form: human preference (A/B/C, ...).")
    profile: Text | None = Field(None, description="Who the answer is for (grounding, quoted into the prompt).")
    knowledge: Text | None = Field(None, description="Knowledge the judgment must be grounded in.")
    evidence: list[Text] | Text | None = Field(None, description="Passages the judgment is grounded in, in order.")
    criteria: list[CriterionIn] | None = Field(None, description="Rubric criteria of this item (/v1/criteria).")
    checklist: list[CheckIn | str] | None = Field(None, description="Checks asked of every response "
                                                                    "(/v1/checklist).")
    gold_claims: list[str] | None = Field(None, description="Reference claims to match against (/v1/claims with "
                                                            "match); default: claims extracted from the reference.")
    sources: dict[str, str] | None = Field(None, description="Cited sources by id (/v1/claims): a claim citing one "
                                                             "is verified against its text.")
    images: list[str] | str | None = Field(None, description="The task's images, as data: URIs (one or a list, "
                                                             "up to 64); a vision judge sees them.")
    reference_images: list[str] | str | None = Field(None, description="Reference images (a ground-truth figure), "
                                                                       "as data: URIs.")
    images_a: list[str] | str | None = Field(None, description="Flat pairwise form: the first response's images.")
    images_b: list[str] | str | None = Field(None, description="Flat pairwise form: the second response's images.")


Items = SkipValidation[list[ItemIn]]
ITEMS_DOC = ("Items with the schema of one JSONL line; validated by the library (422 names item and field)."
             + TEXT_NOTE)


class Body(BaseModel):
    """What every request body is: no unknown field, no non-finite number."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Calibrated(Body):
    """The calibration fields of the modes with calibration units (/v1/compare, /v1/checklist, /v1/claims,
    /v1/score, /v1/criteria)."""

    calibration: dict[str, Any] | None = Field(
        None, description="A calibration file's JSON object (`trustjudge calibrate` in this route's mode) to apply: "
                          "every verdict also gets a `calibrated` block (probabilities, verdict, confidence; the raw "
                          "fields stay) and the response a `calibration` summary, with zero extra model calls. One "
                          "fitted for another mode, judge, template or protocol is refused (422 naming why).")
    calibration_name: str | None = Field(
        None, description="The name of a calibration the server was started with (`trustjudge serve --calibration "
                          "NAME=PATH`; GET /v1/stats lists them), instead of sending its JSON: a client never names "
                          "a file. Unknown, or given with `calibration`: 422.")
    calibration_override: bool = Field(
        False, description="Accept a calibration fitted for another judge, template, protocol or checklist labels "
                           "(every record then lists what was overridden; a mode or class mismatch never is).")
    target_agreement: float | None = Field(
        None, gt=0.0, lt=1.0, description="With calibration: keep only the verdicts confident enough that agreement "
                                           "with humans on the kept ones is >= this with probability >= 1 - "
                                           "risk_delta; the rest get `abstained` with the reason. A target the "
                                           "calibration set cannot support is a 422 before any judging.")
    risk_delta: float = Field(0.1, gt=0.0, lt=1.0, description="With target_agreement: the allowed probability "
                                                                "that the guarantee fails (at most 0.5 unless "
                                                                "force_delta: 422 otherwise).")
    force_delta: bool = Field(False, description="Accept a risk_delta above 0.5: a guarantee that holds with "
                                                 "probability under 1/2, so fails more often than it holds.")
    calibration_by: str | None = Field(
        None, description="A calibration per domain: the item field naming each item's domain (with "
                          "domain_calibrations, instead of calibration): each verdict is calibrated, and kept, by its "
                          "item's domain's; an item of a domain without one is abstained (no_calibration_for_domain). "
                          "The `calibration` summary then has each domain's under `domains`.")
    domain_calibrations: dict[str, str | dict[str, Any]] | None = Field(
        None, description="With calibration_by: each domain's calibration, the name of one the server holds or a "
                          "calibration file's JSON object (one mode for all).")


class LevelCalibrated(Calibrated):
    """The calibration fields of /v1/score and /v1/criteria: those of every calibrated mode, and the tolerance."""

    tolerance: float | None = Field(
        None, ge=0.0, description="With calibration: the score points a verdict may be from the human's and still "
                                  "agree. It must be the calibration's own (`trustjudge calibrate --tolerance`; a "
                                  "mismatch is a 422, never overridable); default: the calibration's. A calibration "
                                  "makes every record keep its `distribution` (the calibration reads it).")


class AuditRequest(Body):
    """Judge what the store lacks, then audit consistency and agreement with human labels."""

    items: Items = Field(description=ITEMS_DOC)
    scales: list[Scale] = Field([5, 100], min_length=1, description="Pointwise scales to judge and audit.")
    delta: float = Field(0.0, ge=0.0, description="Score tolerance of the conflict ratio.")
    ks: list[int] = Field([3, 4, 5], min_length=1, description="Subset sizes k (>= 3) for NTR_k.")
    bootstrap: int = Field(1000, ge=0, le=MAX_BOOTSTRAP, description="Bootstrap resamples (0: no intervals).")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Bootstrap seed.")
    protocol: Protocol | None = Field(None, description="direct or cot; default: the server's protocol.")


class RankRequest(Body):
    """Judge the items (pairwise and pointwise) and rank the systems behind the responses."""

    items: Items = Field(description=ITEMS_DOC + " Responses need `system`; items need two or more responses.")
    scale: Scale = Field(10, description="Scale of the mean-score ranking.")
    delta: float = Field(0.0, ge=0.0, description="Tie margin of the pairwise verdicts.")
    method: Literal["single", "two_pass", "likelihood", "ppl"] = Field(
        "likelihood", description="Aggregation whose verdicts give the hard fit, Elo and win rates.")
    score_method: Literal["discrete", "geval", "expected", "trustjudge"] = "trustjudge"
    ties: Literal["davidson", "rao-kupper"] = "davidson"
    bootstrap: int = Field(200, ge=0, le=MAX_BOOTSTRAP, description="Bootstrap replicates over items (0: none).")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Bootstrap seed.")
    protocol: Protocol | None = Field(None, description="direct or cot; default: the server's protocol.")


class Health(BaseModel):
    """Liveness and what the server judges with."""

    status: Literal["ok"]
    judge: str


class Stats(BaseModel):
    """Counters since the server started."""

    requests: int = Field(description="Score/compare/audit requests the worker ran.")
    engine_runs: int = Field(description="Judge calls made (one per merged batch of requests).")
    merged_requests: int = Field(description="Requests that shared a judge call with another request.")
    judgments: int = Field(description="Records returned.")
    model_calls: int
    from_store: int
    in_progress: int = Field(description="Requests in progress (receiving their body, waiting or judged), this one "
                                         "included.")
    calibrations: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="The calibrations a request may name (`calibration_name`), by name: each "
                                          "one's mode, judge, method, number of labelled verdicts and data hash.")


# -- a mode's route -----------------------------------------------------------------------------------

Parse = Callable[[Any, str], Any]
"""A request field's value (as sent) and its name -> the option's value: InputError (422 naming the field) or
ConfigError (400) when it is bad."""


@dataclass(frozen=True)
class _LibraryType:
    """An option type the request sends as JSON that the library validates (the schema only documents it)."""

    schema: Any
    parse: Callable[[Any, str, int], Any]
    key: str
    """The name the library's errors give the value (``criteria[0].name``)."""


_LIBRARY_TUPLES: dict[Any, _LibraryType] = {
    Criterion: _LibraryType(SkipValidation[list[CriterionIn]], parse_criteria, "criteria"),
    Check: _LibraryType(SkipValidation[list[CheckIn | str]], parse_checklist, "checklist"),
}
_RESERVED = frozenset({"items", *LevelCalibrated.model_fields})


def _suite_parser(kind: _LibraryType) -> Parse:
    def parse(raw: Any, name: str) -> Any:
        try:
            return kind.parse(raw, "request", 0)
        except InputError as exc:
            field = exc.field
            if field is not None and name != kind.key and field.startswith(kind.key):
                field = name + field[len(kind.key):]  # the request's own field name
            raise InputError(exc.reason, line=0, field=field) from None
    return parse


def _labels(raw: Any, name: str) -> LabelSet:
    return LabelSet.parse(raw)


def _label_text(labels: LabelSet) -> str:
    if labels.values is None:
        return ",".join(labels.labels)
    return ",".join(f"{lab}={value:g}" for lab, value in zip(labels.labels, labels.values))


def _without_none(annotation: Any) -> tuple[Any, bool]:
    """``X | None`` -> ``(X, True)``; any other type -> ``(it, False)``."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        args = typing.get_args(annotation)
        rest = tuple(a for a in args if a is not type(None))
        if len(rest) < len(args):
            return (rest[0] if len(rest) == 1 else Union[rest]), True  # noqa: UP007 (a runtime union of types)
    return annotation, False


def _names_a_path(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, PurePath):
        return True
    return any(_names_a_path(a) for a in typing.get_args(annotation))


def _request_field(f: dataclasses.Field[Any], annotation: Any) -> tuple[Any, Any, Parse | None] | str:
    """Option ``f`` as a request field: ``(annotation, pydantic field, parse)`` (``parse`` None: the value as
    validated), or why a request cannot set it."""
    meta = f.metadata
    described = str(meta.get("help", "")).strip()
    if meta.get("served") is False:
        return "not served"
    if f.name in _RESERVED or f.name.startswith(("_", "model_")) or hasattr(BaseModel, f.name):
        return "its name is taken by the request"
    if _names_a_path(annotation):
        return "a path on the server"
    base, optional = _without_none(annotation)
    if base is LabelSet:
        default = f' Default: "{_label_text(f.default)}".' if isinstance(f.default, LabelSet) else ""
        return (str | None, Field(None, description=f'{described} Written "NAME=VALUE,..." or "NAME,...".'
                                                     f"{default}"), _labels)
    args = typing.get_args(base)
    if typing.get_origin(base) is tuple and len(args) == 2 and args[1] is Ellipsis and args[0] in _LIBRARY_TUPLES:
        kind = _LIBRARY_TUPLES[args[0]]
        return (kind.schema | None, Field(None, description=f"{described} Validated like an item's "
                                                            f"{kind.key} (422 naming the field)."),
                _suite_parser(kind))
    if "choices" in meta:
        base = Literal[tuple(meta["choices"])]
        annotation = base | None if optional else base
    bounds = {name: meta[name] for name in ("ge", "gt", "le", "lt") if name in meta}
    if f.default is not dataclasses.MISSING:
        info = Field(f.default, description=described, **bounds)
    elif f.default_factory is not dataclasses.MISSING:
        info = Field(default_factory=f.default_factory, description=described, **bounds)
    else:
        info = Field(description=described, **bounds)
    try:
        TypeAdapter(typing.Annotated[annotation, info]).json_schema()
    except (PydanticUserError, TypeError, ValueError) as exc:
        return f"its type has no JSON schema ({type(exc).__name__})"
    return annotation, info, None


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", name) if part) or "Mode"


def _records_schema(record: type[Any]) -> Any:
    """The record dataclass as the response's record schema; where pydantic cannot describe it, a model that
    names its fields (any JSON value each)."""
    try:
        TypeAdapter(record).json_schema()
        return record
    except (PydanticUserError, TypeError, ValueError):
        fields: dict[str, Any] = {f.name: (Any, ...) for f in dataclasses.fields(record)}
        return create_model(record.__name__, __doc__=record.__doc__, **fields)


@dataclass(frozen=True)
class ModeBodies:
    """A mode's route bodies, built from the mode: the request (items and the mode's options), the response
    (its records, and a calibration summary where the mode can be calibrated)."""

    mode: Mode
    request: type[BaseModel]
    response: type[BaseModel]
    parsers: dict[str, Parse | None]
    """The request's option fields by name, with the parser of those the library validates."""
    skipped: dict[str, str]
    """Options a request cannot set (they keep their defaults), with why."""
    calibrated: bool
    """Whether the request takes a calibration (the modes with calibration units)."""

    def options(self, body: BaseModel) -> Any:
        """The mode's options for ``body``: fields the library validates parsed (unsent: the default)."""
        values: dict[str, Any] = {}
        for name, parse in self.parsers.items():
            value = getattr(body, name)
            if parse is None:
                values[name] = value
            elif value is not None:
                values[name] = parse(value, name)
        return self.mode.options(**values)

    @property
    def note(self) -> str:
        """What the route's description says beyond the mode's summary."""
        notes = []
        if self.calibrated:
            levels = self.mode.calibration is not None and scaled(self.mode.calibration)
            notes.append("Takes a `calibration`, or the `calibration_name` of one the server holds (with "
                         "`target_agreement`, `risk_delta`, `calibration_override`"
                         + (", `tolerance`" if levels else "") + "): "
                         "each verdict gains a `calibrated` block and the response a `calibration` summary"
                         + (" (and each record keeps its `distribution`)" if levels else "") + ".")
        if self.skipped:
            notes.append("Options a request cannot set (their defaults apply): "
                         + "; ".join(f"`{name}` ({why})" for name, why in self.skipped.items()) + ".")
        return " ".join(notes)


def mode_bodies(mode: Mode) -> ModeBodies:
    """The request and response bodies of ``mode``'s route: each field of its options dataclass a request
    field (its type from the annotation, its description from ``metadata["help"]``, ``choices`` and bounds
    enforced), criteria, checklists and label sets validated by the library as in an item; the response's
    records the mode's record dataclass."""
    try:
        hints = typing.get_type_hints(mode.options, include_extras=True)
    except (NameError, TypeError) as exc:
        raise ConfigError(f"mode {mode.name!r}: the types of its options cannot be read ({exc})") from None
    calibrated = mode.calibration is not None
    items_doc = ITEMS_DOC + (f" Each needs {mode.min_responses} or more responses." if mode.min_responses > 1
                             else "")
    fields: dict[str, Any] = {"items": (Items, Field(description=items_doc))}
    parsers: dict[str, Parse | None] = {}
    skipped: dict[str, str] = {}
    for f in dataclasses.fields(mode.options):
        got = _request_field(f, hints[f.name])
        if isinstance(got, str):
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"mode {mode.name!r}: option {f.name!r} cannot be sent in a request ({got}) and "
                                  "has no default: give it one to serve the mode")
            skipped[f.name] = got
            continue
        annotation, info, parse = got
        fields[f.name] = (annotation, info)
        parsers[f.name] = parse
    name = _camel(mode.name)
    summary = mode.summary or f"Judge in the {mode.name} mode."
    base = (LevelCalibrated if scaled(mode.calibration) else Calibrated) if mode.calibration is not None else Body
    request = create_model(f"{name}Request", __base__=base,
                           __doc__=f"{summary} The items, and the {mode.name} mode's options.", **fields)
    out: dict[str, Any] = {"records": (list[_records_schema(mode.record)],  # type: ignore[misc]
                                       Field(description=f"The {mode.name} records in input order (the CLI's "
                                                         "records)."))}
    if calibrated:
        out["calibration"] = (dict[str, Any] | None, Field(None, description="With a request calibration: coverage, "
                                                           "the guarantee and the calibration set it rests on."))
    response = create_model(f"{name}Response", __doc__=f"The {mode.name} records in input order.", **out)
    return ModeBodies(mode, request, response, parsers, skipped, calibrated)
