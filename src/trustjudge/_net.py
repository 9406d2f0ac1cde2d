"""Network addresses: the one loopback check (the service's bind address, a plain-HTTP judge's server)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine (``localhost`` or a loopback address; a host
    name is not: it may resolve to a public address)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
