"""The sandbox guard: with FLEET_SANDBOX_ONLY=1, fleet talks only to loopback and the sandbox's subnets.

Checked on the address a connection will really use (after ssh_config's HostName) and on every
ProxyJump hop, before any packet is sent to it.
"""

from __future__ import annotations

import ipaddress
import os
import socket

from fleet.errors import GuardError

# sandbox/config.py carves every sandbox fleet's /24 out of this range.
SANDBOX_NETWORKS = (ipaddress.ip_network("172.30.64.0/20"),)


def enabled() -> bool:
    return os.environ.get("FLEET_SANDBOX_ONLY", "") not in ("", "0", "false", "no")


def allowed(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    if addr.is_loopback:
        return True
    return any(addr in net for net in SANDBOX_NETWORKS)


def addresses(hostname: str) -> list[str]:
    """The IPs a host name stands for; a literal is itself (no lookup, no packet)."""
    try:
        return [str(ipaddress.ip_address(hostname))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(hostname, None, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise GuardError(f"{hostname}: cannot resolve ({exc.strerror}); "
                         "FLEET_SANDBOX_ONLY needs a known address") from None
    return sorted({str(info[4][0]) for info in infos})


def pin(hostname: str, role: str) -> str | None:
    """Under FLEET_SANDBOX_ONLY: the one address hostname is connected to, after every address it resolves to
    was judged (GuardError otherwise); None when the guard is off. role says which hop this is."""
    if not enabled():
        return None
    ips = addresses(hostname)
    for ip in ips:
        if not allowed(ip):
            raise GuardError(f"{role} {hostname} ({ip}) refused: FLEET_SANDBOX_ONLY=1 allows only loopback and "
                             f"the sandbox subnets ({', '.join(map(str, SANDBOX_NETWORKS))}); nothing was sent")
    return ips[0]

