"""Entry-point plug-ins, found the same way for backends and modes (nothing is imported until used)."""

from __future__ import annotations

import os
from collections.abc import Container
from importlib.metadata import EntryPoint, entry_points


def installed(group: str, env: str, taken: Container[str]) -> dict[str, list[EntryPoint]]:
    """The installed plug-ins of ``group`` by name, as the comma-separated names in ``env`` allow (all when
    it is unset); names in ``taken`` (built in or registered) are left out: they never reach a plug-in."""
    allowed = os.environ.get(env)
    pinned = None if allowed is None else {n.strip() for n in allowed.split(",") if n.strip()}
    found: dict[str, list[EntryPoint]] = {}
    for ep in entry_points(group=group):
        if ep.name in taken or (pinned is not None and ep.name not in pinned):
            continue
        if all(other.value != ep.value for other in found.get(ep.name, [])):  # one package seen on two paths
            found.setdefault(ep.name, []).append(ep)
    return found


def describe(ep: EntryPoint, kind: str) -> str:
    """``<kind> 'name' (module:object from dist version)``, for errors that name a plug-in."""
    dist = getattr(ep, "dist", None)
    where = f" from {dist.name} {dist.version}" if dist is not None else ""
    return f"{kind} {ep.name!r} ({ep.value}{where})"
