"""The package's shape: no module imports, directly or through others, a module that imports it.

The import graph is read from the source with :mod:`ast` (nothing is imported): every ``import`` and
``from ... import`` statement counts, at module level or inside a function, class or ``if`` block,
with relative imports resolved. A cycle usually means that a definition both modules need lives in
the wrong one: move it into a module below both.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

PACKAGE = "trustjudge"
SRC = Path(__file__).resolve().parents[1] / "src" / PACKAGE


def module_files(root: Path = SRC, package: str = PACKAGE) -> dict[str, Path]:
    """Every module under ``root`` by dotted name (a package by its ``__init__.py``)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _owner(name: str, modules: Mapping[str, Path]) -> str | None:
    """The module that defines ``name``: the longest module name that is ``name`` or a prefix of it."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def imports(path: Path, module: str, modules: Mapping[str, Path]) -> set[str]:
    """The package's modules that an import statement anywhere in ``path`` brings in.

    ``from a import b`` imports the module ``a.b`` when there is one, else the module ``a`` (``b`` is
    a name defined there); ``import a.b.c`` imports the longest of ``a.b.c``, ``a.b``, ``a`` that is a
    module.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
            names += (f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                      for alias in node.names)
    owners = {_owner(name, modules) for name in names}
    return {o for o in owners if o is not None and o != module}


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """``{module: the package's modules it imports}``."""
    return {module: imports(path, module, modules) for module, path in modules.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) through each strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan; the package is small enough for recursion
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_through(graph, component) for component in components]


def _cycle_through(graph: Mapping[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle from the component's first module back to itself, inside the component."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    return [*paths[node], start]
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # pragma: no cover - a component always has one


def test_the_graph_sees_relative_and_function_level_imports(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("from .a import f\n")
    (root / "a.py").write_text("def f():\n    from .sub import b\n    return b\n")
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "b.py").write_text("from .. import a\nfrom ..a import f\nimport os\n")
    (root / "sub" / "c.py").write_text("from . import b\nfrom pkg.sub.b import x\n")
    graph = import_graph(module_files(root, "pkg"))
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.sub.b"}, "pkg.sub": set(), "pkg.sub.b": {"pkg.a"},
                     "pkg.sub.c": {"pkg.sub.b"}}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.a"]]


def test_the_package_has_no_import_cycle() -> None:
    modules = module_files()
    assert f"{PACKAGE}._judge" in modules and f"{PACKAGE}.backends._mock" in modules
    found = cycles(import_graph(modules))
    assert not found, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in found)


# -- layers ----------------------------------------------------------------------------------------------

LAYERS: dict[str, int] = {
    "errors": 0, "_plugins": 0, "_retry": 0, "_net": 0, "_images": 0,  # what every layer may use
    "backends": 1, "io": 1,                            # models; items and files
    "engine": 2,                                       # asking, the store, the maths of label distributions
    "audit": 3,                                        # statistics, consistency, agreement, ranking, calibration
    "execute": 3,                                      # model-written code run in a sandbox
    "modes": 4,                                        # the registry, what modes share, one file per mode
    "report": 5,                                       # HTML drawn from audits
    "_judge": 6, "_config": 6, "_cascade": 6, "_integrations": 6, "_settings": 6,  # the facade over all of the above
    "_mode_methods": 6, "_progress": 6, "_ensemble": 6,  # per-mode conveniences; progress bar; ensemble judging
    "_calibrate": 6,                                   # what Judge's calibration methods do
    "_panel": 6,                                       # the panel estimators' judging
    "mode_api": 6,                                     # the public mode-writing API (names from modes, audit, io)
    "serve": 7, "pytest_plugin": 7, "inspect_scorer": 7, "recipes": 7,  # recipes run a Judge
    "cli": 8,
    "__main__": 9, "": 9,                              # the package's __init__ (the public API)
}
"""The package's layers, bottom up: a module imports only from a lower layer or from its own folder (or, in
layers 0 and 6, another module of that layer)."""
SHARED_LAYERS = {0, 6}


def _group(module: str) -> str:
    parts = module.split(".")[1:]
    return parts[0] if parts else ""


def layer_violations(graph: Mapping[str, set[str]], layers: Mapping[str, int] = LAYERS) -> list[str]:
    """Each import that runs up (or sideways across) a layer, and each import of a mode file from outside
    ``modes/`` (a mode is reached through the registry)."""
    found = []
    for module, deps in sorted(graph.items()):
        group = _group(module)
        for dep in sorted(deps):
            other = _group(dep)
            if other == group:
                continue
            if group not in layers or other not in layers:
                found.append(f"{module} -> {dep}: a folder/module missing from LAYERS")
            elif layers[other] > layers[group] or (layers[other] == layers[group]
                                                    and layers[group] not in SHARED_LAYERS):
                found.append(f"{module} (layer {layers[group]}) -> {dep} (layer {layers[other]})")
            if other == "modes" and dep != f"{PACKAGE}.modes" and not dep.rsplit(".", 1)[-1].startswith("_"):
                found.append(f"{module} -> {dep}: a mode file, outside modes/ (use the registry)")
    return found


def test_the_layer_check_sees_an_upward_import_and_a_mode_file_import() -> None:
    graph = {f"{PACKAGE}.engine._engine": {f"{PACKAGE}.modes._prompts"},
             f"{PACKAGE}.cli._score": {f"{PACKAGE}.modes.score", f"{PACKAGE}.modes._registry"},
             f"{PACKAGE}.modes.score": {f"{PACKAGE}.modes._base", f"{PACKAGE}.engine._engine"},
             f"{PACKAGE}.io._items": {f"{PACKAGE}.backends"}}
    assert layer_violations(graph) == [
        f"{PACKAGE}.cli._score -> {PACKAGE}.modes.score: a mode file, outside modes/ (use the registry)",
        f"{PACKAGE}.engine._engine (layer 2) -> {PACKAGE}.modes._prompts (layer 4)",
        f"{PACKAGE}.io._items (layer 1) -> {PACKAGE}.backends (layer 1)",
    ]


def test_no_import_runs_up_a_layer_and_no_mode_file_is_imported_outside_modes() -> None:
    modules = module_files()
    assert {_group(m) for m in modules} <= set(LAYERS), "a new folder: give it a layer in LAYERS"
    found = layer_violations(import_graph(modules))
    assert not found, "layer rules broken:\n" + "\n".join(found)


def test_engine_and_audit_import_no_mode_at_all() -> None:
    graph = import_graph(module_files())
    found = [f"{m} -> {d}" for m, deps in graph.items() if _group(m) in ("engine", "audit")
             for d in deps if _group(d) == "modes"]
    assert not found, found


# -- one contract for every mode (issue 37) ------------------------------------------------------------------

MODE_NAMES = frozenset({"score", "checklist", "compare", "claims", "criteria", "criteria-compare", "steps"})
NAMED_MODES_LEFT: dict[str, int] = {
    # Files outside modes/ that still compare against a mode's name, with how many such names. The count may only
    # fall: a new file, or a new name in a listed file, fails. When a file reaches 0, remove it from this list.
    # Empty since issue 37: every file outside modes/ asks the Mode (its registry entry) instead.
}


def mode_lists(tree: ast.Module) -> set[str]:
    """The module-level names ``tree`` binds to a closed list of modes: a tuple, list or set (or ``frozenset(...)``
    of one) whose items are all mode names (``PAIRED = ("compare",)``)."""
    found = set()
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.args \
                    and value.func.id in ("frozenset", "set", "tuple"):
                value = value.args[0]
            if isinstance(value, (ast.Tuple, ast.List, ast.Set)) and value.elts and all(
                    isinstance(e, ast.Constant) and e.value in MODE_NAMES for e in value.elts):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found |= {t.id for t in targets if isinstance(t, ast.Name)}
    return found


def mode_names_compared(path: Path, imported_lists: frozenset[str] = frozenset()) -> int:
    """How many mode names ``path`` compares against (``mode == "score"``, ``kind in ("score", ...)``), counting a
    comparison with a closed list of modes (:func:`mode_lists`: defined in ``path``, or one of ``imported_lists``
    imported there) as one."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lists = mode_lists(tree) | {alias.asname or alias.name for node in ast.walk(tree)
                                if isinstance(node, ast.ImportFrom) for alias in node.names
                                if alias.name in imported_lists}
    found = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            found += sum(isinstance(sub, ast.Constant) and sub.value in MODE_NAMES
                         for side in (node.left, *node.comparators) for sub in ast.walk(side))
            found += sum(isinstance(side, ast.Name) and side.id in lists for side in (node.left, *node.comparators))
    return found


def test_the_mode_name_check_sees_a_comparison(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text('def f(mode):\n    return mode == "score" or mode in ("claims", "other")\n')
    (tmp_path / "b.py").write_text('LABEL = "score"\nx = {"score": 1}\nFIELDS = ("criteria", "question")\n'
                                   'def f(k):\n    return k in FIELDS\n')
    (tmp_path / "c.py").write_text('PAIRED = ("compare",)\nLEVELS = frozenset({"score", "criteria"})\n'
                                   'def f(kind):\n    return kind not in PAIRED or kind in LEVELS\n')
    (tmp_path / "d.py").write_text('from .c import LEVELS as L\ndef f(kind):\n    return kind in L\n')
    assert [mode_names_compared(tmp_path / f"{n}.py") for n in "abc"] == [2, 0, 2]
    assert mode_names_compared(tmp_path / "d.py", frozenset({"LEVELS"})) == 1


def test_no_new_code_outside_modes_asks_a_mode_by_its_name() -> None:
    lists = frozenset(name for p in SRC.rglob("*.py") for name in mode_lists(ast.parse(p.read_text(encoding="utf-8"))))
    found = {p.relative_to(SRC).as_posix(): n for p in sorted(SRC.rglob("*.py"))
             if not p.relative_to(SRC).as_posix().startswith("modes/") and (n := mode_names_compared(p, lists))}
    grown = {f: n for f, n in found.items() if n > NAMED_MODES_LEFT.get(f, 0)}
    assert not grown, (f"mode names compared outside modes/ (ask the Mode instead): {grown}; "
                       f"allowed: {NAMED_MODES_LEFT}")


MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
OVERSIZED: dict[str, int] = {
    # Modules over MAX_MODULE_LINES and functions over MAX_FUNCTION_LINES (``file`` or ``file:function``) with
    # their line counts when this check was written; each may only shrink. Left for the lead to split after the
    # parallel branches that edit them are merged (issue 37): do not add to this list. Empty since issue 37.
}


def oversized(root: Path = SRC) -> dict[str, int]:
    """Every module over :data:`MAX_MODULE_LINES` and function over :data:`MAX_FUNCTION_LINES`, with its lines."""
    found: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        if (n := len(text.splitlines())) > MAX_MODULE_LINES:
            found[rel] = n
        for node in ast.walk(ast.parse(text)):
            long = (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None
                    and (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES)
            if long:
                found[f"{rel}:{node.name}"] = n
    return found


def test_the_size_check_sees_a_long_function(tmp_path: Path) -> None:
    (tmp_path / "long.py").write_text("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES)
    assert oversized(tmp_path) == {"long.py:f": MAX_FUNCTION_LINES + 1}


def test_no_module_or_function_grows_past_the_size_limits() -> None:
    grown = {k: n for k, n in oversized().items() if n > OVERSIZED.get(k, 0)}
    assert not grown, f"over {MAX_MODULE_LINES} lines a module or {MAX_FUNCTION_LINES} a function (split it): {grown}"


def test_one_loopback_check() -> None:
    found = [p.relative_to(SRC).as_posix() for p in sorted(SRC.rglob("*.py")) if ".is_loopback" in p.read_text()]
    assert found == ["_net.py"], f"the loopback check is trustjudge._net.is_loopback; also defined in {found}"
