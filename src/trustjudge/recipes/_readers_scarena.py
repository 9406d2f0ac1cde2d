"""Readers of SC-Arena's released data files for the tasks besides scienceqa (SUAT-AIRI/SC-Arena at f4480a2).

Each task's evaluator (``evaluators/*.py``) reads one data file of ``data/`` and the model's answers in the
file's order (``evaluate(answers)``, ``answers[idx]``); ``scripts/run_inference.py --out`` writes those answers
as JSON lines ``{prompt, response}``. A reader takes either

- the data file itself with the model's answer added to each row as ``model_answer`` (or ``responses``:
  ``{model: answer}``), or
- one JSON object naming the files (paths relative to it): ``{"data": "cell_sentences_fixed.jsonl",
  "outputs": {model: "outputs/celltype/result.jsonl"}, "evaluators": "SC-Arena/evaluators"}``; the outputs
  are joined with the data rows by order, as the evaluator does (generation: by the ``Cell Type:`` line of
  each prompt, its evaluator iterating a set of the types). ``evaluators`` (optional) is the checkout's folder
  holding the files the evaluators read beside the data: ``cl_nl6.obo`` (the Cell Ontology: the path chains of
  the true type), ``cell_marker.txt`` (generation's marker genes), ``gene_ontology_{C,P,F}.csv`` and the two
  NCBI summaries (perturbation's reference knowledge). Without it, the items carry no such context.

Formats: ``sc-arena-celltype`` and ``sc-arena-captioning`` (``cell_sentences_fixed.jsonl``: ``tissue``,
``cell_type``, ``cell_sentence``), ``sc-arena-generation`` (the same file: one item per cell type, the
reference its first three cell sentences where the evaluator samples three at random), and
``sc-arena-perturbation`` (``test_perturbation.json``: ``condition``, ``up_genes``, ``down_genes``,
``ctrl_sentence``, ``pert_sentence``). Bad input is an InputError naming the file, the row and the field.
"""

from __future__ import annotations

import csv
import json
import re
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import InputError
from ._rows import load_json_or_lines, model_answers, need

__all__ = ["SC_ARENA_READERS", "looks_like_sc_arena"]

DATA_FILE = "SC-Arena's data file"
"""Who says a row's required field is there (:func:`._rows.need`'s message)."""

Rows = list[dict[str, Any]]


def _file(base: Path, value: Any, file: str, field: str) -> Path:
    if not isinstance(value, str) or not value:
        raise InputError("must be a file's path (relative to this file)", file=file, field=field)
    path = base / value
    if not path.exists():
        raise InputError(f"names {value!r}, which does not exist ({path})", file=file, field=field)
    return path


def _outputs(data: dict[str, Any], base: Path, file: str) -> dict[str, list[tuple[str, str, int]]]:
    """Each model's ``--out`` file: its (prompt, response, line) rows in order."""
    outputs = data.get("outputs")
    if not isinstance(outputs, dict) or not outputs:
        raise InputError("must be a table of model -> its --out file (JSON lines {prompt, response})", file=file,
                         field="outputs")
    out: dict[str, list[tuple[str, str, int]]] = {}
    for model, name in outputs.items():
        path = _file(base, name, file, f"outputs.{model}")
        rows = load_json_or_lines(path)
        if isinstance(rows, dict) and isinstance(rows.get("response"), list):  # the *_fm providers' one object
            rows = [{"prompt": "", "response": r} for r in rows["response"]]
        got = []
        for n, row in enumerate(rows if isinstance(rows, list) else [rows], 1):
            if not isinstance(row, dict) or not isinstance(row.get("response"), str):
                raise InputError("must be an object with the model's response (a string)", file=str(path), line=n,
                                 field="response")
            got.append((str(row.get("prompt", "")), row["response"], n))
        out[str(model)] = got
    return out


def _joined(file: str, data: Any, keys: tuple[str, ...]) -> tuple[Rows, list[list[dict[str, Any]]], Path | None,
                                                                   str]:
    """The data rows (checked for ``keys``), each row's responses, the checkout's evaluators folder (if named)
    and the data file's name (for errors)."""
    base = Path(file).parent
    if isinstance(data, dict) and "data" in data:
        where = _file(base, data["data"], file, "data")
        rows = load_json_or_lines(where)
        if not isinstance(rows, list):
            raise InputError("must be SC-Arena's data file: rows of JSON lines or a JSON array", file=str(where))
        rows = [need(r, keys, str(where), n, DATA_FILE) for n, r in enumerate(rows, 1)]
        per_row: list[list[dict[str, Any]]] = [[] for _ in rows]
        for model, got in _outputs(data, base, file).items():
            if len(got) != len(rows):
                raise InputError(f"has {len(got)} responses for the {len(rows)} rows of {where.name} (the evaluator "
                                 "reads one per row, in order)", file=str(base / data["outputs"][model]))
            for k, (_, text, _) in enumerate(got):
                per_row[k].append({"id": model, "system": model, "text": text})
        ev = _file(base, data["evaluators"], file, "evaluators") if data.get("evaluators") else None
        return rows, per_row, ev, str(where)
    if not isinstance(data, list):
        raise InputError("must be SC-Arena's data file (rows with model_answer added) or an object {data, outputs}",
                         file=file)
    rows = [need(r, keys, file, n, DATA_FILE) for n, r in enumerate(data, 1)]
    also = ", or name the data and the --out files in one object"
    return rows, [model_answers(r, "model_answer", file, n, also) for n, r in enumerate(rows, 1)], None, file


# -- the Cell Ontology (cl_nl6.obo), read as the evaluators' pronto graph has it: is_a edges between CL terms --

class Ontology:
    """The terms of an OBO file: id -> (name, definition), and each CL term's is_a parents among CL terms."""

    def __init__(self, path: Path) -> None:
        self.names: dict[str, str] = {}
        self.defs: dict[str, str] = {}
        self.parents: dict[str, list[str]] = {}
        term: str | None = None
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = line.strip()
            if line.startswith("["):
                term = "" if line == "[Term]" else None
            elif term is not None and ":" in line:
                key, _, value = line.partition(":")
                value = value.strip()
                if key == "id":
                    term = value
                    self.parents.setdefault(term, [])
                elif not term:
                    raise InputError("has a term field before the term's id", file=str(path), line=n, field=key)
                elif key == "name":
                    self.names[term] = value
                elif key == "def":
                    found = re.match(r'"((?:[^"\\]|\\.)*)"', value)
                    self.defs[term] = found.group(1).replace('\\"', '"') if found else value
                elif key == "is_a":
                    parent = value.split("!")[0].split("{")[0].strip()
                    if term.startswith("CL:") and parent.startswith("CL:") and parent != term:
                        self.parents[term].append(parent)

    def named(self, name: str) -> list[str]:
        return [t for t, n in self.names.items() if n == name]

    def paths(self, term: str) -> list[list[str]]:
        """Every path from ``term`` up to a root (breadth first, as the evaluators' ``get_paths_to_roots``)."""
        out, queue = [], deque([[term]])
        while queue:
            path = queue.popleft()
            parents = [p for p in self.parents.get(path[-1], []) if p in self.parents and p not in path]
            if not parents:
                out.append(path)
            queue.extend([*path, p] for p in parents)
        return out

    def chain(self, name: str, *, definitions: bool) -> str:
        """The path chains of the type ``name``, root first: ids and names (cell type annotation), or names and
        definitions with paths alike in their first five nodes given once (captioning)."""
        terms = self.named(name)
        if not terms:
            return f"(no Cell Ontology term is named {name!r})"
        lines = []
        for k, term in enumerate(terms, 1):
            lines.append(f"Term {k}: {term} {name}")
            paths = self.paths(term)
            if definitions:
                paths = [list(p) for p in dict.fromkeys(tuple(p[:5]) for p in paths)]
            for i, path in enumerate(paths, 1):
                lines.append(f"Path {i}:")
                lines += ["  " * j + (f"{self.names.get(t, t)}: {self.defs.get(t, '')}" if definitions
                                      else f"{t} {self.names.get(t, t)}") for j, t in enumerate(reversed(path))]
        return "\n".join(lines)


def _ontology(evaluators: Path | None) -> Ontology | None:
    if evaluators is None:
        return None
    path = evaluators / "cl_nl6.obo"
    if not path.is_file():
        raise InputError("holds no cl_nl6.obo (the Cell Ontology the evaluators read)", file=str(evaluators))
    return Ontology(path)


def _cells(task: str) -> Callable[[str, Any], Rows]:
    def read(file: str, data: Any) -> Rows:
        rows, per_row, evaluators, _ = _joined(file, data, ("cell_type", "cell_sentence"))
        onto = _ontology(evaluators)
        out = []
        for n, (row, responses) in enumerate(zip(rows, per_row), 1):
            chain = onto.chain(str(row["cell_type"]), definitions=task == "captioning") if onto else None
            question = str(row["cell_sentence"]) if task == "captioning" else (
                f"Which cell type is this {row.get('tissue', '')} cell? Its genes by expression: "
                f"{row['cell_sentence']}")
            out.append({"id": f"{n}", "question": question, "reference": str(row["cell_type"]), "context": chain,
                        "task": task, "subset": str(row.get("tissue", "")), "responses": responses})
        return out
    return read


def _markers(evaluators: Path | None) -> dict[str, list[str]]:
    if evaluators is None or not (evaluators / "cell_marker.txt").is_file():
        return {}
    out: dict[str, list[str]] = {}
    path = evaluators / "cell_marker.txt"
    with path.open(encoding="utf-8", newline="") as fh:
        for n, row in enumerate(csv.DictReader(fh, delimiter="\t"), 2):
            if "Specific_Cell_Ontology_ID" not in row or "Cell_Marker" not in row:
                raise InputError("must have the columns Specific_Cell_Ontology_ID and Cell_Marker", file=str(path),
                                 line=n)
            out.setdefault(row["Specific_Cell_Ontology_ID"], []).append(row["Cell_Marker"])
    return out


def _generation(file: str, data: Any) -> Rows:
    """One item per cell type of the data file; each model's answer found by its prompt's ``Cell Type:`` line."""
    if not isinstance(data, dict) or "outputs" not in data:
        raise InputError('must be an object {"data": "cell_sentences_fixed.jsonl", "outputs": {model: --out file}} '
                         "(the generation evaluator's answers follow its set of cell types)", file=file)
    base = Path(file).parent
    rows, evaluators = _joined_rows(file, data)
    onto, markers = _ontology(evaluators), _markers(evaluators)
    types = list(dict.fromkeys(str(r["cell_type"]) for r in rows))
    answers: dict[str, list[dict[str, Any]]] = {t: [] for t in types}
    for model, got in _outputs(data, base, file).items():
        for prompt, text, n in got:
            found = re.search(r"Cell Type:\s*(.+)", prompt)
            if found is None or found.group(1).strip() not in answers:
                raise InputError("names no cell type of the data file in its prompt ('Cell Type: ...')",
                                 file=str(base / data["outputs"][model]), line=n, field="prompt")
            answers[found.group(1).strip()].append({"id": model, "system": model, "text": text})
    out = []
    for k, cell_type in enumerate(types, 1):
        sentences = [str(r["cell_sentence"]) for r in rows if str(r["cell_type"]) == cell_type][:3]
        terms = onto.named(cell_type) if onto else []
        context = [f"Description: {onto.defs.get(terms[0], '')}"] if onto and terms else []
        if terms:
            context.append(f"Known marker genes: {','.join(markers.get(terms[0], [])) or '(none found)'}")
        out.append({"id": f"type{k}", "question": cell_type, "task": "generation",
                    "context": "\n".join(context) or None,
                    "reference": ", ".join(f"cell{i}: {s}" for i, s in enumerate(sentences, 1)),
                    "responses": answers[cell_type]})
    return out


def _joined_rows(file: str, data: dict[str, Any]) -> tuple[Rows, Path | None]:
    """The data rows of an object's ``data`` file (generation: the answers are joined by type) and its
    ``evaluators`` folder."""
    base = Path(file).parent
    where = _file(base, data.get("data"), file, "data")
    rows = load_json_or_lines(where)
    if not isinstance(rows, list):
        raise InputError("must be SC-Arena's data file: rows of JSON lines or a JSON array", file=str(where))
    rows = [need(r, ("cell_type", "cell_sentence"), str(where), n, DATA_FILE) for n, r in enumerate(rows, 1)]
    ev = _file(base, data["evaluators"], file, "evaluators") if data.get("evaluators") else None
    return rows, ev


def _knowledge(evaluators: Path | None) -> Callable[[list[str]], str] | None:
    """Perturbation's reference knowledge of the perturbed genes: the NCBI (and UniProt) summaries and the direct
    GO labels of each, from the files beside its evaluator; ``None`` without the folder."""
    if evaluators is None:
        return None
    summaries = [json.loads((evaluators / name).read_text(encoding="utf-8")) if (evaluators / name).is_file() else {}
                 for name in ("NCBI_summary_of_genes.json", "NCBI_UniProt_summary_of_genes.json")]
    go: dict[str, dict[str, list[str]]] = {}
    for part in "CPF":
        path = evaluators / f"gene_ontology_{part}.csv"
        if path.is_file():
            with path.open(encoding="utf-8", newline="") as fh:
                for row in csv.DictReader(fh):
                    labels = go.setdefault(part, {}).setdefault(str(row.get("gene")), [])
                    label = row.get("direct_class_label")
                    if label and label not in labels:
                        labels.append(label)

    def know(genes: list[str]) -> str:
        lines = []
        for gene in genes:
            lines.append(f"Gene {gene}: NCBI summary: {summaries[0].get(gene, '(none found)')}; NCBI and UniProt "
                         f"summary: {summaries[1].get(gene, '(none found)')}")
            lines += [f"  GO {name}: {', '.join(go.get(part, {}).get(gene, [])) or '(none found)'}"
                      for part, name in (("C", "cellular component"), ("P", "biological process"),
                                         ("F", "molecular function"))]
        return "\n".join(lines)
    return know


def _perturbation(file: str, data: Any) -> Rows:
    keys = ("condition", "up_genes", "down_genes", "ctrl_sentence", "pert_sentence")
    rows, per_row, evaluators, where = _joined(file, data, keys)
    know = _knowledge(evaluators)
    out = []
    for n, (row, responses) in enumerate(zip(rows, per_row), 1):
        for key in ("up_genes", "down_genes"):
            if not isinstance(row[key], list):
                raise InputError("must be a list of genes", file=where, line=n, field=key)
        genes = [g for g in str(row["condition"]).split("+") if g.lower() != "ctrl"]
        how = (f"CRISPRi knockdown of {genes[0]} (with a non-targeting control guide)" if "ctrl" in
               str(row["condition"]).split("+") else f"simultaneous CRISPRi knockdown of {' and '.join(genes)}")
        out.append({"id": str(row.get("perturbation", n)), "task": "perturbation",
                    "question": f"Unperturbed cell sentence: {row['ctrl_sentence']}\nPerturbation: {how}",
                    "reference": f"perturbed cell sentence: {row['pert_sentence']}\nup-regulated genes: "
                                 f"{', '.join(map(str, row['up_genes']))}\ndown-regulated genes: "
                                 f"{', '.join(map(str, row['down_genes']))}",
                    "context": know(genes) if know else None, "subset": str(row.get("cell_type", "")),
                    "responses": responses})
    return out


def _task(task: str, reader: Callable[[str, Any], Rows]) -> Callable[[str, Any], Rows]:
    """``reader``, refusing an object that names another task (a cell file read as the wrong task)."""
    def read(file: str, data: Any) -> Rows:
        if isinstance(data, dict) and "task" in data and data["task"] != task:
            raise InputError(f"names the task {data['task']!r}, but the file is read as {task} (--format "
                             f"sc-arena-{task}): name the task the outputs answer", file=file, field="task")
        return reader(file, data)
    return read


SC_ARENA_READERS: dict[str, Callable[[str, Any], Rows]] = {
    f"sc-arena-{task}": _task(task, reader) for task, reader in (
        ("celltype", _cells("celltype")), ("captioning", _cells("captioning")), ("generation", _generation),
        ("perturbation", _perturbation))}


def looks_like_sc_arena(data: Any, fmt: str) -> bool:
    """Whether ``data`` looks like the format ``fmt``: an object naming its task (``"task": "celltype"``) and its
    files, or the data file's rows with answers added (perturbation's keys; cell rows name no task of their own:
    celltype and captioning share the file, so name ``--format`` or the object's ``task``)."""
    if isinstance(data, dict):
        return {"data", "outputs"} <= data.keys() and data.get("task") == fmt.removeprefix("sc-arena-")
    first = data[0] if isinstance(data, list) and data else None
    return fmt == "sc-arena-perturbation" and isinstance(first, dict) and {"ctrl_sentence", "pert_sentence"} <= \
        first.keys()
