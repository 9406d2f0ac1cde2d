"""Claim-level evaluation: extract, verify, match, with the judge's probabilities kept to the final numbers.

1. **Extract** (where the input gives no claims): one stored generation per response ("- claim" lines, then
   END). An extraction that cannot be parsed leaves the response unscored with its reason, never an empty
   claim list; "NONE" is an explicit empty list.
2. **Verify** each claim against the item's evidence (passages, knowledge, else the reference): the
   distribution over SUPPORTED / PARTIAL / UNSUPPORTED (and UNKNOWN, when asked), one prompt per claim
   with the evidence first and the claim last, so a response's claims share the prompt's prefix.
3. **Match** predicted claims with gold claims (the item's ``gold_claims``, else claims extracted from its
   reference): P(match) per pair from YES/NO; coverage of a gold claim is the noisy-OR over predictions,
   1 - prod(1 - p); the one-to-one assignment maximising total P(match) (Hungarian) gives the expected true
   positives, so its expected F1 = 2 E[TP] / (predicted + gold) is exact (the denominator is fixed).
   LiveDRBench's greedy rule (each prediction in order takes the first unmatched gold claim with
   P >= 0.5) is reported next to it, in the given and the reversed order, to show its order dependence.

Independence: the count distributions treat claims as independent given the response (stated in records).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from . import _aggregates as A
from ._engine import EMPTY_RESPONSE, TRUNCATED, Engine, Outcome, ProgressFn
from ._items import Item, Response
from ._prompts import (
    ANSWER_MARKER,
    EXTRACT_FIELDS,
    MATCH_FIELDS,
    SYSTEM,
    VERIFY_FIELDS,
    YES_NO,
    Grounding,
    LabelSet,
    Protocol,
    grounding_block,
    quote,
    read_template,
)
from ._protocol import Question, Sampling, ask
from ._schema import ClaimResult, ClaimsRecord
from ._tasks import Cost, Format, Task, text_bytes
from .backends import Backend, GenerateRequest
from .errors import BackendError, InputError

UNPARSEABLE = "unparseable_extraction"
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


@dataclass(frozen=True)
class ClaimsTask(Task):
    """Claims of every response: extracted (or given), verified, optionally matched against gold claims.

    It runs in stages (the claims are known only after extraction), so :meth:`Judge.run` hands it to
    :class:`ClaimsRunner` instead of asking its questions in one go.
    """

    kind: ClassVar[str] = "claims"
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

    @property
    def labels(self) -> LabelSet:
        return VERIFY_UNKNOWN if self.unknown else VERIFY

    def check(self, item: Item) -> None:
        if not evidence_of(item):
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
            total += n * (1 + (gold if self.match else 0))
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
            quoted += n * ev + claim_bytes  # verification: the evidence, then the claim
            quoted += gold_n * claim_bytes + n * gold_bytes  # matching: every (gold, claim) pair
            judgments += n * (1 + gold_n)
            labels += n * len(self.labels.labels) + n * gold_n * len(YES_NO.labels)
        return Cost(judgments, quoted, labels)

    def questions(self, item: Item, fmt: Format) -> list[Question | str]:
        raise TypeError("claims run in stages: use Judge.run or Judge.claims")

    def records(self, items: Sequence[Item], outcomes: Sequence[Outcome], judge: str) -> Iterator[ClaimsRecord]:
        raise TypeError("claims run in stages: use Judge.run or Judge.claims")


def evidence_of(item: Item) -> Grounding:
    """What an item's claims are verified against: its passages and knowledge, else its reference."""
    evidence = item.evidence or ((item.reference,) if item.reference and not item.knowledge else ())
    return Grounding(None, item.knowledge, evidence)


class ClaimsRunner:
    """Runs a :class:`ClaimsTask` on an engine (built by :meth:`Judge.claims`)."""

    def __init__(self, engine: Engine, backend: Backend, name: str, sampling: Sampling, task: ClaimsTask) -> None:
        self.engine, self.backend, self.name, self.sampling, self.task = engine, backend, name, sampling, task
        self.extract = read_template(None, "extract.txt", EXTRACT_FIELDS)
        self.verify = read_template(None, "verify.txt", VERIFY_FIELDS)
        self.matcher = read_template(None, "match.txt", MATCH_FIELDS)

    # -- prompts --------------------------------------------------------------------------------------
    def _extraction(self, item: Item, text: str) -> GenerateRequest:
        ctx = f"\n<context>\n{quote(item.context)}\n</context>\n" if item.context else ""
        user = self.extract.substitute(question=quote(item.question), response=quote(text), context_block=ctx)
        prompt = self.backend.format_prompt(SYSTEM, user, "")
        return GenerateRequest(prompt, (END,), self.task.max_new_tokens, self.sampling.temperature, self.sampling.seed)

    def _verify_question(self, item: Item, claim: str) -> Question:
        labels = self.task.labels
        form = ", ".join(labels.labels)
        # With UNKNOWN on offer, UNSUPPORTED must not also cover "the evidence is silent": the earlier wording
        # ("does not state it or contradicts it") overlapped UNKNOWN and drew the argmax to UNSUPPORTED for 56
        # of 64 Factcheck-GPT pairs (bench/results/claims.md).
        against = ("UNSUPPORTED if it contradicts the claim, UNKNOWN if it says nothing on the claim's subject."
                   if self.task.unknown else "UNSUPPORTED if it does not state it or contradicts it.")
        task = (f'Reply with the answer only, in the form "{ANSWER_MARKER}X]" where X is one of {form}: SUPPORTED '
                f"if the evidence states the claim, PARTIAL if it states only part of it, {against}")
        user = self.verify.substitute(grounding_block=grounding_block(evidence_of(item)), claim=quote(claim),
                                      task=task)
        return Question(self.backend.format_prompt(SYSTEM, user, ANSWER_MARKER), labels.labels, ANSWER_MARKER)

    def _match_question(self, gold: str, claim: str) -> Question:
        task = f'Reply with the answer only, in the form "{ANSWER_MARKER}YES]" or "{ANSWER_MARKER}NO]".'
        user = self.matcher.substitute(gold=quote(gold), claim=quote(claim), task=task)
        return Question(self.backend.format_prompt(SYSTEM, user, ANSWER_MARKER), YES_NO.labels, ANSWER_MARKER)

    # -- running --------------------------------------------------------------------------------------
    def run(self, items: Sequence[Item], progress: ProgressFn | None = None) -> Iterator[ClaimsRecord]:
        for item in items:
            self.task.check(item)
        # 1. extraction: responses without given claims, and references where gold claims are needed
        wanted: dict[tuple[str, str], GenerateRequest] = {}
        for item in items:
            for r in item.responses:
                if r.claims is None and r.text.strip():
                    wanted[(item.id, r.id)] = self._extraction(item, r.text)
            if self.task.match and item.gold_claims is None and item.reference:
                wanted[(item.id, "\x00reference")] = self._extraction(item, item.reference)
        gens = dict(zip(wanted, self.engine.generate(list(wanted.values())))) if wanted else {}
        extracted: dict[tuple[str, str], tuple[list[str] | str, str | None]] = {}
        for key, gen in gens.items():
            if isinstance(gen, BackendError):
                extracted[key] = ("backend_error", None)
            else:
                extracted[key] = (parse_claims(gen.text, gen.finish_reason), gen.text)
        # 2. verification and 3. matching questions, in one engine run
        questions: list[Question | str] = []
        plan: list[tuple[Item, Response, list[str] | str, str | None, int, list[str] | None, int]] = []
        for item in items:
            gold: list[str] | None = None
            if self.task.match:
                if item.gold_claims is not None:
                    gold = list(item.gold_claims)
                else:
                    got = extracted[(item.id, "\x00reference")][0]
                    gold = got if isinstance(got, list) and len(got) <= self.task.max_claims else None
            for r in item.responses:
                raw: str | None = None
                claims: list[str] | str
                if not r.text.strip() and r.claims is None:
                    claims = EMPTY_RESPONSE
                elif r.claims is not None:
                    claims = [c.text for c in r.claims]
                else:
                    claims, raw = extracted[(item.id, r.id)]
                    if isinstance(claims, list) and len(claims) > self.task.max_claims:
                        claims = TOO_MANY
                start = len(questions)
                if isinstance(claims, list):
                    questions.extend(self._verify_question(item, c) for c in claims)
                match_start = len(questions)
                if isinstance(claims, list) and gold is not None:
                    for g in gold:
                        for c in claims:
                            if _overlap(g, c) >= self.task.min_overlap:
                                questions.append(self._match_question(g, c))
                            else:
                                questions.append("prefiltered")
                plan.append((item, r, claims, raw, start, gold, match_start))
        outcomes = ask(self.engine, questions, Sampling("direct"), progress)
        for item, r, claims, raw, start, gold, match_start in plan:
            yield self._record(item, r, claims, raw, outcomes, start, gold, match_start)

    def _record(self, item: Item, r: Response, claims: list[str] | str, raw: str | None, outcomes: Sequence[Outcome],
                start: int, gold: list[str] | None, match_start: int) -> ClaimsRecord:
        source = "given" if r.claims is not None else "extracted"
        if isinstance(claims, str):
            return ClaimsRecord(item.id, r.id, r.system, self.name, source, [], None, None, None, None, None, None,
                                claims, raw)
        labels = self.task.labels.labels
        humans = [c.human for c in r.claims] if r.claims is not None else [None] * len(claims)
        results = []
        for n, (text, human) in enumerate(zip(claims, humans)):
            out = outcomes[start + n]
            if out.probs is None or out.unscored is not None:
                results.append(ClaimResult(text, None, None, None, out.mass if out.probs else None,
                                           out.unscored or "no_label_mass", human))
                continue
            total = sum(out.probs)
            probs = {lab: p / total for lab, p in zip(labels, out.probs)}
            unknown = probs.get("UNKNOWN") if self.task.unknown else None
            decided = 1.0 - (unknown or 0.0)
            p_sup = probs["SUPPORTED"] / decided if decided > 0 else 0.0
            results.append(ClaimResult(text, probs, p_sup, unknown, out.mass, None, human))
        scored = [c for c in results if c.unscored is None]
        unscored = "unscored_claims" if len(scored) < len(results) else None
        precision = dist = expected = f1 = unknown_mass = None
        if unscored is None:
            ps = [c.p_supported or 0.0 for c in scored]
            precision = sum(ps) / len(ps) if ps else None
            dist = A.poisson_binomial(ps)
            expected = A.expected_count(ps)
            if self.task.k is not None:
                e = A.expected_f1_at_k(ps, self.task.k)
                f1 = {"k": self.task.k, "precision": e.precision, "recall": e.recall, "f1": e.f1}
            if self.task.unknown and scored:
                unknown_mass = sum(c.unknown or 0.0 for c in scored) / len(scored)
        matching = None
        if gold is not None and unscored is None:
            matching = _matching(gold, claims, outcomes[match_start:match_start + len(gold) * len(claims)],
                                 self.task.min_overlap)
        elif self.task.match and unscored is None:
            unscored = "unparseable_gold_extraction"
        return ClaimsRecord(item.id, r.id, r.system, self.name, source, results, precision, dist, expected, f1,
                            unknown_mass, matching, unscored, raw)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _overlap(a: str, b: str) -> float:
    x, y = _words(a), _words(b)
    return len(x & y) / len(x | y) if x | y else 0.0


def _matching(gold: list[str], claims: list[str], outcomes: Sequence[Outcome], min_overlap: float) -> dict[str, Any]:
    """Matching numbers from the P(match) of every (gold, predicted) pair, gold-major."""
    n, m = len(gold), len(claims)
    matrix = [[0.0] * m for _ in range(n)]
    judged = skipped = failed = 0
    for i in range(n):
        for j in range(m):
            out = outcomes[i * m + j]
            if out.unscored == "prefiltered":
                skipped += 1
            elif out.probs is None or out.unscored is not None:
                failed += 1
            else:
                judged += 1
                matrix[i][j] = out.probs[0] / sum(out.probs)
    coverage = [1.0 - math.prod(1.0 - p for p in row) for row in matrix]
    support = [1.0 - math.prod(1.0 - matrix[i][j] for i in range(n)) for j in range(m)]
    pairs = A.assignment(matrix) if n and m else []
    tp = sum(matrix[i][j] for i, j in pairs)
    hungarian = {"pairs": [[i, j] for i, j in pairs], "expected_true_positives": tp,
                 "expected_precision": tp / m if m else None, "expected_recall": tp / n if n else None,
                 "expected_f1": 2 * tp / (n + m) if n + m else None}

    def greedy(order: list[int]) -> dict[str, Any]:
        permuted = [[row[j] for j in order] for row in matrix]
        hits = len(A.greedy_order_matching(permuted, 0.5)) if n and m else 0
        return {"matches": hits, "f1": 2 * hits / (n + m) if n + m else None}

    return {"gold": n, "predicted": m, "p_match": matrix, "coverage": coverage,
            "expected_recall": sum(coverage) / n if n else None,
            "expected_precision": sum(support) / m if m else None, "hungarian": hungarian,
            "greedy_in_order": greedy(list(range(m))), "greedy_reversed": greedy(list(range(m))[::-1]),
            "prefilter": {"min_overlap": min_overlap, "judged": judged, "skipped": skipped, "failed": failed}}



__all__ = ["ClaimsRunner", "ClaimsTask", "parse_claims"]
