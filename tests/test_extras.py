"""A missing optional extra is one clear error naming the extra and the install command."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Run in a child process: a blocked import must not leak into the rest of the suite.
_CHILD = """
import sys
sys.modules[{module!r}] = None  # what `import {module}` sees when the package is not installed
from trustjudge.backends import _transformers
"""


@pytest.mark.parametrize("module", ["torch", "transformers"])
def test_transformers_backend_without_the_hf_extra_names_it(module: str) -> None:
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(module=module)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("trustjudge.errors.PrerequisiteError"), proc.stderr[-2000:]
    assert "trustjudge[hf]" in last and "torch==2.13.0" in last and module in last


def test_the_default_install_does_not_pull_torch() -> None:
    """The default judge runs on llama.cpp: torch and transformers are the `hf` extra, not dependencies."""
    from importlib.metadata import requires

    reqs = requires("trustjudge") or []
    core = [r for r in reqs if "extra ==" not in r]
    assert core and not any(r.split(">")[0].split("=")[0].strip() in {"torch", "transformers"} for r in core)
    assert any(r.startswith("torch") and 'extra == "hf"' in r for r in reqs)
