"""The reader of VisPlotBench's results file (``--format visplotbench`` and ``visplotbench-vis``).

VisPlotBench (TIGER-AI-Lab/VisCoder2, ``VisPlotBench/``) writes, per model and plotting language,
``eval_results/<language>/results_<model>_<language>_<descriptor>_<n>.json``: the pandas DataFrame of the run
written with ``DataFrame.to_json`` (its default layout: ``{column: {row index: value}}``), one row per task with the
dataset's columns (``id``, ``task__plot_description``, ``task__plot_style``, ``plots_gt``: the ground-truth plot
as base64 PNG) and the run's (``model``, ``code``, ``error``: the traceback, empty where the code ran,
``has_plot``, ``plots_generated``: the PNGs the code displayed, base64), and in self-debug mode ``debug_info``:
``{"attempts": {"0": {code, error, has_plot, plots_generated}, ...}}``. A list of row objects or JSON lines in
the same schema is read too.

The benchmark executed the code already: nothing runs here. Each task is an item; its attempts (the first
answer, then the debug attempts in order) are its responses, each with the plots it drew as its images and its
kind (``ok``: no error and a plot; ``no_image``: no error, or the benchmark's "Unexpected Error", and no plot;
``error``) in the item field ``execution``. The question is what the benchmark's task judge is shown
(``gen_task_judge_request``: the plot description, then the plot style; the ``old_task__`` columns where the run
changed the task). ``visplotbench-vis`` is the ground-truth setting (``judge_instruct_vis``): each attempt's
first plot, the ground-truth plot as the item's reference image.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InputError

__all__ = ["VISPLOT_READERS", "looks_like_results", "rows_of"]

SIGNATURE = {"id", "plots_generated", "has_plot", "error"}
"""The columns of a results file that mark it as VisPlotBench's (``python_utils.py`` ``parse_plots_notebook``)."""


def looks_like_results(data: Any) -> bool:
    """Whether ``data`` (a JSON value) is a VisPlotBench results file: its columns, or its first row's keys."""
    if isinstance(data, dict):
        return data.keys() >= SIGNATURE
    first = data[0] if isinstance(data, list) and data else None
    return isinstance(first, dict) and first.keys() >= SIGNATURE


def rows_of(data: Any, file: str) -> list[dict[str, Any]]:
    """The rows of a results file: ``DataFrame.to_json``'s ``{column: {index: value}}`` turned into row objects (in
    the order of the ``id`` column's index), or the rows of a list as they are."""
    if isinstance(data, list):
        return data
    if not isinstance(data, dict) or not isinstance(data.get("id"), dict):
        raise InputError("must be VisPlotBench's results file: pandas' {column: {row: value}} with an 'id' column, "
                         "or a list of rows", file=file, field="id")
    index = list(data["id"])
    for column, values in data.items():
        if not isinstance(values, dict):
            raise InputError(f"must map each row index to a value (DataFrame.to_json), got {type(values).__name__}",
                             file=file, field=str(column))
    return [{column: values.get(i) for column, values in data.items()} for i in index]


def _plots(value: Any, file: str, line: int, field: str) -> list[str]:
    """A ``plots_generated``/``plots_gt`` value (a list of base64 PNGs, or null) as ``data:`` URIs."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InputError("must be a list of base64 PNG images (or null)", file=file, line=line, field=field)
    return ["data:image/png;base64," + "".join(v.split()) for v in value]


def _kind(attempt: dict[str, Any], file: str, line: int, where: str) -> str:
    error = attempt.get("error")
    if error is None:
        error = ""
    if not isinstance(error, str):
        raise InputError("must be the error text (empty where the code ran)", file=file, line=line,
                         field=f"{where}error")
    drew = bool(attempt.get("has_plot")) and bool(attempt.get("plots_generated"))
    if error == "" and drew:
        return "ok"
    return "no_image" if error in ("", "Unexpected Error") and not drew else "error"


def _attempts(row: dict[str, Any], file: str, line: int) -> list[tuple[str, dict[str, Any], str]]:
    """The task's attempts: the first answer, then ``debug_info``'s attempts by number."""
    out = [("initial", row, "")]
    info = row.get("debug_info")
    if info is None:
        return out
    attempts = info.get("attempts") if isinstance(info, dict) else None
    if not isinstance(attempts, dict) or not all(str(k).isdigit() and isinstance(v, dict)
                                                 for k, v in attempts.items()):
        raise InputError('must be {"attempts": {"0": {code, error, has_plot, plots_generated}, ...}}', file=file,
                         line=line, field="debug_info")
    for number in sorted(attempts, key=int):
        out.append((f"debug{number}", attempts[number], f"debug_info.attempts.{number}."))
    return out


def _task_text(row: dict[str, Any], file: str, line: int) -> str:
    parts = []
    for name in ("plot_description", "plot_style"):
        value = row.get(f"old_task__{name}", row.get(f"task__{name}"))
        if value is None:
            raise InputError("is missing (the benchmark's task judge is shown it)", file=file, line=line,
                             field=f"task__{name}")
        parts.append(str(value))
    return "\n".join(parts)


def _read(file: str, data: Any, ground_truth: bool) -> list[dict[str, Any]]:
    out = []
    for line, row in enumerate(rows_of(data, file), 1):
        if not isinstance(row, dict):
            raise InputError(f"must be an object, got {type(row).__name__}", file=file, line=line)
        for key in ("id", "error", "has_plot"):
            if key not in row:
                raise InputError("is missing (the benchmark's results file has it)", file=file, line=line, field=key)
        responses, kinds = [], []
        for rid, attempt, where in _attempts(row, file, line):
            kind = _kind(attempt, file, line, where)
            plots = _plots(attempt.get("plots_generated"), file, line, f"{where}plots_generated") if kind == "ok" \
                else []
            responses.append({"id": rid, "text": "", "images": plots[:1] if ground_truth else plots,
                              **({"system": str(row["model"])} if row.get("model") is not None else {})})
            kinds.append(kind)
        item: dict[str, Any] = {"id": str(row["id"]), "question": _task_text(row, file, line),
                                "responses": responses, "execution": ",".join(kinds)}
        for key in ("used_lib", "data_descriptor"):
            if isinstance(row.get(key), str):
                item[key] = row[key]
        if ground_truth:
            truth = _plots(row.get("plots_gt"), file, line, "plots_gt")
            if not truth:
                raise InputError("holds no ground-truth plot: the ground-truth setting (visplotbench-vis) needs it; "
                                 "read the file as visplotbench for the task setting", file=file, line=line,
                                 field="plots_gt")
            item["reference_images"] = truth[:1]
        out.append(item)
    return out


VISPLOT_READERS: dict[str, Callable[[str, Any], list[dict[str, Any]]]] = {
    "visplotbench": lambda file, data: _read(file, data, False),
    "visplotbench-vis": lambda file, data: _read(file, data, True)}
