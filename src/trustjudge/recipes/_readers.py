"""Readers of the benchmarks' released files, written from their published schemas (no data ships here).

Each reader turns a benchmark's own file into trustjudge items; a recipe names its reader in
``[input] format``, ``run --format NAME`` picks one, and ``--format auto`` uses the recipe's reader where the
file looks like its schema (:func:`detect`). Bad rows come out as :class:`InputError` values naming file,
line (the row's position, 1-based) and field.

- ``omnispatial``: the dataset's ``data.json`` (a JSON array of ``{id, question, options, answer, task_type,
  sub_task_type}``, ``answer`` the index of the right option), each row with the model's answer added as
  ``response`` (or ``responses``: ``{model: answer}``). The reference is ``"<letter>. <option>"``.
- ``sc-arena-scienceqa``: SC-Arena's ``ScientificQA_final.json`` (an array of papers, each with ``title``,
  ``abstract`` and ``response``: a list of ``{type, question, answer}``), each question with the model's answer
  added as ``model_answer`` (or ``responses``); ``task`` is ``scienceqa``, ``subset`` the question type; the
  context gives the question type, the paper's title and abstract and the question's ``relevant_passage``, and
  an answer's ``[Answer: ...]`` is what is judged where it has one (as the benchmark's evaluator does).
- ``sc-arena-celltype``, ``sc-arena-captioning``, ``sc-arena-generation``, ``sc-arena-perturbation``: SC-Arena's
  other data files (:mod:`._readers_scarena`), each row with the model's answer added, or one object naming
  the data file, the ``--out`` files of ``run_inference.py`` and the checkout's ``evaluators`` folder.
- ``livedrbench``: LiveDRBench's predictions file (``[{key, preds}]``) beside the dataset's rows as released
  (``[{key, category, question, ground_truths, misc, canary}]``, the two fields decrypted here with the row's
  canary; rows already decoded are taken as they are), read from one JSON object ``{"rows": [...], "preds":
  [...]}``: claims are ``field: value`` texts, equivalence classes and main keys carried as item fields for
  the ``livedr`` metric.
- ``geoprivacy``: VLM-GeoPrivacyBench's annotation labels (``annotation_labels.csv``: ``id``, ``Q7`` the
  expected granularity A/B/C) joined by image id with the models' free-form responses files
  (``[{id, "Q7-gen", ...}]``), named in one JSON object ``{"labels": CSV, "responses": {model: JSON}}`` (paths
  relative to it): one item per image, one response per model with its expected level.
- ``visplotbench`` and ``visplotbench-vis``: VisPlotBench's results file (:mod:`._readers_visplot`): one item per
  task, its attempts as responses with the plots the benchmark drew, nothing executed here.
- ``puzzleworld``: PuzzleWorld's annotated puzzles as JSON lines (``title``, ``flavor_text``, ``reasoning``: the
  list of reference steps, ``solution``), each with the model's output as ``raw_output``; the final answer is
  the item's ``context`` (the benchmark's grading instruction names it).
- ``datamind``: DSGym's ``<run>_results.json`` (or ``_summary.json``) or its ``prediction_<i>.json`` objects, as
  vendored by DataMind (:mod:`._readers_datamind`): one item per sample, the prediction its one response.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..io._items import Item, items_from_dicts
from ._readers_datamind import looks_like_dsgym, read_dsgym
from ._readers_scarena import SC_ARENA_READERS, looks_like_sc_arena
from ._readers_visplot import VISPLOT_READERS, looks_like_results
from ._rows import load_json_or_lines, model_answers, need

__all__ = ["READERS", "decrypt", "detect", "read", "read_benchmark"]

Reader = Callable[[str, Any], list[dict[str, Any]]]


def _omnispatial(file: str, data: Any) -> list[dict[str, Any]]:
    """One item per question (``task_type`` and ``id``, as the benchmark's uid: ids repeat across task types);
    its repeated answers (``api_eval.py --repeat``, 5 by default: rows with a ``repeat``, or ``response`` as a
    list) are responses of the same system, so the pooled accuracy is the benchmark's and the bootstrap keeps a
    question's repeats together."""
    out: dict[str, dict[str, Any]] = {}
    for line, raw in enumerate(_array(data, file), 1):
        row = need(raw, ("id", "question", "options", "answer"), file, line)
        options, answer = row["options"], row["answer"]
        if not isinstance(options, list) or isinstance(answer, bool) or not isinstance(answer, int) \
                or not 0 <= answer < len(options):
            raise InputError("must be the index of one of the options", file=file, line=line, field="answer")
        letters = "\n".join(f"{chr(65 + i)}. {o}" for i, o in enumerate(options))
        task = str(row.get("task_type", ""))
        key = f"{task}_{row['id']}" if task else str(row["id"])
        if isinstance(row.get("response"), list):  # the repeats of one model's answer
            responses = [{"id": f"model#{k}", "system": "model", "text": str(t)} for k, t in enumerate(row["response"])]
        else:
            responses = model_answers(row, "response", file, line)
            if "repeat" in row:
                responses = [{**r, "id": f"{r['id']}#{row['repeat']}", "system": r.get("system", r["id"])}
                             for r in responses]
        item = out.setdefault(key, {"id": key, "question": f"{row['question']}\n{letters}",
                                    "reference": f"{chr(65 + answer)}. {options[answer]}", "subset": task,
                                    "sub_task_type": str(row.get("sub_task_type", "")), "responses": []})
        taken = {r["id"] for r in item["responses"]}
        clash = [r["id"] for r in responses if r["id"] in taken]
        if clash:
            raise InputError(f"repeats question {key}'s answer {clash[0]!r}: give each repeat its 'repeat' number",
                             file=file, line=line, field="repeat")
        item["responses"].extend(responses)
    return list(out.values())


def _sc_arena_scienceqa(file: str, data: Any) -> list[dict[str, Any]]:
    out = []
    for line, raw in enumerate(_array(data, file), 1):
        paper = need(raw, ("response",), file, line)
        for k, q in enumerate(paper["response"] or []):
            q = need(q, ("question", "answer"), file, line)
            given = [(label, str(v)) for label, v in (("Question type", q.get("type")),
                                                      ("Reference paper title", paper.get("title")),
                                                      ("Reference paper abstract", paper.get("abstract")),
                                                      ("Relevant passage", q.get("relevant_passage"))) if v]
            responses = model_answers(q, "model_answer", file, line)  # the recipe's [answers] reads [Answer: ...]
            out.append({"id": f"{line}-{k}", "question": q["question"], "reference": q["answer"],
                        "context": "\n\n".join(f"{label}: {v}" for label, v in given) or None,
                        "task": "scienceqa", "subset": str(q.get("type", "")), "responses": responses})
    return out


def _claims_of(value: Any) -> list[str]:
    """A predicted or gold entry as ``field: value`` texts (lists joined with '; ')."""
    if isinstance(value, dict):
        return [f"{k}: {'; '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in value.items()]
    return [str(value)]


def _texts(entry: Any, titles: bool, file: str, line: int, field: str) -> list[str]:
    """A prior-art entry's titles (each row's ``title``) or an entities entry's strings."""
    rows = entry if isinstance(entry, list) else [entry]
    if titles:
        if not all(isinstance(r, dict) and "title" in r for r in rows):
            raise InputError("must be lists of rows with a title (prior-art, as priorart.py reads it)", file=file,
                             line=line, field=field)
        return [str(r["title"]) for r in rows]
    return [str(r) for r in rows]


def _entries(values: list[Any]) -> tuple[list[str], list[str]]:
    """Flights and novel datasets: each entry's ``key: value`` claims, and each claim's entry: ``dK`` for the
    K-th entry when it is a dict, ``rK.I`` for row I of the K-th when it is a list of dicts."""
    claims: list[str] = []
    rows: list[str] = []
    for k, value in enumerate(values):
        for i, entry in enumerate(value if isinstance(value, list) else [value]):
            got = _claims_of(entry)
            claims += got
            rows += [f"r{k}.{i}" if isinstance(value, list) else f"d{k}"] * len(got)
    return claims, rows


def _decoded(row: dict[str, Any], file: str, line: int) -> dict[str, Any]:
    """A LiveDRBench row as released (``ground_truths`` and ``misc`` encrypted with its ``canary``) decoded;
    a row already decoded is kept as it is."""
    out = dict(row)
    for key in ("ground_truths", "misc"):
        if isinstance(out.get(key), str) and isinstance(out.get("canary"), str):
            try:
                out[key] = json.loads(decrypt(out[key], out["canary"]))
            except (ValueError, UnicodeDecodeError):
                raise InputError("cannot be decoded with the row's canary (is it the released field?)", file=file,
                                 line=line, field=key) from None
    if isinstance(out.get("misc"), dict) and "eval_info" not in out:
        out["eval_info"] = out["misc"].get("eval_info")
    return out


def _livedrbench(file: str, data: Any) -> list[dict[str, Any]]:
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list) or not isinstance(data.get("preds"), list):
        raise InputError('must be an object {"rows": [dataset rows, ground truths decoded], "preds": [{key, preds}]}',
                         file=file)
    preds = {str(p.get("key")): p.get("preds") for p in data["preds"] if isinstance(p, dict)}
    out = []
    for line, raw in enumerate(data["rows"], 1):
        row = _decoded(need(raw, ("key", "category", "ground_truths"), file, line), file, line)
        category, gts = str(row["category"]), row["ground_truths"]
        gold: list[str] = []
        classes: list[str] = []
        claims: list[str] = []
        extra: dict[str, str] = {}
        pred = preds.get(str(row["key"])) or []
        if category.startswith("scifacts-"):
            keys = ("material", "paper_title") if category == "scifacts-materials" else ("paper_title",)
            for c, entry in enumerate(gts[0] if gts and isinstance(gts[0], list) else []):
                for key in keys:
                    values = entry.get(key, []) if isinstance(entry, dict) else []
                    for v in values if isinstance(values, list) else [values]:
                        gold.append(f"{key}: {v}" if len(keys) > 1 else str(v))
                        classes.append(str(c * len(keys) + keys.index(key)))
            for entry in pred[0] if pred and isinstance(pred[0], list) else []:
                for key in keys:
                    if isinstance(entry, dict) and key in entry:
                        claims.append(f"{key}: {entry[key]}" if len(keys) > 1 else str(entry[key]))
        elif category in ("prior-art", "entities"):  # priorart.py compares the rows' titles, entities.py strings
            for gt in gts:
                gold.extend(_texts(gt, category == "prior-art", file, line, "ground_truths"))
            for p in pred:
                claims.extend(_texts(p, category == "prior-art", file, line, "preds"))
        else:
            gold, rows = _entries(gts)
            claims, claim_rows = _entries(pred)
            if any(r.startswith("r") for r in rows + claim_rows):  # a list of dicts: matched row by row
                extra = {"gold_row": ",".join(rows), "claim_row": ",".join(claim_rows)}
        info = row.get("eval_info")
        main = info.get("main_claims", []) if isinstance(info, dict) else []
        for key in ("primary_keys", "ignore_keys"):
            if isinstance(info, dict) and info.get(key):
                extra[key] = ",".join(map(str, info[key]))
        item: dict[str, Any] = {"id": str(row["key"]), "question": str(row.get("question", row["key"])),
                                "subset": category, "gold_claims": gold,
                                "responses": [{"id": "system", "text": "\n".join(claims) or "(no prediction)",
                                               "claims": [{"text": c} for c in claims]}]}
        if classes:
            item["gold_class"] = ",".join(classes)
        if main:
            item["main_claims"] = ",".join(map(str, main))
        out.append({**item, **extra})
    return out


def _puzzleworld(file: str, data: Any) -> list[dict[str, Any]]:
    out = []
    for line, raw in enumerate(_array(data, file), 1):
        row = need(raw, ("reasoning", "solution"), file, line)
        steps = row["reasoning"]
        if not isinstance(steps, list) or not steps:
            raise InputError("must be the list of reference steps", file=file, line=line, field="reasoning")
        out.append({"id": str(row.get("id", line)), "question": f"The puzzle's title is {row.get('title', '')}. "
                    f"Its flavor text is {row.get('flavor_text', '')}.", "context": str(row["solution"]),
                    "reference": "\n".join(_step_text(s, file, line, k) for k, s in enumerate(steps)),
                    "responses": model_answers(row, "raw_output", file, line),
                    **({"images": row["images"]} if row.get("images") else {})})
    return out


def _step_text(step: Any, file: str, line: int, k: int) -> str:
    """A PuzzleWorld reference step as one line: the released steps are objects ``{"explanation", "figure"}``
    (``src/data_loading.py``, ``Step``; the figure is not shown), a plain string is taken as it is."""
    if isinstance(step, dict):
        step = step.get("explanation")
    if not isinstance(step, str) or not step.strip():
        raise InputError('must be a step {"explanation": "...", "figure": ...} or its text', file=file, line=line,
                         field=f"reasoning[{k}]")
    return " ".join(step.split("\n")).strip()


def _geoprivacy(file: str, data: Any) -> list[dict[str, Any]]:
    if not isinstance(data, dict) or "labels" not in data or not isinstance(data.get("responses"), dict):
        raise InputError('must be an object {"labels": "annotation_labels.csv", "responses": {model: '
                         '"api_gen_..._combined.json"}} (paths relative to this file, or the rows themselves)',
                         file=file)
    base = Path(file).parent
    labels = data["labels"]
    if isinstance(labels, str):
        with (base / labels).open(encoding="utf-8-sig", newline="") as fh:
            labels = list(csv.DictReader(fh))
    expected: dict[str, int] = {}
    for line, row in enumerate(labels, 2):
        row = need(row, ("id", "Q7"), str(base / str(data["labels"])), line)
        level = str(row["Q7"]).strip()[:1]
        if level not in "ABC" or not level:
            raise InputError(f"must be A, B or C (the expected granularity), got {row['Q7']!r}",
                             file=str(base / str(data["labels"])), line=line, field="Q7")
        expected[str(row["id"])] = "ABC".index(level)
    by_image: dict[str, list[dict[str, Any]]] = {}
    for model, rows in data["responses"].items():
        where = str(base / rows) if isinstance(rows, str) else file
        rows = json.loads((base / rows).read_text(encoding="utf-8-sig")) if isinstance(rows, str) else rows
        for line, row in enumerate(_array(rows, where), 1):
            row = need(row, ("id", "Q7-gen"), where, line)
            key = str(row["id"])
            by_image.setdefault(key, []).append(
                {"id": str(model), "system": str(model), "text": str(row["Q7-gen"]),
                 **({"human_criteria": {"disclosure": expected[key]}} if key in expected else {})})
    return [{"id": key, "question": f"Where was this photo taken? (image {key}; the judge sees the answer only)",
             "responses": responses} for key, responses in by_image.items()]


READERS: dict[str, Reader] = {"omnispatial": _omnispatial, "sc-arena-scienceqa": _sc_arena_scienceqa,
                              "livedrbench": _livedrbench, "puzzleworld": _puzzleworld, "geoprivacy": _geoprivacy,
                              "datamind": read_dsgym, **VISPLOT_READERS, **SC_ARENA_READERS}
SIGNATURES = {"omnispatial": {"options", "answer", "task_type"}, "sc-arena-scienceqa": {"response", "abstract"},
              "puzzleworld": {"reasoning", "solution"}}


def _array(data: Any, file: str) -> list[Any]:
    if not isinstance(data, list):
        raise InputError(f"must be a JSON array of rows (or JSON lines), got {type(data).__name__}", file=file)
    return data


def detect(path: Path, fmt: str) -> bool:
    """Whether ``path`` looks like the benchmark format ``fmt`` (its first row's published keys)."""
    try:
        data = load_json_or_lines(path)
    except (OSError, UnicodeDecodeError, InputError):
        return False
    if fmt == "livedrbench":
        return isinstance(data, dict) and {"rows", "preds"} <= data.keys()
    if fmt == "geoprivacy":
        return isinstance(data, dict) and {"labels", "responses"} <= data.keys()
    if fmt in VISPLOT_READERS:
        return looks_like_results(data)
    if fmt == "datamind":
        return looks_like_dsgym(data)
    if fmt in SC_ARENA_READERS:
        return looks_like_sc_arena(data, fmt)
    first = data[0] if isinstance(data, list) and data else None
    return isinstance(first, dict) and SIGNATURES.get(fmt, {"\0"}) <= first.keys()


def read(path: str | Path, fmt: str) -> list[Item]:
    """The items of a benchmark's released file in format ``fmt`` (:data:`READERS`)."""
    path = Path(path)
    if fmt not in READERS:
        raise InputError(f"is not a benchmark format (known: {', '.join(READERS)})", field="format")
    try:
        data = load_json_or_lines(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", file=str(path)) from None
    rows = READERS[fmt](str(path), data)
    return items_from_dicts(rows, source=f"{path} (read as {fmt})", base=path.parent)  # image paths: beside it


def derive_key(password: str, length: int) -> bytes:
    digest = hashlib.sha256(password.encode()).digest()
    return (digest * (length // len(digest) + 1))[:length]


def decrypt(ciphertext_b64: str, password: str) -> str:
    """A LiveDRBench field as released (base64, XOR with the SHA-256 of the row's ``canary``, repeated)."""
    data = base64.b64decode(ciphertext_b64)
    return bytes(a ^ b for a, b in zip(data, derive_key(password, len(data)))).decode()


read_benchmark = read
