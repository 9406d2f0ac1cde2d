"""DataMind's evaluation files (DSGym as vendored in zjunlp/DataMind@4b49ef0, ``datacope/reason_task/eval/DSGym``).

Two of DSGym's outputs carry what its ``equivalence_by_llm`` metric reads (the query, the agent's prediction and the
ground truth), and either is read here:

- the evaluator's ``<run>_results.json`` or ``<run>_summary.json`` (``dsgym/eval/utils.py``
  ``save_evaluation_results``: a JSON array of ``EvaluationResult.to_dict()``, each ``{sample_id, dataset_name,
  query, ground_truth, prediction, success, extra_info, metrics, ...}``);
- the agent's per-sample ``prediction_<i>.json`` (``allocated_code/env.py`` ``save_prediction``: one object
  ``{prediction, ground_truth, query, turns, conversation, extra_info}``), one file as it is, or several as a JSON
  array or JSON lines (``jq -s . prediction_*.json``).

One item per sample; the prediction is the one response (the judge sees the final answer only, as DSGym's does;
the conversation is not judged). An empty prediction is kept as it is: the recipe's rule scores it 0, as DSGym's
aggregate does (an agent with no final answer is unsuccessful, counted 0 over all samples).
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError

__all__ = ["looks_like_dsgym", "read_dsgym"]

KEYS = ("query", "ground_truth", "prediction")


def looks_like_dsgym(data: Any) -> bool:
    """Whether ``data`` is a DSGym results array or prediction file: its (first) row has the three keys."""
    first = data[0] if isinstance(data, list) and data else data
    return isinstance(first, dict) and first.keys() >= set(KEYS)


def _text(row: dict[str, Any], key: str, file: str, line: int) -> str:
    value = row[key]
    if isinstance(value, (dict, list, bool)):
        raise InputError(f"must be a string (DSGym passes it to the judge as text), got {type(value).__name__}",
                         file=file, line=line, field=key)
    return "" if value is None else str(value)


def _sample_id(row: dict[str, Any], line: int) -> str:
    if row.get("sample_id") not in (None, ""):
        return str(row["sample_id"])
    info = row.get("extra_info")
    if not isinstance(info, dict):
        return str(line)
    for key in ("query_id", "id", "index"):
        if info.get(key) not in (None, ""):
            return str(info[key])
    return str(line)


def read_dsgym(file: str, data: Any) -> list[dict[str, Any]]:
    """The items of a DSGym results array or of prediction files (see the module's docstring)."""
    rows = [data] if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise InputError("must be DSGym's <run>_results.json (a JSON array of results) or prediction_<i>.json "
                         f"objects, got {type(data).__name__}", file=file)
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for line, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise InputError(f"must be an object, got {type(row).__name__}", file=file, line=line)
        for key in KEYS:
            if key not in row:
                raise InputError("is missing (DSGym's results and prediction files have it)", file=file, line=line,
                                 field=key)
        truth = _text(row, "ground_truth", file, line)
        if not truth.strip():
            raise InputError("is empty: DSGym gives a sample without ground truth no score (and its run no mean); "
                             "drop the row or give the answer", file=file, line=line, field="ground_truth")
        key = _sample_id(row, line)
        if key in seen:
            raise InputError(f"repeats sample {key!r} of row {seen[key]}", file=file, line=line, field="sample_id")
        seen[key] = line
        item: dict[str, Any] = {"id": key, "question": _text(row, "query", file, line) or "N/A",
                                "reference": truth,
                                "responses": [{"id": "model", "text": _text(row, "prediction", file, line)}]}
        if isinstance(row.get("dataset_name"), str) and row["dataset_name"]:
            item["subset"] = row["dataset_name"]
        if row.get("success") is False:
            item["dsgym_success"] = False
        out.append(item)
    return out
