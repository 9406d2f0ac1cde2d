"""Where ``trustjudge report`` lived: it is :mod:`trustjudge.cli._report` now (kept for older imports)."""

from .cli._report import report as command

__all__ = ["command"]
