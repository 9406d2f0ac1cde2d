"""Per-domain calibrations (issue 34): `select --calibration-by FIELD` calibrates each item's verdicts by its
domain's file, says each domain's guarantee separately, and abstains on an item whose domain has none."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from trustjudge import Judge, load_items
from trustjudge.audit._domains import NO_CALIBRATION, DomainCalibrations, apply_by_domain
from trustjudge.audit._trust import Calibration
from trustjudge.cli import cli
from trustjudge.errors import ConfigError


def _invoke(*args: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _pairs(path: Path, ids: range, domain: str | None = None, human: Any = None) -> Path:
    path.write_text("".join(json.dumps({
        "id": f"q{i}", "question": f"What is {i} + 2?", **({"domain": domain} if domain else {}),
        "responses": [{"id": "a", "text": f"It is {i + 2}."}, {"id": "b", "text": f"Maybe {i + 7}."}],
        "pairs": [{"first": "a", "second": "b", "human": None if human is None else human(i)}]}) + "\n"
        for i in ids))
    return path


def _domain_calibrations(tmp_path: Path, b_label: Any = None) -> tuple[Path, dict[str, str]]:
    """Domain A calibrated on labels that are the judge's own verdicts, domain B on ``b_label`` (default: the
    judge's verdicts too), on items of their own."""
    store = tmp_path / "s.sqlite"
    raw = _pairs(tmp_path / "raw.jsonl", range(1000, 1240))
    assert _invoke("compare", raw, "-j", "mock/hash", "--store", store, "--out", tmp_path / "r.jsonl",
                   "-q").exit_code == 0
    verdict = {r["item_id"]: r["verdicts"]["likelihood"] for r in _lines(tmp_path / "r.jsonl")}

    def own(i: int) -> str:
        return verdict[f"q{i}"]

    for name, ids, label in (("A", range(1000, 1120), own), ("B", range(1120, 1240), b_label or own)):
        labelled = _pairs(tmp_path / f"cal{name}.jsonl", ids, human=label)
        assert _invoke("calibrate", labelled, "-j", "mock/hash", "--store", store, "--out",
                       tmp_path / f"cal{name}.json").exit_code == 0
    return store, verdict


def _mixed(tmp_path: Path) -> Path:
    rows = []
    for name, ids in (("A", range(0, 60)), ("B", range(60, 120)), ("C", range(120, 150))):
        rows += _pairs(tmp_path / "part.jsonl", ids, domain=name).read_text().splitlines()
    rows += _pairs(tmp_path / "part.jsonl", range(150, 155)).read_text().splitlines()  # no domain field at all
    (tmp_path / "mixed.jsonl").write_text("\n".join(rows) + "\n")
    return tmp_path / "mixed.jsonl"


def test_each_domain_is_selected_by_its_own_calibration_and_a_domain_without_one_abstains(tmp_path: Path) -> None:
    store, _ = _domain_calibrations(tmp_path)
    mixed = _mixed(tmp_path)
    done = _invoke("select", mixed, "-j", "mock/hash", "--store", store, "--calibration-by", "domain",
                   "--calibration", f"A={tmp_path / 'calA.json'}", "--calibration", f"B={tmp_path / 'calB.json'}",
                   "--target-agreement", 0.8, "--risk-delta", 0.1, "--out", tmp_path / "v.jsonl",
                   "--summary", tmp_path / "sum.json")
    assert done.exit_code == 0, done.output
    text = done.stderr.replace("\n", " ")
    a, b = Calibration.load(tmp_path / "calA.json"), Calibration.load(tmp_path / "calB.json")
    said = {"A": text[text.index("domain A:"):text.index("domain B:")], "B": text[text.index("domain B:"):]}
    for name, cal in (("A", a), ("B", b)):  # each domain's guarantee said apart, on its own calibration set
        assert "keeps only verdicts agreeing with humans >= 0.8" in said[name] and cal.data_hash in said[name]
    assert a.data_hash not in said["B"]
    assert f"35 verdicts abstained ({NO_CALIBRATION})" in text
    summary = json.loads((tmp_path / "sum.json").read_text())
    assert set(summary["domains"]) == {"A", "B"} and summary["verdicts"] == 155
    assert summary["domains"]["A"]["calibration"]["data_hash"] == a.data_hash
    assert summary["domains"]["B"]["calibration"]["data_hash"] == b.data_hash
    assert summary["domains"]["A"]["verdicts"] == 60 and summary["abstained"][NO_CALIBRATION] == 35
    assert summary["domains_without_calibration"] == [None, "C"]
    for rec in _lines(tmp_path / "v.jsonl"):
        block, i = rec["calibrated"], int(rec["item_id"][1:])
        want = "A" if i < 60 else "B" if i < 120 else "C" if i < 150 else None
        assert block["domain"] == want
        if want in (None, "C"):
            assert block["abstained"] == NO_CALIBRATION and block["verdict"] is None
        else:
            assert block["abstained"] in (None, "below_threshold") and block["verdict"] is not None


def test_the_domain_s_file_is_the_one_applied_and_the_library_does_the_same(tmp_path: Path) -> None:
    store, _ = _domain_calibrations(tmp_path, b_label=lambda i: "tie")  # B's humans always say tie
    mixed = _mixed(tmp_path)
    (tmp_path / "map.json").write_text(json.dumps({"A": "calA.json", "B": "calB.json"}))
    done = _invoke("select", mixed, "-j", "mock/hash", "--store", store, "--calibration-by", "domain",
                   "--calibration", tmp_path / "map.json", "--out", tmp_path / "v.jsonl")
    assert done.exit_code == 0, done.output
    recs = _lines(tmp_path / "v.jsonl")
    by = {d: [r["calibrated"]["verdict"] for r in recs if r["calibrated"]["domain"] == d] for d in ("A", "B")}
    assert set(by["B"]) == {"tie"}  # B's calibration learnt that its humans say tie
    assert by["A"].count("tie") < len(by["A"]) / 2  # A's did not
    cals = DomainCalibrations.load(tmp_path / "map.json", "domain")
    with Judge("mock/hash", store=store) as judge:
        raw = [{k: v for k, v in r.items() if k != "calibrated"} for r in recs]
        again, summary = apply_by_domain(judge, raw, load_items(mixed), cals)
    assert [r["calibrated"] for r in again] == [r["calibrated"] for r in recs]
    assert summary["abstained"][NO_CALIBRATION] == 35


def test_bad_domain_maps_are_refused_naming_the_file_and_field(tmp_path: Path) -> None:
    (tmp_path / "map.json").write_text(json.dumps({"A": 3}))
    with pytest.raises(ConfigError, match=r"map\.json: field 'A' is not the path of a calibration file"):
        DomainCalibrations.load(tmp_path / "map.json", "domain")
    bad = CliRunner().invoke(cli, ["select", str(tmp_path / "map.json"), "-j", "mock/hash", "--calibration-by",
                                   "domain", "--calibration", "A"])
    assert bad.exit_code != 0
    missing = CliRunner().invoke(cli, ["select", str(tmp_path / "map.json"), "-j", "mock/hash", "--calibration",
                                       "A=cal.json"])
    assert missing.exit_code != 0 and "DOMAIN=FILE needs --calibration-by FIELD" in missing.output


def test_select_by_domain_honours_force_delta(tmp_path: Path) -> None:
    store, _ = _domain_calibrations(tmp_path)
    mixed = _mixed(tmp_path)
    args = ["select", mixed, "-j", "mock/hash", "--store", store, "--calibration-by", "domain", "--calibration",
            f"A={tmp_path / 'calA.json'}", "--calibration", f"B={tmp_path / 'calB.json'}", "--target-agreement", 0.8,
            "--risk-delta", 0.6, "--summary", tmp_path / "sum.json", "--out", tmp_path / "v.jsonl"]
    refused = CliRunner().invoke(cli, [str(a) for a in args])
    assert refused.exit_code != 0 and "force it (--force-delta" in str(refused.exception), refused.exception
    forced = _invoke(*args, "--force-delta")  # before: refused the same, the flag ignored
    assert forced.exit_code == 0, forced.output
    summary = json.loads((tmp_path / "sum.json").read_text())
    assert {s["guarantee"]["delta"] for s in summary["domains"].values()} == {0.6}


def test_the_judging_commands_take_calibration_by_and_each_domain_remembers_its_own_check(tmp_path: Path) -> None:
    import hashlib

    from trustjudge.audit import _ledger

    store, _ = _domain_calibrations(tmp_path)
    mixed = _mixed(tmp_path)
    (tmp_path / "map.json").write_text(json.dumps({"A": "calA.json", "B": "calB.json"}))
    a = Calibration.load(tmp_path / "calA.json")
    refuted = {"result": "refuted", "kept_labelled": 20, "kept_agreed": 10, "agreement": 0.5,
               "target_agreement": 0.8, "delta": 0.1}  # a check of A's guarantee on these very items
    _ledger.remember(_ledger.ledger_path(tmp_path / "calA.json"), _ledger.entry_of(
        refuted, data_hash=a.data_hash, items_sha256=hashlib.sha256(mixed.read_bytes()).hexdigest(), sample="s"))
    common = ["-j", "mock/hash", "--store", store, "--calibration-by", "domain", "--calibration", tmp_path / "map.json",
              "--target-agreement", 0.8]
    judged = _invoke("compare", mixed, *common, "--out", tmp_path / "c.jsonl", "--summary", tmp_path / "c.json")
    assert judged.exit_code == 0, judged.output  # before: "no such option: --calibration-by"
    selected = _invoke("select", mixed, *common, "--out", tmp_path / "s.jsonl", "--summary", tmp_path / "s.json")
    assert selected.exit_code == 0, selected.output
    by_compare, by_select = _lines(tmp_path / "c.jsonl"), _lines(tmp_path / "s.jsonl")
    assert [r["calibrated"] for r in by_compare] == [r["calibrated"] for r in by_select]  # one per-domain path
    for rec in by_compare:
        domain = rec["calibrated"]["domain"]
        if domain == "A":  # A's check is said on A's verdicts only, in both commands
            assert rec["calibrated"]["verification"]["result"] == "refuted"
        else:
            assert "verification" not in rec["calibrated"]
    for name, out in (("c.json", judged), ("s.json", selected)):
        summary = json.loads((tmp_path / name).read_text())
        assert summary["domains"]["A"]["verification"]["result"] == "refuted", name
        assert "verification" not in summary["domains"]["B"] and summary["abstained"][NO_CALIBRATION] == 35
        said = out.stderr.replace("\n", " ")
        assert "guarantee refuted by check-sample on 20 labels" in said[said.index("domain A:"):said.index("domain B:")]
    # without --calibration, --calibration-by is refused
    alone = CliRunner().invoke(cli, ["compare", str(mixed), "-j", "mock/hash", "--calibration-by", "domain"])
    assert alone.exit_code != 0 and "--calibration-by needs --calibration" in alone.output


def test_a_per_domain_run_is_sampled_and_checked_per_domain_and_the_check_is_remembered_for_that_domain(
        tmp_path: Path) -> None:
    from trustjudge.audit import _ledger

    store, _ = _domain_calibrations(tmp_path)
    mixed = _mixed(tmp_path)
    (tmp_path / "map.json").write_text(json.dumps({"A": "calA.json", "B": "calB.json"}))
    run = ["select", mixed, "-j", "mock/hash", "--store", store, "--calibration-by", "domain", "--calibration",
           tmp_path / "map.json", "--target-agreement", 0.8, "--out", tmp_path / "v.jsonl", "--summary",
           tmp_path / "sum.json"]
    assert _invoke(*run).exit_code == 0
    records = _lines(tmp_path / "v.jsonl")
    sample = tmp_path / "sample.jsonl"
    whole = CliRunner().invoke(cli, ["sample", str(tmp_path / "v.jsonl"), "--items", str(mixed), "--summary",
                                     str(tmp_path / "sum.json"), "--out", str(sample)])
    assert whole.exit_code != 0 and "give --domain, one of 'A', 'B'" in whole.output, whole.output
    drawn = _invoke("sample", tmp_path / "v.jsonl", "--items", mixed, "--summary", tmp_path / "sum.json",
                    "--domain", "A", "--out", sample, "--size", 20)
    assert drawn.exit_code == 0, drawn.output  # before: no such option --domain
    rows = _lines(sample)
    assert rows and all(int(r["id"][1:]) < 60 for r in rows)  # domain A's items only
    said = {r["item_id"]: r["calibrated"]["verdict"] for r in records}
    for row in rows:  # planted: every label the other response, so A's guarantee is refuted on this data
        for pair in row["pairs"]:
            pair["human"] = "second" if said[row["id"]] == "first" else "first"
    sample.write_text("".join(json.dumps(r) + "\n" for r in rows))
    checked = _invoke("check-sample", sample)
    assert checked.exit_code == 0 and "REFUTED" in checked.stderr, checked.output
    assert _ledger.ledger_path(tmp_path / "calA.json").exists()
    assert not _ledger.ledger_path(tmp_path / "calB.json").exists()
    again = _invoke(*run)
    said_a = again.stderr.replace("\n", " ")
    assert "guarantee refuted by check-sample" in said_a[said_a.index("domain A:"):said_a.index("domain B:")]
    assert "check-sample" not in said_a[said_a.index("domain B:"):]
    # an edited verdict of domain B is refused naming its line in the file (not its place among B's records)
    assert records[64]["calibrated"]["domain"] == "B"
    records[64]["calibrated"]["verdict"] = "second" if records[64]["calibrated"]["verdict"] == "first" else "first"
    (tmp_path / "edited.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(ConfigError, match=r"edited\.jsonl: line 65: field 'calibrated\.verdict' is "):
        _invoke("sample", tmp_path / "edited.jsonl", "--items", mixed, "--summary", tmp_path / "sum.json",
                "--domain", "B", "--out", tmp_path / "sb.jsonl", "--size", 10)


def test_the_service_calibrates_by_domain_as_the_cli_does(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from trustjudge.serve import create_app

    store, _ = _domain_calibrations(tmp_path)
    mixed = _mixed(tmp_path)
    done = _invoke("select", mixed, "-j", "mock/hash", "--store", store, "--calibration-by", "domain",
                   "--calibration", f"A={tmp_path / 'calA.json'}", "--calibration", f"B={tmp_path / 'calB.json'}",
                   "--target-agreement", 0.8, "--out", tmp_path / "v.jsonl", "--summary", tmp_path / "sum.json")
    assert done.exit_code == 0, done.output
    rows = [json.loads(line) for line in mixed.read_text().splitlines()]
    body = {"items": rows, "calibration_by": "domain", "target_agreement": 0.8,
            "domain_calibrations": {"A": json.loads((tmp_path / "calA.json").read_text()), "B": "cal-b"}}
    app = create_app("mock/hash", store_path=store, calibrations={"cal-b": tmp_path / "calB.json"})
    with TestClient(app) as client:
        answer = client.post("/v1/compare", json=body)  # before: 422, extra fields not permitted
        assert answer.status_code == 200, answer.text
        served = answer.json()
        assert [r["calibrated"] for r in served["records"]] == [r["calibrated"] for r in _lines(tmp_path / "v.jsonl")]
        summary = json.loads((tmp_path / "sum.json").read_text())
        assert served["calibration"]["kept"] == summary["kept"] and set(served["calibration"]["domains"]) == {"A", "B"}
        assert served["calibration"]["abstained"][NO_CALIBRATION] == 35
        unknown = client.post("/v1/compare", json={**body, "domain_calibrations": {"A": "nope"}})
        assert unknown.status_code == 422 and unknown.json()["detail"][0]["field"] == "domain_calibrations.A"
        half = client.post("/v1/compare", json={"items": rows, "calibration_by": "domain"})
        assert half.status_code == 422 and half.json()["detail"][0]["field"] == "domain_calibrations"


def test_a_calibration_file_or_domain_map_with_a_duplicate_key_or_odd_json_is_refused_not_a_traceback(
        tmp_path: Path) -> None:
    """A domain named twice in a map, a calibration field given twice, deep nesting or an over-long integer: a
    clear error naming the file (before: the last duplicate won silently; the others were tracebacks)."""
    (tmp_path / "map.json").write_text('{"A": "a.json", "A": "b.json"}')
    with pytest.raises(ConfigError, match=r"map\.json: not JSON \(duplicate key 'A'\)"):
        DomainCalibrations.load(tmp_path / "map.json", "domain")
    for name, text in (("dup", '{"trustjudge_calibration": 1, "method": "vector", "method": "temperature"}'),
                       ("deep", "[" * 100_000 + "]" * 100_000), ("big", '{"n": 1' + "0" * 5000 + "}")):
        (tmp_path / f"{name}.json").write_text(text)
        with pytest.raises(ConfigError, match=rf"{name}\.json: not JSON"):
            Calibration.load(tmp_path / f"{name}.json")
        (tmp_path / "items.jsonl").write_text(_pairs(tmp_path / "p.jsonl", range(2)).read_text())
        result = CliRunner().invoke(cli, ["select", str(tmp_path / "items.jsonl"), "-j", "mock/hash", "--store",
                                          str(tmp_path / "s.sqlite"), "--calibration", str(tmp_path / f"{name}.json")])
        assert isinstance(result.exception, ConfigError) and "not JSON" in str(result.exception)  # exit 2


def test_an_ensemble_or_panel_calibration_is_refused_before_any_judging_where_pairs_are_judged_once(
        tmp_path: Path) -> None:
    """compare --calibration, select --calibration-by and select_by_domain judge each pair once: a panel or
    ensemble file is refused before the first model call (before: every item was judged, then refused)."""
    store = tmp_path / "s.sqlite"
    labelled = _pairs(tmp_path / "cal.jsonl", range(40), human=lambda i: ("first", "second", "tie")[i % 3])
    assert _invoke("calibrate", labelled, "-j", "mock/hash", "--store", store, "--out", tmp_path / "crit.json",
                   "--confidence", "critiques", "--panel-size", "2", "-q").exit_code == 0
    new = _pairs(tmp_path / "new.jsonl", range(100, 110), domain="A")
    fresh = tmp_path / "fresh.sqlite"
    (tmp_path / "map.json").write_text(json.dumps({"A": "crit.json"}))
    for args in (["compare", new, "--calibration", tmp_path / "crit.json"],
                 ["compare", new, "--calibration", tmp_path / "map.json", "--calibration-by", "domain"],
                 ["select", new, "--calibration", f"A={tmp_path / 'crit.json'}", "--calibration-by", "domain"]):
        result = CliRunner().invoke(cli, [str(a) for a in [*args, "-j", "mock/hash", "--store", fresh, "--out",
                                                           tmp_path / "o.jsonl", "-q"]])
        assert isinstance(result.exception, ConfigError), result.output
        assert "judges each pair several times" in str(result.exception)
        assert not fresh.exists() and not (tmp_path / "o.jsonl").exists()  # nothing judged
    from trustjudge.audit._domains import select_by_domain
    with Judge("mock/hash", store=fresh) as judge, pytest.raises(ConfigError, match="several times"):
        select_by_domain(judge, load_items(new), DomainCalibrations.load(tmp_path / "map.json", "domain"))
    assert judge.stats.model_calls == 0


def test_the_service_refuses_a_panel_calibration_for_a_domain_before_any_judging(tmp_path: Path) -> None:
    """As its single calibration does (422 naming the field): before, the request's pairs were judged first."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from trustjudge.serve import create_app

    store = tmp_path / "s.sqlite"
    labelled = _pairs(tmp_path / "cal.jsonl", range(40), human=lambda i: ("first", "second", "tie")[i % 3])
    assert _invoke("calibrate", labelled, "-j", "mock/hash", "--store", store, "--out", tmp_path / "crit.json",
                   "--confidence", "critiques", "--panel-size", "2", "-q").exit_code == 0
    rows = [json.loads(line) for line in _pairs(tmp_path / "new.jsonl", range(100, 106), domain="A").read_text()
            .splitlines()]
    body = {"items": rows, "calibration_by": "domain",
            "domain_calibrations": {"A": json.loads((tmp_path / "crit.json").read_text())}}
    app = create_app("mock/hash", store_path=tmp_path / "fresh.sqlite")
    with TestClient(app) as client:
        answer = client.post("/v1/compare", json=body)
        assert answer.status_code == 422, answer.text
        detail = answer.json()["detail"][0]
        assert detail["field"] == "domain_calibrations.A" and "several times" in detail["msg"], detail
        assert client.get("/v1/stats").json()["model_calls"] == 0  # nothing judged


def test_a_domain_that_is_a_boolean_or_number_is_matched_by_its_json_spelling_and_a_list_is_refused(
        tmp_path: Path) -> None:
    """Before: ``true`` became ``"True"``, so a map's key ``"true"`` never matched and the item abstained silently."""
    _domain_calibrations(tmp_path)
    (tmp_path / "map.json").write_text(json.dumps({"true": "calA.json", "3": "calB.json"}))
    domains = DomainCalibrations.load(tmp_path / "map.json", "domain")
    rows = [{"id": f"q{i}", "question": "Q?", "domain": value, "responses": [{"id": "a", "text": "x"}]}
            for i, value in enumerate([True, 3, "true", None, ["a"]])]
    (tmp_path / "odd.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = load_items(tmp_path / "odd.jsonl")
    assert [domains.domain_of(it) for it in items[:4]] == ["true", "3", "true", None]
    assert all(domains.domain_of(it) in domains.calibrations for it in items[:3])
    assert domains.domain_of(items[4]) is None  # a file's list field is not kept: no domain
    listed = dataclasses.replace(items[4], fields={"domain": ["a"]})  # an Item built in Python may hold one
    with pytest.raises(ConfigError, match=r"item 'q4': field 'domain' is a list, not a domain name"):
        domains.domain_of(listed)
