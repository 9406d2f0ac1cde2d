"""How many threads the in-process judges use: ``TRUSTJUDGE_THREADS``, and the machine's physical cores."""

from __future__ import annotations

import os

from ..errors import ConfigError


def env_threads() -> int | None:
    """``TRUSTJUDGE_THREADS``, the llama.cpp judges' thread count, if set (a positive integer)."""
    raw = os.environ.get("TRUSTJUDGE_THREADS", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"TRUSTJUDGE_THREADS must be a positive integer, got {raw!r}")
    return int(raw)


def physical_cores() -> int:
    """Physical cores among the CPUs this process may run on (SMT siblings counted once), from Linux's
    sysfs topology; where that is unreadable, the usable CPUs."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    cores: set[tuple[str, str]] = set()
    for cpu in cpus:
        topology = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        try:
            with open(f"{topology}/physical_package_id") as pkg, open(f"{topology}/core_id") as core:
                cores.add((pkg.read().strip(), core.read().strip()))
        except OSError:
            return max(1, len(cpus))
    return max(1, len(cores))

