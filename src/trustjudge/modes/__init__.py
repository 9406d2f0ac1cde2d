"""The judging modes: the registry, what every mode shares, and one file per mode.

Layout: ``_registry`` (:class:`Mode`, :func:`register_mode`, :func:`get_mode`, :data:`MODES`, entry points),
``_base`` (:class:`Task` and what tasks share), ``_prompts`` (templates, scales, label sets), ``_records``
(the record types), ``_audits`` (the modes' audits); every other module here is one mode, defining ``MODE``
(a :class:`Mode`) and ``POSITION`` (its place among the built-in modes). Importing this package registers
each such file, in ``POSITION`` order, so a new built-in mode is one file here plus its template and test.

Code outside this package reaches a mode through the registry (``get_mode(name)``, ``Judge.task(name)``),
never by importing its file (``tests/test_structure.py`` checks it).
"""

from __future__ import annotations

import importlib
import pkgutil

from ._registry import MODES, Mode, get_mode, register_builtin, register_mode, unregister_mode

__all__ = ["MODES", "Mode", "get_mode", "register_mode", "unregister_mode"]


def _mode_files() -> list[str]:
    """The package's mode modules (every module not starting with ``_``), in ``POSITION`` order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            found.append((getattr(module, "POSITION", 1000), info.name, module))
    for _, name, module in sorted(found, key=lambda t: (t[0], t[1])):
        mode = getattr(module, "MODE", None)
        if not isinstance(mode, Mode):
            raise TypeError(f"trustjudge.modes.{name} defines no MODE (a trustjudge Mode)")
        register_builtin(mode)
    return [name for _, name, _ in found]


_mode_files()
