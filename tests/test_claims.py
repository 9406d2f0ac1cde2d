"""Claim-level evaluation (issue 14): extraction, verification, matching, with hand-computed numbers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from trustjudge import Judge, MockBackend, Store, items_from_dicts
from trustjudge.backends import GenerateRequest, Generation, LabelRequest
from trustjudge.errors import InputError
from trustjudge.modes.claims import parse_claims


def _backend(verify: dict[str, dict[str, float]], extraction: str = "- Paris is in France.\nEND",
             match: dict[tuple[str, str], float] | None = None) -> MockBackend:
    def labels(req: LabelRequest) -> list[float]:
        if "<reference_claim>" in req.prompt:
            gold = req.prompt.split("<reference_claim>\n", 1)[1].split("\n</reference_claim>", 1)[0]
            claim = req.prompt.rsplit("<claim>\n", 1)[1].split("\n</claim>", 1)[0]
            p = (match or {}).get((gold, claim), 0.0)
            return [p if lab.startswith("YES") else 1 - p for lab in req.labels]
        claim = req.prompt.rsplit("<claim>\n", 1)[1].split("\n</claim>", 1)[0]
        probs = verify[claim]
        return [probs.get(lab.rstrip("]"), 0.0) for lab in req.labels]

    def generate(req: GenerateRequest) -> Generation:
        return Generation(extraction, (-0.1,) * 5, "stop", 10)

    return MockBackend("claims", labels, generate)


ITEM = {"id": "q1", "question": "Tell me about Paris.", "evidence": ["Paris is the capital of France."],
        "responses": [{"id": "a", "text": "Paris is the capital. It has 3 million people.",
                       "claims": [{"text": "Paris is the capital of France.", "human": "supported"},
                                  {"text": "Paris has 3 million people."}]}]}


def test_precision_counts_and_expected_f1_by_hand(tmp_path: Path) -> None:
    # P(supported) = .5 and .2 (renormalised over the labels): precision .35; supported ~ (.4, .5, .1);
    # E[F1@1] = .5 * F1(s=1) + .1 * F1(s=2) = .5 * 2/3 + .1 * 1 = 13/30 (not the F1 of the expectations).
    backend = _backend({"Paris is the capital of France.": {"SUPPORTED": .45, "UNSUPPORTED": .45},
                        "Paris has 3 million people.": {"SUPPORTED": .18, "PARTIAL": .36, "UNSUPPORTED": .36}})
    [rec] = list(Judge(backend, store=tmp_path / "s.sqlite").claims(items_from_dicts([ITEM]), k=1))
    assert rec.source == "given" and rec.unscored is None
    assert [c.p_supported for c in rec.claims] == pytest.approx([.5, .2])
    assert rec.claims[0].human == "SUPPORTED" and rec.claims[1].probabilities == pytest.approx(
        {"SUPPORTED": .2, "PARTIAL": .4, "UNSUPPORTED": .4})
    assert rec.precision == pytest.approx(.35)
    assert rec.supported == pytest.approx([.4, .5, .1]) and rec.expected_supported == pytest.approx(.7)
    assert rec.f1_at_k is not None and rec.f1_at_k["f1"] == pytest.approx(13 / 30)
    assert rec.f1_at_k["recall"] == pytest.approx(.6)
    # The evidence comes first, the claim last: a response's claims share the prompt up to the claim.
    first, second = (r.prompt for r in backend.history)  # type: ignore[union-attr]
    shared = os.path.commonprefix([first, second])  # noqa: RUF071 (characters)
    assert "Paris is the capital of France.\n</evidence>" in shared and "<claim>\n" in shared  # both claims: "Paris "


def test_unknown_mass_is_reported_apart(tmp_path: Path) -> None:
    # SUPPORTED .3, UNSUPPORTED .1, UNKNOWN .6: unknown .6; P(supported | decided) = .3 / .4 = .75
    item = dict(ITEM, responses=[dict(ITEM["responses"][0], claims=["Paris is the capital of France."])])
    backend = _backend({"Paris is the capital of France.": {"SUPPORTED": .3, "UNSUPPORTED": .1, "UNKNOWN": .6}})
    [rec] = list(Judge(backend, store=tmp_path / "s.sqlite").claims(items_from_dicts([item]), unknown=True))
    assert rec.unknown_mass == pytest.approx(.6) and rec.precision == pytest.approx(.75)
    # With UNKNOWN on offer, UNSUPPORTED means "contradicts": "silent evidence" belongs to UNKNOWN alone (the
    # overlapping wording drew the argmax to UNSUPPORTED on Factcheck-GPT); without UNKNOWN it covers both.
    [asked] = [r.prompt for r in backend.history]  # type: ignore[union-attr]
    assert "UNSUPPORTED if it contradicts the claim, UNKNOWN if" in asked and "does not state it" not in asked
    [_plain] = list(Judge(backend, store=tmp_path / "s.sqlite").claims(items_from_dicts([item])))
    assert "UNSUPPORTED if it does not state it or contradicts it." in backend.history[-1].prompt  # type: ignore[union-attr]
    assert "UNKNOWN" not in backend.history[-1].prompt.split("where X is one of")[1]  # type: ignore[union-attr]


def test_matching_coverage_hungarian_and_greedy_by_hand(tmp_path: Path) -> None:
    # P(match) gold x predicted = [[.9, .6], [.8, 0]]:
    # coverage: g1 1 - .1 * .4 = .96, g2 1 - .2 * 1 = .8 -> expected recall .88
    # support:  c1 1 - .1 * .2 = .98, c2 1 - .4 * 1 = .6 -> expected precision .79
    # Hungarian: (g1, c2) + (g2, c1) = 1.4 > .9: E[TP] 1.4, expected F1 2 * 1.4 / 4 = .7
    # greedy in order: c1 takes g1, c2 finds nothing >= .5 -> 1 match, F1 .5; reversed: c2 takes g1, c1 g2 -> F1 1
    item = {"id": "q", "question": "Q?", "evidence": ["E."], "gold_claims": ["G1.", "G2."],
            "responses": [{"id": "a", "text": "x", "claims": ["C1.", "C2."]}]}
    backend = _backend({"C1.": {"SUPPORTED": 1}, "C2.": {"SUPPORTED": 1}},
                       match={("G1.", "C1."): .9, ("G1.", "C2."): .6, ("G2.", "C1."): .8, ("G2.", "C2."): 0.0})
    [rec] = list(Judge(backend, store=tmp_path / "s.sqlite").claims(items_from_dicts([item]), match=True))
    m = rec.matching
    assert m is not None
    assert m["coverage"] == pytest.approx([.96, .8]) and m["expected_recall"] == pytest.approx(.88)
    assert m["expected_precision"] == pytest.approx(.79)
    assert m["hungarian"]["pairs"] == [[0, 1], [1, 0]] and m["hungarian"]["expected_f1"] == pytest.approx(.7)
    assert m["greedy_in_order"]["f1"] == pytest.approx(.5) and m["greedy_reversed"]["f1"] == pytest.approx(1.0)
    assert m["prefilter"]["judged"] == 4


def test_prefilter_skips_pairs_without_overlap_and_records_it(tmp_path: Path) -> None:
    item = {"id": "q", "question": "Q?", "evidence": ["E."], "gold_claims": ["Paris is big."],
            "responses": [{"id": "a", "text": "x", "claims": ["Paris is large.", "Rome is old."]}]}
    backend = _backend({"Paris is large.": {"SUPPORTED": 1}, "Rome is old.": {"SUPPORTED": 1}},
                       match={("Paris is big.", "Paris is large."): .9})
    [rec] = list(Judge(backend, store=tmp_path / "s.sqlite").claims(items_from_dicts([item]), match=True,
                                                                    min_overlap=0.3))
    assert rec.matching is not None and rec.matching["prefilter"] == {"min_overlap": 0.3, "judged": 1, "skipped": 1,
                                                                      "failed": 0}
    assert rec.matching["p_match"] == [[pytest.approx(.9), 0.0]]


@pytest.mark.parametrize("text, finish, want", [
    ("- One.\n- Two.\nEND", "stop", ["One.", "Two."]),
    ("1. One.\n2) Two.\n", "stop", ["One.", "Two."]),
    ("NONE\nEND", "stop", []),
    ("- NONE\nEND", "stop", []),
    ("I cannot help with that.", "stop", "unparseable_extraction"),
    ("- One.\n- Tw", "length", "truncated"),
])
def test_parse_claims(text: str, finish: str, want: Any) -> None:
    assert parse_claims(text, finish) == want


def test_extraction_is_stored_and_an_unparseable_one_is_unscored(tmp_path: Path) -> None:
    item = {"id": "q", "question": "Q?", "evidence": ["E."], "responses": [{"id": "a", "text": "Some answer."}]}
    store = tmp_path / "s.sqlite"
    backend = _backend({"Paris is in France.": {"SUPPORTED": 1}})
    [rec] = list(Judge(backend, store=store).claims(items_from_dicts([item])))
    assert rec.source == "extracted" and [c.text for c in rec.claims] == ["Paris is in France."]
    assert rec.extraction is not None and backend.calls == 2
    again = _backend({"Paris is in France.": {"SUPPORTED": 1}})
    [rec2] = list(Judge(again, store=store).claims(items_from_dicts([item])))
    assert again.calls == 0 and rec2.to_dict() == rec.to_dict()
    bad = _backend({}, extraction="Sorry, I do not know.")
    [rec3] = list(Judge(bad, store=tmp_path / "t.sqlite").claims(items_from_dicts([item])))
    assert rec3.unscored == "unparseable_extraction" and rec3.claims == [] and rec3.precision is None
    assert rec3.extraction == "Sorry, I do not know."


def test_items_without_evidence_or_gold_are_refused(tmp_path: Path) -> None:
    judge = Judge(MockBackend(), store=tmp_path / "s.sqlite")
    bare = {"id": "q", "question": "Q?", "responses": [{"id": "a", "text": "x"}]}
    with pytest.raises(InputError, match="item 'q' has no evidence"):
        list(judge.claims(items_from_dicts([bare])))
    with pytest.raises(InputError, match="neither gold_claims nor a reference"):
        list(judge.claims(items_from_dicts([dict(bare, evidence=["E."])]), match=True))
    with pytest.raises(InputError) as info:
        items_from_dicts([dict(bare, responses=[{"id": "a", "text": "x",
                                                 "claims": [{"text": "c", "human": "maybe"}]}])])
    assert info.value.field == "responses[0].claims[0].human"


def test_cli_claims_resumes_after_sigkill_during_extraction(tmp_path: Path) -> None:
    """A run killed while extracting loses nothing already stored: the rerun makes only the missing calls."""
    rows = [{"id": f"q{i}", "question": "Q?", "evidence": ["E."],
             "responses": [{"id": f"r{j}", "text": f"Answer {i}-{j}."} for j in range(4)]} for i in range(3)]
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store, calls = tmp_path / "s.sqlite", tmp_path / "calls.txt"
    env = {**os.environ, "TRUSTJUDGE_MOCK_CALLS": str(calls), "TRUSTJUDGE_MOCK_DELAY": "0.3"}
    cmd = [sys.executable, "-m", "trustjudge.cli", "claims", str(items), "-j", "mock/hash", "--store", str(store),
           "--batch-size", "1", "-q"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while (not calls.exists() or len(calls.read_text().splitlines()) < 3) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = len(calls.read_text().splitlines())
    assert 3 <= before < 12  # killed during the 12 extractions
    stored = Store(store)
    generations = stored._db.execute("SELECT COUNT(*) FROM outputs WHERE kind = 'generate'").fetchone()[0]
    stored.close()
    assert generations >= 2
    done = subprocess.run(cmd, env={**env, "TRUSTJUDGE_MOCK_DELAY": "0"}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(out) == 12
    # mock/hash writes no claim list: every extraction is unparseable, and says so
    assert {r["unscored"] for r in out} == {"unparseable_extraction"}
    again = len(calls.read_text().splitlines()) - before
    assert again == 12 - generations  # only the extractions the killed run had not stored


@pytest.mark.model
def test_claims_end_to_end_on_the_bundled_judge(tmp_path: Path) -> None:
    items = items_from_dicts([{
        "id": "q1", "question": "Where is the Eiffel Tower?",
        "evidence": ["The Eiffel Tower is a wrought-iron tower in Paris, France, completed in 1889."],
        "responses": [{"id": "a", "text": "The Eiffel Tower is in Paris. It was completed in 1889."},
                      {"id": "b", "text": "x", "claims": ["The Eiffel Tower is in Rome."]}]}])
    store = tmp_path / "s.sqlite"
    judge = Judge("hf/smollm2-135m", store=store)
    recs = list(judge.claims(items, k=2))
    judge.close()
    assert recs[0].source == "extracted" and recs[0].extraction is not None
    for rec in recs:  # either verified claims with probabilities, or unscored with a reason: never a silent 0
        if rec.unscored is None:
            assert rec.claims and all(c.probabilities is not None for c in rec.claims)
            assert rec.supported is not None and abs(sum(rec.supported) - 1) < 1e-9
        else:
            assert rec.unscored in ("unparseable_extraction", "truncated") and rec.precision is None
    assert recs[1].source == "given" and recs[1].unscored is None
    again = Judge("hf/smollm2-135m", store=Store(store))
    assert [r.to_dict() for r in again.claims(items, k=2)] == [r.to_dict() for r in recs]
    assert again.stats.model_calls == 0
    again.close()


def test_service_claims_equal_the_library(tmp_path: Path) -> None:
    import httpx

    from trustjudge.serve import create_app

    from .test_server import serving

    rows = [ITEM, {"id": "q2", "question": "Q?", "evidence": ["E."], "responses": [{"id": "a", "text": "Some text."}]}]
    app = create_app("mock/hash", store_path=tmp_path / "srv.sqlite")
    with serving(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        got = client.post("/v1/claims", json={"items": rows, "k": 2})
        bad = client.post("/v1/claims", json={"items": [{"id": "x", "question": "Q?",
                                                          "responses": [{"id": "a", "text": "t"}]}]})
    assert got.status_code == 200, got.text
    want = [r.to_dict() for r in Judge("mock/hash", store=tmp_path / "lib.sqlite").claims(items_from_dicts(rows), k=2)]
    assert got.json()["records"] == want
    assert want[1]["unscored"] == "unparseable_extraction"  # mock/hash writes no claim list: said, not zeroed
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "evidence"


def test_claims_audit_by_hand() -> None:
    from trustjudge.modes._audits import claims_audit

    # P(supported) .9 (human SUPPORTED), .3 (UNSUPPORTED), .6 (PARTIAL -> not supported), .2 (SUPPORTED)
    # Brier (.01 + .09 + .36 + .64) / 4 = .275; accuracy (p > .5): right, right, wrong, wrong = .5
    # AUROC: positives {.9, .2} vs negatives {.3, .6}: .9 > both, .2 < both -> 2/4 = .5
    # labels: argmax SUPPORTED, UNSUPPORTED, PARTIAL, UNSUPPORTED vs humans S, U, P, S -> 3/4
    def claim(p: float, label: str, human: str) -> dict[str, Any]:
        return {"text": "c", "p_supported": p, "probabilities": {label: 0.9, "OTHER": 0.1}, "unscored": None,
                "human": human}

    records = [{"item_id": "q", "response_id": "a", "unscored": None,
                "claims": [claim(.9, "SUPPORTED", "SUPPORTED"), claim(.3, "UNSUPPORTED", "UNSUPPORTED")]},
               {"item_id": "q", "response_id": "b", "unscored": None,
                "claims": [claim(.6, "PARTIAL", "PARTIAL"), claim(.2, "UNSUPPORTED", "SUPPORTED")]}]
    report = claims_audit(records)
    cal = report["supported_calibration"]
    assert cal["brier"] == pytest.approx(.275) and cal["accuracy"] == .5 and cal["auroc"] == pytest.approx(.5)
    assert report["label_agreement"]["accuracy"] == pytest.approx(.75)


def test_claims_sensitivity_sees_evidence_order_and_negation(tmp_path: Path) -> None:
    from trustjudge.modes._audits import claims_sensitivity

    # The judge supports a claim only when the passage "A." comes first (an order-biased judge), and it
    # supports every negated claim too: evidence-order shift 1.0 for the claim, negation "both supported" 1/1.
    def labels(req: LabelRequest) -> list[float]:
        first = req.prompt.split('<evidence n="1">\n', 1)[1].split("\n", 1)[0]
        supported = first == "A." or "It is not true that" in req.prompt
        return [(1.0 if supported else 0.0) if lab.startswith("SUPPORTED") else (0.0 if supported else 1.0)
                if lab.startswith("UNSUPPORTED") else 0.0 for lab in req.labels]

    judge = Judge(MockBackend("order", labels), store=tmp_path / "s.sqlite")
    items = items_from_dicts([{"id": "q", "question": "Q?", "evidence": ["A.", "B."],
                               "responses": [{"id": "a", "text": "x", "claims": ["The sky is blue."]}]}])
    report = claims_sensitivity(judge.run, items, judge.claims_task())
    assert report["evidence_order"] == {"claims": 1, "mean_abs_shift": pytest.approx(1.0),
                                        "max_abs_shift": pytest.approx(1.0)}
    assert report["negation"] == {"claims": 1, "both_supported": 1, "share": 1.0}


def test_an_extraction_with_too_many_claims_is_unscored(tmp_path: Path) -> None:
    item = {"id": "q", "question": "Q?", "evidence": ["E."], "responses": [{"id": "a", "text": "Some answer."}]}
    many = "".join(f"- Claim {i}.\n" for i in range(5)) + "END"
    backend = _backend({f"Claim {i}.": {"SUPPORTED": 1} for i in range(5)}, extraction=many)
    judge = Judge(backend, store=tmp_path / "s.sqlite")
    [rec] = list(judge.claims(items_from_dicts([item]), max_claims=4))
    assert rec.unscored == "too_many_claims" and rec.claims == [] and backend.calls == 1
    [rec] = list(judge.claims(items_from_dicts([item]), max_claims=5))
    assert rec.unscored is None and len(rec.claims) == 5
