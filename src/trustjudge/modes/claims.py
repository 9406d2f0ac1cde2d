"""Claim-level evaluation: extract, verify, match, with the judge's probabilities kept to the final numbers.

1. **Extract** (where the input gives no claims): one stored generation per response ("- claim" lines, then
   END). An extraction that cannot be parsed leaves the response unscored with its reason, never an empty
   claim list; "NONE" is an explicit empty list.
2. **Verify** each claim against the item's evidence (passages, knowledge, else the reference): the
   distribution over SUPPORTED / PARTIAL / UNSUPPORTED (and UNKNOWN, when asked), one prompt per claim
   with the evidence first and the claim last, so a response's claims share the prompt's prefix.
3. **Match** predicted claims with gold claims (the item's ``gold_claims``, else claims extracted from its reference):
   P(match) per pair from YES/NO; coverage of a gold claim is the noisy-OR over predictions, 1 - prod(1 - p)
   (``coverage="noisy_or"``), or its best single match, max p (``coverage="max"``); the one-to-one assignment
   maximising total P(match) (Hungarian) gives the expected true positives, so its expected F1 = 2 E[TP] /
   (predicted + gold) is exact (the denominator is fixed). LiveDRBench's greedy rule (each prediction in order takes
   the first unmatched gold claim with P >= 0.5) is reported beside it, in the given and the reversed order.

Each stage's prompt can be replaced by name (``templates={"extract": ..., "verify": ..., "match": ...}``); the
prompt is part of every stored judgment's key, so another template is another judgment. With ``verify=False`` only
extraction (or the given claims) and matching run: a match-only protocol needs no evidence. A given claim may cite
one of the item's ``sources`` (``{"text": ..., "source": "s1"}``): it is verified against that source's text alone,
and the record gives the expected share of cited claims their sources support.

Independence: the count distributions treat claims as independent given the response (stated in records).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

from ..audit._readers import PartLabelUnits
from ..backends import GenerateRequest
from ..engine import _aggregates as A
from ..engine._asking import Question, Sampling
from ..engine._engine import EMPTY_RESPONSE, TRUNCATED, Outcome
from ..errors import BackendError, ConfigError, InputError
from ..io._items import Claim, Item, Response
from . import _audits, _reports
from ._base import Asking, AuditContext, Cost, Format, Task, VerifiedCalibration, text_bytes
from ._cascading import ByPart, Records
from ._claims_matching import Coverage
from ._claims_matching import matching as _matching
from ._prompts import (
    ANSWER_MARKER,
    DEFAULT_TAGS,
    EXTRACT_FIELDS,
    MATCH_FIELDS,
    SYSTEM,
    VERIFY_FIELDS,
    YES_NO,
    Grounding,
    LabelSet,
    Protocol,
    check_template,
    grounding_block,
    quote,
    read_template,
    tag_pattern,
)
from ._provenance import share_se, stamp
from ._records import ClaimResult, ClaimsRecord
from ._registry import MAX_EXTRACTION_TOKENS, JudgeSettings, Mode, TemplateSpec, option
from ._sections import Section
from ._summaries import CLAIMS_SUMMARY, claims_ranked

UNPARSEABLE = "unparseable_extraction"
NOT_EXTRACTED = "not_extracted"
"""The unscored reason of a response whose claims are to be extracted, in :meth:`ClaimsTask.records` (which
sees only what is known before extraction); :meth:`ClaimsTask.run` extracts them."""
_REFERENCE = "\x00reference"

TOO_MANY = "too_many_claims"
END = "END"
_LINE = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+(.*\S)\s*$")

VERIFY = LabelSet(("SUPPORTED", "PARTIAL", "UNSUPPORTED"), (1.0, 0.5, 0.0))
VERIFY_UNKNOWN = LabelSet(("SUPPORTED", "PARTIAL", "UNSUPPORTED", "UNKNOWN"), (1.0, 0.5, 0.0, 0.0))


def parse_claims(text: str, finish_reason: str) -> list[str] | str:
    """The claims of an extraction, or why there are none (an unscored reason)."""
    if finish_reason == "length":
        return TRUNCATED
    body = text.split(END, 1)[0]
    lines = [m.group(1) for line in body.splitlines() if (m := _LINE.match(line))]
    if lines and all(x.strip().upper().rstrip(".") == "NONE" for x in lines):
        return []  # "- NONE": the judge said there is no claim, in list form
    if lines:
        return lines
    if body.strip().upper().rstrip(".") == "NONE":
        return []
    return UNPARSEABLE


STAGES: dict[str, tuple[str, set[str]]] = {
    "extract": ("extract.txt", EXTRACT_FIELDS), "verify": ("verify.txt", VERIFY_FIELDS),
    "match": ("match.txt", MATCH_FIELDS)}
"""The stages whose prompt a user may replace: name -> (packaged file, required fields)."""
COVERAGE_RULES: tuple[str, ...] = ("noisy_or", "max")
_Texts = tuple[str, str, str]


def stage_templates(given: Mapping[str, str | Path] | None) -> _Texts | None:
    """The extraction, verification and matching template texts, each a user's where ``given`` names its stage
    (a :class:`~pathlib.Path`, or a string: a path unless it holds a newline or a ``$``, then the text itself),
    checked for the stage's fields; ``None`` where nothing is given (the packaged ones)."""
    if not given:
        return None
    if not isinstance(given, Mapping):
        raise ConfigError(f"claims templates: a mapping from stage name to a template's text or path, got a "
                          f"{type(given).__name__}")
    for name in given:
        if name not in STAGES:
            raise ConfigError(f"unknown claims stage {name!r} in templates (the stages are {', '.join(STAGES)})")
    texts: list[str] = []
    for stage, (file, fields) in STAGES.items():
        value = given.get(stage)
        if value is None:
            texts.append(read_template(None, file, fields).template)
            continue
        if not isinstance(value, (str, Path)):
            raise ConfigError(f"claims {stage} template: a template's text or path, got a {type(value).__name__}")
        if isinstance(value, Path) or ("\n" not in value and "$" not in value):
            try:
                text = Path(value).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"cannot read template {value} (the claims {stage} template): {exc}") from exc
            what = f"claims {stage} template {value}"
        else:
            text, what = value, f"claims {stage} template (given as text)"
        check_template(text, what, fields)
        texts.append(text)
    return texts[0], texts[1], texts[2]


@cache
def _templates(texts: _Texts | None = None) -> tuple[string.Template, string.Template, string.Template]:
    """The extraction, verification and matching templates: ``texts``, else the packaged ones (read once)."""
    if texts is not None:
        return string.Template(texts[0]), string.Template(texts[1]), string.Template(texts[2])
    return (read_template(None, "extract.txt", EXTRACT_FIELDS), read_template(None, "verify.txt", VERIFY_FIELDS),
            read_template(None, "match.txt", MATCH_FIELDS))


_TEMPLATE_TAG = re.compile(r"<\s*/?\s*([A-Za-z_][\w-]*)(?:\s[^<>]*)?>")


@cache
def _tags(texts: _Texts | None) -> re.Pattern[str]:
    """The delimiter tags a quoted text may not write: the packaged ones and a user template's own (as
    :class:`~trustjudge.modes._prompts.Prompts` does for the other modes)."""
    found = _TEMPLATE_TAG.findall("".join(texts)) if texts is not None else []
    return tag_pattern((*DEFAULT_TAGS, *found))


_Extracted = dict[tuple[str, str], tuple[list[str] | str, str | None]]
"""Per (item id, response id or the reference's key): the parsed claims (or why none) and the raw text."""


@dataclass(frozen=True)
class _Entry:
    """Where one response's verification and matching questions sit in a chunk's question list."""

    item: Item
    response: Response
    claims: list[str] | str
    cited: list[str | None]
    """Per claim, the id of the source it cites (``None``: verified against the item's evidence)."""
    raw: str | None
    start: int
    gold: list[str] | str | None
    match_start: int


@dataclass(frozen=True)
class ClaimsTask(VerifiedCalibration, Task):
    """Claims of every response: extracted (or given), verified, optionally matched against gold claims.

    It asks in stages, since the claims are known only after extraction: :meth:`run` extracts first (stored
    generations), then asks the verification and matching questions in one go. :meth:`questions` and
    :meth:`records` see only what is known before extraction: the given claims (and given gold claims); a
    response whose claims are to be extracted asks nothing there and its record is unscored
    ``not_extracted``. So :meth:`Judge.plan` counts the label questions of given claims and no extraction.
    """

    kind: ClassVar[str] = "claims"
    plan_note: ClassVar[str] = ("claim extractions, and the questions of the claims they give: only given claims "
                                "(and given gold claims) are planned")
    chunk_weight: ClassVar[int] = 8
    unknown: bool = False
    """Add UNKNOWN to the verification labels (evidence without content on the claim)."""
    k: int | None = None
    """K of E[F1@K] (recall counts supported claims up to K); ``None``: not computed."""
    match: bool = False
    min_overlap: float = 0.0
    """Prefilter for matching: pairs whose word overlap (Jaccard) is below this are not judged (P = 0)."""
    max_new_tokens: int = 512
    max_claims: int = 32
    """An extraction with more claims than this is unscored (``too_many_claims``): it bounds the work."""
    protocol: Protocol = "direct"
    system: str = SYSTEM
    """The system prompt of every extraction, verification and match (the judge's)."""
    templates: _Texts | None = None
    """The extraction, verification and matching template texts (:func:`stage_templates`); ``None``: packaged."""
    verify: bool = True
    """Verify each claim against the evidence; ``False``: match-only (no verification question, no evidence)."""
    coverage: Coverage = "noisy_or"
    """How P(match) over the predictions gives a gold claim's coverage: ``noisy_or`` or ``max``."""
    match_labels: LabelSet | None = None
    """The match question's labels, each valued (a benchmark's 0-3 grade: ``3=1,2=1,1=0,0=0``): P(match) is the
    expected value, the record's ``hard_match`` the most probable label's; ``None``: YES/NO."""

    @property
    def match_values(self) -> tuple[float, ...] | None:
        """The values of :attr:`match_labels` (``None``: the YES/NO question)."""
        return self.match_labels.values if self.match_labels is not None else None

    @property
    def labels(self) -> LabelSet:
        return VERIFY_UNKNOWN if self.unknown else VERIFY

    def check(self, item: Item) -> None:
        for i, r in enumerate(item.responses):
            for j, c in enumerate(r.claims or ()):
                if c.source is not None and c.source not in (item.sources or {}):
                    known = f"its sources: {', '.join(item.sources)}" if item.sources else "the item has no sources"
                    raise InputError(f"names no source of this item: {c.source!r} ({known})", line=item.line,
                                     field=f"responses[{i}].claims[{j}].source")
        uncited = any(r.claims is None or any(c.source is None for c in r.claims) for r in item.responses)
        if self.verify and uncited and not evidence_of(item):
            raise InputError("has no evidence to verify claims against (give evidence, knowledge or a reference)",
                             line=item.line, field="evidence")
        if self.match and item.gold_claims is None and not item.reference:
            raise InputError("has neither gold_claims nor a reference to match claims against", line=item.line,
                             field="gold_claims")

    def size(self, item: Item) -> int:
        """At most this many verification and matching questions (extracted responses count ``max_claims``)."""
        gold = len(item.gold_claims) if item.gold_claims is not None else self.max_claims if item.reference else 0
        total = 0
        for r in item.responses:
            n = len(r.claims) if r.claims is not None else self.max_claims
            total += n * (int(self.verify) + (gold if self.match else 0))
        return total

    def cost(self, item: Item) -> Cost:
        """An upper bound where claims are extracted: ``max_claims`` claims per response (and per reference),
        each quoting the whole evidence, their texts together as long as what they were extracted from.
        Extraction prompts (question, context and the response) count their bytes but no labels."""
        evidence = evidence_of(item)
        ev = text_bytes(evidence.knowledge) + sum(map(text_bytes, evidence.evidence))
        asked = text_bytes(item.question) + text_bytes(item.context)
        quoted = 0
        gold_n, gold_bytes = 0, 0
        if self.match:
            if item.gold_claims is not None:
                gold_n, gold_bytes = len(item.gold_claims), sum(map(text_bytes, item.gold_claims))
            elif item.reference:
                gold_n, gold_bytes = self.max_claims, text_bytes(item.reference)
                quoted += asked + gold_bytes  # the reference's extraction
        judgments = labels = 0
        for r in item.responses:
            if r.claims is not None:
                n, claim_bytes = len(r.claims), sum(text_bytes(c.text) for c in r.claims)
            else:
                n, claim_bytes = self.max_claims, text_bytes(r.text)
                quoted += asked + claim_bytes  # the response's extraction
            if self.verify:  # verification: the evidence (or the cited source), then the claim
                cited = [c.source for c in r.claims] if r.claims is not None else [None] * n
                quoted += sum(text_bytes((item.sources or {})[s]) if s else ev for s in cited) + claim_bytes
            quoted += gold_n * claim_bytes + n * gold_bytes  # matching: every (gold, claim) pair
            judgments += n * (int(self.verify) + gold_n)
            match_n = len((self.match_labels or YES_NO).labels)
            labels += n * len(self.labels.labels) * int(self.verify) + n * gold_n * match_n
        return Cost(judgments, quoted, labels)

    # -- prompts --------------------------------------------------------------------------------------
    def extraction(self, item: Item, text: str, fmt: Format, sampling: Sampling) -> GenerateRequest:
        """The generation that extracts the claims of ``text`` (a response, or the item's reference)."""
        tags = _tags(self.templates)
        ctx = f"\n<context>\n{quote(item.context, tags)}\n</context>\n" if item.context else ""
        user = _templates(self.templates)[0].substitute(question=quote(item.question, tags),
                                                        response=quote(text, tags), context_block=ctx)
        return GenerateRequest(fmt(self.system, user, ""), (END,), self.max_new_tokens, sampling.temperature,
                               sampling.seed)

    def verify_question(self, item: Item, claim: str, fmt: Format, source: str | None = None) -> Question:
        """The question that verifies ``claim`` against the item's evidence (or the text of the item's source
        ``source``, which the claim cites)."""
        labels = self.labels
        form = ", ".join(labels.labels)
        # With UNKNOWN on offer, UNSUPPORTED must not also cover "the evidence is silent": the earlier wording
        # ("does not state it or contradicts it") overlapped UNKNOWN and drew the argmax to UNSUPPORTED for 56
        # of 64 Factcheck-GPT pairs (bench/results/claims.md).
        against = ("UNSUPPORTED if it contradicts the claim, UNKNOWN if it says nothing on the claim's subject."
                   if self.unknown else "UNSUPPORTED if it does not state it or contradicts it.")
        task = (f'Reply with the answer only, in the form "{ANSWER_MARKER}X]" where X is one of {form}: SUPPORTED '
                f"if the evidence states the claim, PARTIAL if it states only part of it, {against}")
        grounding = Grounding(None, None, ((item.sources or {})[source],)) if source else evidence_of(item)
        tags = _tags(self.templates)
        user = _templates(self.templates)[1].substitute(grounding_block=grounding_block(grounding, tags),
                                                        claim=quote(claim, tags), task=task)
        return Question(fmt(self.system, user, ANSWER_MARKER), labels.labels, ANSWER_MARKER)

    def match_question(self, gold: str, claim: str, fmt: Format) -> Question:
        """The question whether ``claim`` states the gold claim ``gold``."""
        labels = (self.match_labels or YES_NO).labels
        task = "Reply with the answer only, in the form " + " or ".join(f'"{ANSWER_MARKER}{lab}]"' for lab in labels)
        task += "."
        tags = _tags(self.templates)
        user = _templates(self.templates)[2].substitute(gold=quote(gold, tags), claim=quote(claim, tags), task=task)
        return Question(fmt(self.system, user, ANSWER_MARKER), labels, ANSWER_MARKER)

    # -- running --------------------------------------------------------------------------------------
    def extractions(self, items: Sequence[Item], fmt: Format, sampling: Sampling) -> dict[tuple[str, str],
                                                                                             GenerateRequest]:
        """The extractions ``items`` need: responses without given claims, references where gold claims are."""
        wanted: dict[tuple[str, str], GenerateRequest] = {}
        for item in items:
            for r in item.responses:
                if r.claims is None and r.text.strip():
                    wanted[(item.id, r.id)] = self.extraction(item, r.text, fmt, sampling)
            if self.match and item.gold_claims is None and item.reference:
                wanted[(item.id, _REFERENCE)] = self.extraction(item, item.reference, fmt, sampling)
        return wanted

    def _layout(self, items: Sequence[Item], extracted: _Extracted, fmt: Format | None = None
                ) -> tuple[list[_Entry], list[Question | str | None]]:
        """Per response, its claims and where its questions sit; with ``fmt``, the questions too (else
        ``None`` placeholders: the records need only where they sit)."""
        questions: list[Question | str | None] = []
        entries: list[_Entry] = []
        for item in items:
            gold: list[str] | str | None = None
            if self.match:
                if item.gold_claims is not None:
                    gold = list(item.gold_claims)
                else:
                    got = extracted.get((item.id, _REFERENCE), (NOT_EXTRACTED, None))[0]
                    gold = got if isinstance(got, list) and len(got) <= self.max_claims else (
                        NOT_EXTRACTED if got == NOT_EXTRACTED else None)
            for r in item.responses:
                raw: str | None = None
                claims: list[str] | str
                cited: list[str | None] = []
                if not r.text.strip() and r.claims is None:
                    claims = EMPTY_RESPONSE
                elif r.claims is not None:
                    claims, cited = [c.text for c in r.claims], [c.source for c in r.claims]
                else:
                    claims, raw = extracted.get((item.id, r.id), (NOT_EXTRACTED, None))
                    if isinstance(claims, list) and len(claims) > self.max_claims:
                        claims = TOO_MANY
                start = len(questions)
                if isinstance(claims, list):
                    cited = cited or [None] * len(claims)
                    if self.verify:
                        questions.extend(self.verify_question(item, c, fmt, s) if fmt else None
                                         for c, s in zip(claims, cited))
                match_start = len(questions)
                if isinstance(claims, list) and isinstance(gold, list):
                    for g in gold:
                        for c in claims:
                            if _overlap(g, c) < self.min_overlap:
                                questions.append("prefiltered")
                            else:
                                questions.append(self.match_question(g, c, fmt) if fmt else None)
                entries.append(_Entry(item, r, claims, cited, raw, start, gold, match_start))
        return entries, questions

    def _questions(self, items: Sequence[Item], extracted: _Extracted,
                   fmt: Format) -> tuple[list[_Entry], list[Question | str]]:
        entries, questions = self._layout(items, extracted, fmt)
        return entries, [q for q in questions if q is not None]

    def questions(self, item: Item, fmt: Format) -> list[Question | str]:
        """The verification and matching questions known before extraction (given claims only)."""
        return self._questions([item], {}, fmt)[1]

    def records(self, items: Sequence[Item], outcomes: Sequence[Outcome], judge: str) -> Iterator[ClaimsRecord]:
        """The records from the outcomes of :meth:`questions` (responses to extract are ``not_extracted``)."""
        for entry in self._layout(items, {})[0]:
            yield self._record(entry, outcomes, judge)

    def run(self, items: Sequence[Item], ask: Asking) -> Iterator[ClaimsRecord]:
        """Extract what ``items`` need (1), then verify (2) and match (3) in one go."""
        wanted = self.extractions(items, ask.fmt, ask.sampling)
        gens = dict(zip(wanted, ask.generate(list(wanted.values())))) if wanted else {}
        extracted: _Extracted = {}
        for key, gen in gens.items():
            if isinstance(gen, BackendError):
                extracted[key] = ("backend_error", None)
            else:
                extracted[key] = (parse_claims(gen.text, gen.finish_reason), gen.text)
        entries, questions = self._questions(items, extracted, ask.fmt)
        outcomes = ask.labels(questions, "direct")
        for entry in entries:
            yield self._record(entry, outcomes, ask.judge)

    def _record(self, e: _Entry, outcomes: Sequence[Outcome], judge: str) -> ClaimsRecord:
        item, r, claims, raw, start, gold, match_start = (e.item, e.response, e.claims, e.raw, e.start, e.gold,
                                                          e.match_start)
        source = "given" if r.claims is not None else "extracted"
        skipped = None if self.verify else "skipped"
        if isinstance(claims, str):
            return ClaimsRecord(item.id, r.id, r.system, judge, source, [], None, None, None, None, None, None,
                                claims, raw, skipped)
        labels = self.labels.labels
        humans = [c.human for c in r.claims] if r.claims is not None else [None] * len(claims)
        results = []
        for n, (text, human, cites) in enumerate(zip(claims, humans, e.cited)):
            if not self.verify:
                results.append(ClaimResult(text, None, None, None, None, "not_verified", human, cites))
                continue
            out = outcomes[start + n]
            if out.probs is None or out.unscored is not None:
                results.append(ClaimResult(text, None, None, None, out.mass if out.probs else None,
                                           out.unscored or "no_label_mass", human, cites))
                continue
            probs = {lab: p / sum(out.probs) for lab, p in zip(labels, out.probs)}
            unknown = probs.get("UNKNOWN") if self.unknown else None
            decided = 1.0 - (unknown or 0.0)
            p_sup = probs["SUPPORTED"] / decided if decided > 0 else 0.0
            results.append(ClaimResult(text, probs, p_sup, unknown, out.mass, None, human, cites,
                                       share_se(p_sup, out, decided)))
        scored = [c for c in results if c.unscored is None]
        unscored = "unscored_claims" if self.verify and len(scored) < len(results) else None
        precision = dist = expected = f1 = unknown_mass = None
        cited = accuracy = None
        if unscored is None and self.verify:
            ps = [c.p_supported or 0.0 for c in scored]
            precision = sum(ps) / len(ps) if ps else None
            dist = A.poisson_binomial(ps)
            expected = A.expected_count(ps)
            if self.k is not None:
                ef = A.expected_f1_at_k(ps, self.k)
                f1 = {"k": self.k, "precision": ef.precision, "recall": ef.recall, "f1": ef.f1}
            if self.unknown and scored:
                unknown_mass = sum(c.unknown or 0.0 for c in scored) / len(scored)
            with_source = [c.p_supported or 0.0 for c in scored if c.source is not None]
            if with_source:
                cited, accuracy = len(with_source), sum(with_source) / len(with_source)
        matching = None
        if isinstance(gold, list) and unscored is None:
            matching = _matching(gold, claims, outcomes[match_start:match_start + len(gold) * len(claims)],
                                 self.min_overlap, self.coverage, self.match_values)
        elif self.match and unscored is None:
            unscored = NOT_EXTRACTED if gold == NOT_EXTRACTED else "unparseable_gold_extraction"
        asked = outcomes[start:match_start + (len(gold) * len(claims) if isinstance(gold, list) else 0)]
        return stamp(ClaimsRecord(item.id, r.id, r.system, judge, source, results, precision, dist, expected, f1,
                                  unknown_mass, matching, unscored, raw, skipped, cited, accuracy), asked)

    # -- the audit hooks (the report: :mod:`._reports`) ------------------------------------------------------
    audit_options: ClassVar[Mapping[str, str]] = _audits.SENSITIVITY_OPTION

    def audit(self, records: Sequence[Mapping[str, Any]], context: AuditContext) -> dict[str, Any] | None:
        return _audits.claims_hook(self, records, context)

    @classmethod
    def report_sections(cls, audit: Mapping[str, Any]) -> list[Section]:
        return _reports.claims_sections(audit)

    @classmethod
    def report_facts(cls, audit: Mapping[str, Any]) -> list[tuple[str, str]]:
        return _reports.claims_facts(audit)


def evidence_of(item: Item) -> Grounding:
    """What an item's claims are verified against: its passages (else its sources' texts) and knowledge, else
    its reference."""
    passages = item.evidence or tuple((item.sources or {}).values())
    evidence = passages or ((item.reference,) if item.reference and not item.knowledge else ())
    return Grounding(None, item.knowledge, evidence)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _overlap(a: str, b: str) -> float:
    x, y = _words(a), _words(b)
    return len(x & y) / len(x | y) if x | y else 0.0


__all__ = ["COVERAGE_RULES", "STAGES", "ClaimsOptions", "ClaimsTask", "parse_claims", "stage_templates"]


POSITION = 60
"""Where the mode comes among the built-in ones (listings, help)."""


@dataclass(frozen=True)
class ClaimsOptions:
    k: int | None = option(None, "Also give E[precision], E[recall@K] and E[F1@K], recall counting up to K "
                                 "supported claims.", ge=1)
    unknown: bool = option(False, "Add UNKNOWN to the verification labels (reported apart).")
    match: bool = option(False, "Match the claims against the item's gold_claims (else claims extracted from its "
                                "reference).")
    min_overlap: float = option(0.0, "With match: judge only pairs whose word overlap (Jaccard) reaches this.",
                                ge=0.0, le=1.0)
    max_new_tokens: int = option(512, "Longest claim extraction (a longer one is unscored: truncated).",
                                 ge=1, le=MAX_EXTRACTION_TOKENS, flag="--extract-tokens")
    max_claims: int = option(32, "An extraction with more claims is unscored (too_many_claims).", ge=1)
    templates: Mapping[str, Any] | None = option(None, "Each stage's own prompt by name: {extract, verify, match} "
                                                       "-> a template's text or path (STAGE=PATH).", served=False,
                                                 cli=False)
    verify: bool = option(True, "Verify each claim against the evidence; off (--no-verify): match-only, no "
                                "evidence needed.")
    coverage: Coverage = option("noisy_or", "With match: a gold claim's coverage from its P(match) over the "
                                            "predictions: noisy_or (1 - prod(1 - p)) or max (the best one).",
                                choices=COVERAGE_RULES)
    match_labels: str | None = option(None, "With match: the match question's labels, each valued (0-3 grades "
                                            "binarised: 3=1,2=1,1=0,0=0); P(match) their expected value.",
                                      flag="--match-labels")


def build_claims(j: JudgeSettings, o: ClaimsOptions) -> ClaimsTask:
    if o.k is not None and o.k < 1:
        raise ConfigError(f"k must be 1 or more, got {o.k}")
    if not 0.0 <= o.min_overlap <= 1.0:
        raise ConfigError(f"min_overlap must be between 0 and 1, got {o.min_overlap}")
    if o.max_claims < 1:
        raise ConfigError(f"max_claims must be 1 or more, got {o.max_claims}")
    if o.coverage not in COVERAGE_RULES:
        raise ConfigError(f"coverage must be one of {', '.join(COVERAGE_RULES)}, got {o.coverage!r}")
    if not (o.verify or o.match):
        raise ConfigError("with verify off and match off claims has nothing to do: turn match on (match-only)")
    labels = None if o.match_labels is None else LabelSet.parse(o.match_labels)
    if labels is not None and labels.values is None:
        raise ConfigError(f"match_labels must give each label its value (3=1,2=1,1=0,0=0), got {o.match_labels!r}")
    return ClaimsTask(o.unknown, o.k, o.match, o.min_overlap, o.max_new_tokens, o.max_claims,
                      templates=stage_templates(o.templates), verify=o.verify, coverage=o.coverage,
                      system=j.prompts.system, match_labels=labels)


def _given(first: Records, items: Sequence[Item]) -> list[Item]:
    """``items`` with each response's claims as tier 1 had them (extracted ones too): later tiers verify those."""
    had = {(str(r["item_id"]), str(r["response_id"])): r.get("claims") or [] for r in first}

    def claimed(item: Item, r: Response) -> Response:
        got = had.get((item.id, r.id), [])
        return r if r.claims is not None else replace(
            r, claims=tuple(Claim(c["text"], c.get("human"), c.get("source")) for c in got))

    return [replace(item, responses=tuple(claimed(item, r) for r in item.responses)) for item in items]


def _label_claims(response: dict[str, Any], left: list[dict[str, Any]], every: list[dict[str, Any]]) -> None:
    """A response to label: its claims as the cascade judged them (each label has its claim), ``human`` kept."""
    response["claims"] = [{"text": c["text"], "human": c.get("human"),
                           **({"source": c["source"]} if c.get("source") else {})} for c in every]


CASCADE = ByPart("claims", lambda item, r: r.claims or (), lambda item, r, chosen: (item, replace(r, claims=chosen)),
                 _label_claims, _given)  # claim by claim: later tiers verify the claims tier 1 had


MODE = Mode(
    "claims", ClaimsTask, ClaimsRecord, ClaimsOptions, build_claims, command="claims", route="/v1/claims",
    templates={"extract": TemplateSpec("extract.txt", frozenset(EXTRACT_FIELDS)),
               "verify": TemplateSpec("verify.txt", frozenset(VERIFY_FIELDS)),
               "match": TemplateSpec("match.txt", frozenset(MATCH_FIELDS))},
    summary="Claims extracted (or given), verified against the evidence, matched against gold claims.", cascade=CASCADE,
    summary_metrics=CLAIMS_SUMMARY, rank_options=claims_ranked, calibration=PartLabelUnits())
