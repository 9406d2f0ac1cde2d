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


def disabled(group: str, env: str, taken: Container[str]) -> dict[str, list[EntryPoint]]:
    """The installed plug-ins of ``group`` that ``env`` leaves out (none when it is unset), by name: so that a
    name asked for can be said to be disabled rather than unknown."""
    if os.environ.get(env) is None:
        return {}
    allowed = installed(group, env, taken)
    found: dict[str, list[EntryPoint]] = {}
    for ep in entry_points(group=group):
        if ep.name not in taken and ep.name not in allowed:
            found.setdefault(ep.name, []).append(ep)
    return found


def disabled_message(ep: EntryPoint, kind: str, env: str) -> str:
    """Why a plug-in that is installed cannot be used: ``env`` does not list it."""
    return (f"{describe(ep, kind)} is installed but disabled: {env}={os.environ.get(env, '')!r} does not list "
            f"{ep.name!r} (add it to the comma-separated list, or unset {env} to allow every plug-in)")


def describe(ep: EntryPoint, kind: str) -> str:
    """``<kind> 'name' (module:object from dist version)``, for errors that name a plug-in."""
    dist = getattr(ep, "dist", None)
    where = f" from {dist.name} {dist.version}" if dist is not None else ""
    return f"{kind} {ep.name!r} ({ep.value}{where})"
