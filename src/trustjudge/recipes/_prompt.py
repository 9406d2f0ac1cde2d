"""A benchmark's own judge prompt, read from the user's checkout of the benchmark's repository.

No benchmark's text ships with this package. A recipe names the file of the benchmark's repository that holds
the prompt and the sha256 of that file as the recipe was written for it::

    [benchmark_prompt]
    kind = "check"                       # the template it replaces: pointwise, check, ... or a claims stage (match)
    file = "system_prompts.py"           # inside the checkout (--benchmark-dir)
    constant = "LLM_JUDGE_PROMPT"        # optional: a string constant of that Python file (read, never run);
                                         # NAME.KEY: the string under KEY of the dict literal NAME
    key = "python.judge_instruct"        # or, for a JSON file: the string at this dotted path of its object
    function = "Grader.prompt"           # or: the (f-)string a function or method returns, or assigns to
    variable = "message"                 # ... this name; its {expressions} are the placeholders
    values = { "self.tolerance * 100" = "1.0" }   # an expression's fixed value (the code's default)
    percent = ["reference", "context"]   # a %-formatted string: the field of each %s, in order
    sha256 = "a67f..."                   # the file's, at the commit below
    commit = "208bac..."
    placeholders = { puzzle_solution = "reference" }   # the text's own {name} -> this package's field
    layout = "${benchmark_prompt}\\n\\nQuestion: ${question}\\n..."   # how the benchmark lays out the rest

:func:`load_benchmark_prompt` reads the file (inside the checkout, links followed), checks its hash (a changed
file is refused unless ``allow_changed``, then said in the record) and builds the template text: the
benchmark's text with its ``{name}`` placeholders mapped (``$`` escaped), put into ``layout``. An f-string
inside a function (``function``) is read from its parts: every ``{expression}`` must be mapped to a field
(``placeholders``) or given a value (``values``), else the file is refused naming the expressions left.
:func:`~trustjudge.recipes._recipe.with_benchmark_prompt` gives the recipe judging with it; the records
say which prompt judged.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError

__all__ = ["BenchmarkPrompt", "load_benchmark_prompt", "parse_benchmark_prompt"]

FIELDS = {"kind", "file", "constant", "key", "function", "variable", "values", "sha256", "commit", "placeholders",
          "layout", "note", "percent"}
KINDS = ("pointwise", "pairwise", "criterion", "check", "criterion_pair", "match", "verify", "extract")
STAGES = ("match", "verify", "extract")
TARGETS = {"question", "response", "reference", "context", "check", "criterion", "gold", "claim", "response_a",
           "response_b", "scale_min", "scale_max", "task"}
"""The fields a benchmark placeholder may map to (this package's template fields)."""


def parse_benchmark_prompt(raw: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """The recipe's ``[benchmark_prompt]`` table, checked (empty: the recipe knows no benchmark prompt)."""
    file = str(path)
    if not raw:
        return {}
    for key in raw:
        if key not in FIELDS:
            raise InputError(f"is not a benchmark_prompt field (known: {', '.join(sorted(FIELDS))})", file=file,
                             field=f"benchmark_prompt.{key}")
    for key in ("kind", "file", "sha256", "layout"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise InputError("is missing" if key not in raw else "must be a non-empty string", file=file,
                             field=f"benchmark_prompt.{key}")
    if raw["kind"] not in KINDS:
        raise InputError(f"must be one of {', '.join(KINDS)}", file=file, field="benchmark_prompt.kind")
    if not re.fullmatch(r"[0-9a-f]{64}", raw["sha256"]):
        raise InputError("must be a sha256 in hex (64 digits)", file=file, field="benchmark_prompt.sha256")
    if Path(raw["file"]).is_absolute() or ".." in Path(raw["file"]).parts:
        raise InputError("must be a path inside the benchmark's repository (relative, no '..')", file=file,
                         field="benchmark_prompt.file")
    if "${benchmark_prompt}" not in raw["layout"]:
        raise InputError("must place the benchmark's text with ${benchmark_prompt}", file=file,
                         field="benchmark_prompt.layout")
    placeholders = raw.get("placeholders", {})
    if not isinstance(placeholders, dict) or not all(isinstance(v, str) and v in TARGETS
                                                     for v in placeholders.values()):
        raise InputError(f"must map the text's {{name}} placeholders to fields among {', '.join(sorted(TARGETS))}",
                         file=file, field="benchmark_prompt.placeholders")
    for key in ("constant", "key", "function", "variable", "commit", "note"):
        if key in raw and not isinstance(raw[key], str):
            raise InputError("must be a string", file=file, field=f"benchmark_prompt.{key}")
    given = [k for k in ("constant", "key", "function") if k in raw]
    if len(given) > 1:
        raise InputError(f"and benchmark_prompt.{given[1]} exclude each other: the text is a Python constant, a "
                         "JSON file's string or a function's string", file=file, field=f"benchmark_prompt.{given[0]}")
    if "variable" in raw and "function" not in raw:
        raise InputError("needs benchmark_prompt.function (the function that assigns it)", file=file,
                         field="benchmark_prompt.variable")
    percent = raw.get("percent", [])
    if not isinstance(percent, list) or not all(isinstance(v, str) and v in TARGETS for v in percent):
        raise InputError(f"must list the field of each %s of the text, in order, among {', '.join(sorted(TARGETS))}",
                         file=file, field="benchmark_prompt.percent")
    values = raw.get("values", {})
    if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
        raise InputError("must map expressions of the text to their fixed values (strings)", file=file,
                         field="benchmark_prompt.values")
    return dict(raw)


@dataclass(frozen=True)
class BenchmarkPrompt:
    """A benchmark's prompt as read from a checkout: the template text built from it and where it came from."""

    kind: str
    text: str
    file: Path
    sha256: str
    expected: str
    commit: str = ""

    @property
    def changed(self) -> bool:
        return self.sha256 != self.expected

    def describe(self) -> dict[str, Any]:
        return {"source": "benchmark", "file": str(self.file), "sha256": self.sha256,
                "recipe_sha256": self.expected, "matches_recipe": not self.changed,
                **({"commit": self.commit} if self.commit else {})}


def _constant(source: str, name: str, file: str) -> str:
    """The string assigned to ``name`` at the top level of a Python file (read with ``ast``: nothing runs)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise InputError(f"is not Python that can be read for the constant {name}: {exc.msg}", file=file,
                         line=exc.lineno) from None
    top, _, key = name.partition(".")
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        if any(isinstance(t, ast.Name) and t.id == top for t in targets):
            if key and isinstance(value, ast.Dict):  # NAME.KEY: the string under KEY of a dict literal
                for k, v in zip(value.keys, value.values):
                    if isinstance(k, ast.Constant) and k.value == key:
                        value = v
                        break
                else:
                    raise InputError(f"{top} has no key {key!r}", file=file, line=node.lineno)
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value
            raise InputError(f"assigns {name} something other than a plain string", file=file, line=node.lineno)
    raise InputError(f"has no top-level string constant {name}", file=file)


def _json_string(source: str, path: str, file: str) -> str:
    """The string at the dotted ``path`` of a JSON file's object (``python.judge_instruct_task``)."""
    try:
        value: Any = json.loads(source)
    except json.JSONDecodeError as exc:
        raise InputError(f"is not JSON that can be read for the key {path}: {exc.msg}", file=file,
                         line=exc.lineno) from None
    walked = []
    for part in path.split("."):
        walked.append(part)
        if not isinstance(value, dict) or part not in value:
            raise InputError(f"has no key {'.'.join(walked)} (benchmark_prompt.key)", file=file)
        value = value[part]
    if not isinstance(value, str):
        raise InputError(f"holds {type(value).__name__} at {path}, not a string (benchmark_prompt.key)", file=file)
    return value


def _function_string(source: str, name: str, variable: str | None, file: str) -> ast.expr:
    """The string (or f-string) node that function ``name`` (``Class.method`` for a method) returns, or
    assigns to ``variable``: read with ``ast``, nothing runs."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise InputError(f"is not Python that can be read for the function {name}: {exc.msg}", file=file,
                         line=exc.lineno) from None
    scope: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for part in name.split("."):
        node = next((n for n in scope if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name == part), None)
        if node is None:
            raise InputError(f"has no function {name} (no {part!r})", file=file)
        scope = node.body
    want = "returns" if variable is None else f"assigns to {variable}"
    for n in ast.walk(node) if node is not None else ():
        returned = variable is None and isinstance(n, ast.Return)
        assigned = variable is not None and isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == variable for t in n.targets)
        value = getattr(n, "value", None) if returned or assigned else None
        if isinstance(value, ast.JoinedStr) or (isinstance(value, ast.Constant) and isinstance(value.value, str)):
            return value
    raise InputError(f"function {name} {want} no string or f-string", file=file)


def _fstring_text(node: ast.expr, placeholders: Mapping[str, str], values: Mapping[str, str], file: str) -> str:
    """An f-string's text as template text: its literal parts dedented with ``$`` escaped, each
    ``{expression}`` (as ``ast.unparse`` writes it) a ``${field}`` or its fixed value."""
    parts = node.values if isinstance(node, ast.JoinedStr) else [node]
    exprs: list[str] = []
    raw = []
    for p in parts:
        if isinstance(p, ast.Constant) and isinstance(p.value, str):
            raw.append(p.value)
        elif isinstance(p, ast.FormattedValue):
            raw.append(f"\x00{len(exprs)}\x00")
            exprs.append(ast.unparse(p.value))
    unmapped = sorted({e for e in exprs if e not in placeholders and e not in values})
    if unmapped:
        raise InputError("the text's expression(s) " + ", ".join("{" + e + "}" for e in unmapped) + " are neither "
                         "mapped (benchmark_prompt.placeholders) nor given a value (benchmark_prompt.values)",
                         file=file, line=node.lineno)
    out = inspect.cleandoc("".join(raw)).replace("$", "$$")
    for i, e in enumerate(exprs):
        out = out.replace(f"\x00{i}\x00", "${" + placeholders[e] + "}" if e in placeholders
                          else values[e].replace("$", "$$"))
    return out


def _mapped(text: str, placeholders: Mapping[str, str]) -> str:
    """The benchmark's text as template text: ``$`` escaped, each mapped ``{name}`` (``str.format`` style)
    replaced by ``${field}``; ``{{``/``}}`` unescaped where the text was a format string."""
    out = text.replace("$", "$$")
    for name, target in placeholders.items():
        out = out.replace("{" + name + "}", "${" + target + "}")
    if placeholders:
        out = out.replace("{{", "{").replace("}}", "}")
    return out


def _percent(body: str, fields: list[str], file: str) -> str:
    """A %-formatted text (``"...%s..." % (a, b)``) as template text: each ``%s`` in order the field named in
    ``fields``, ``%%`` a percent sign; refused where the counts differ."""
    pieces = re.split(r"(%%|%s)", body)
    found = sum(piece == "%s" for piece in pieces)
    if found != len(fields):
        raise InputError(f"has {found} %s in the benchmark's text, but benchmark_prompt.percent names {len(fields)} "
                         "field(s)", file=file)
    names = iter(fields)
    return "".join("%" if piece == "%%" else "${" + next(names) + "}" if piece == "%s" else piece for piece in pieces)


def load_benchmark_prompt(recipe: Any, benchmark_dir: str | Path, *, allow_changed: bool = False,
                          rubric: str | None = None, group: str | None = None) -> BenchmarkPrompt:
    """The benchmark prompt of ``recipe`` (a :class:`~trustjudge.recipes.Recipe`) read from ``benchmark_dir`` (a
    checkout of the benchmark's repository); ``rubric``: the benchmark's prompt for the items whose rubric field
    has that value (``[rubrics.benchmark.VALUE]``), not the recipe's ``[benchmark_prompt]``.

    Raises InputError: the recipe names no benchmark prompt, the file is missing or outside the checkout, or
    its sha256 is not the recipe's (unless ``allow_changed``: then it is used and said as changed). ``group``: the
    benchmark's prompt of the items of that group (``[groups.NAME.benchmark]``)."""
    spec: Mapping[str, Any] = recipe.benchmark_prompt if rubric is None else recipe.rubric_benchmark.get(rubric, {})
    if group is not None:
        spec, rubric = recipe.groups.get(group, {}).get("benchmark") or {}, None
        if not spec:
            raise InputError(f"recipe {recipe.name!r} names no benchmark prompt for the group {group!r}",
                             file=str(recipe.path) if recipe.path else None, field=f"groups.{group}.benchmark")
    if rubric is not None and not spec:
        raise InputError(f"recipe {recipe.name!r} names no benchmark prompt for the rubric {rubric!r}",
                         file=str(recipe.path) if recipe.path else None, field=f"rubrics.benchmark.{rubric}")
    if not spec:
        raise InputError(f"recipe {recipe.name!r} names no benchmark prompt file ([benchmark_prompt]): its README "
                         "says why", file=str(recipe.path) if recipe.path else None, field="benchmark_prompt")
    root = Path(benchmark_dir).resolve()
    if not root.is_dir():
        raise InputError("is not a folder (a checkout of the benchmark's repository)", file=str(benchmark_dir))
    path = (root / spec["file"]).resolve()
    if not path.is_relative_to(root):
        raise InputError(f"{spec['file']} resolves outside the checkout ({path})", file=str(benchmark_dir))
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the benchmark's prompt file: {exc.strerror or exc} (is --benchmark-dir the "
                         f"root of the benchmark's repository?)", file=str(path)) from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec["sha256"] and not allow_changed:
        at = f" at commit {spec['commit']}" if spec.get("commit") else ""
        of = f" (its group {group!r})" if group is not None else "" if rubric is None else f" (its rubric {rubric!r})"
        raise InputError(f"has sha256 {digest}, not {spec['sha256']}: the file is not the one recipe "
                         f"{recipe.name!r} was written for{at}{of}. Check out that commit, or pass "
                         "--allow-changed-prompt to judge with it anyway (the records then say it changed)",
                         file=str(path))
    try:
        source = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"invalid UTF-8 at byte {exc.start}", file=str(path)) from None
    placeholders, values = spec.get("placeholders") or {}, spec.get("values") or {}
    if spec.get("function"):
        node = _function_string(source, spec["function"], spec.get("variable"), str(path))
        body = _fstring_text(node, placeholders, values, str(path))
    else:
        text = (_constant(source, spec["constant"], str(path)) if spec.get("constant") else
                _json_string(source, spec["key"], str(path)) if spec.get("key") else source)
        body = _mapped(text.strip(), placeholders)
        for expr, value in values.items():
            body = body.replace("{" + expr + "}", value.replace("$", "$$"))
    if spec.get("percent"):
        body = _percent(body, list(spec["percent"]), str(path))
    template = spec["layout"].replace("${benchmark_prompt}", body)
    return BenchmarkPrompt(spec["kind"], template, path, digest, spec["sha256"], spec.get("commit", ""))
