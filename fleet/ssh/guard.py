"""The sandbox guard: with FLEET_SANDBOX_ONLY=1, fleet talks only to loopback and the sandbox's subnets, and to a
sandbox address only while its fleet is up: a bridge of this machine routes it (else, with the fleet down, the
address would follow the default route out of the machine, where anything may answer).

Checked on the address a connection will really use (after ssh_config's HostName) and on every
ProxyJump hop, before any packet is sent to it.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

from fleet.errors import GuardError

# sandbox/config.py carves every sandbox fleet's /24 out of this range.
SANDBOX_NETWORKS = (ipaddress.ip_network("172.30.64.0/20"),)
ROUTES = Path("/proc/net/route")  # the kernel's IPv4 main table: Iface, Destination, ..., Mask (hex, host order)


def enabled() -> bool:
    return os.environ.get("FLEET_SANDBOX_ONLY", "") not in ("", "0", "false", "no")


def allowed(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    if addr.is_loopback:
        return True
    return any(addr in net for net in SANDBOX_NETWORKS)


BRIDGE_PREFIX = "fsbr"  # a sandbox fleet's bridge (sandbox/config.py); a route out of any other device leaves


def route_of(ip: str, table: str) -> tuple[str, ipaddress.IPv4Network] | None:
    """The device and network of the most specific IPv4 route to ip in a /proc/net/route text (device '*': a
    blackhole); None when no route holds it."""
    addr = ipaddress.IPv4Address(ip)
    best: tuple[str, ipaddress.IPv4Network] | None = None
    for line in table.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 8:
            continue
        try:
            dest, mask = (ipaddress.IPv4Address(int.from_bytes(bytes.fromhex(c), "little")) for c in (cols[1], cols[7]))
            net = ipaddress.IPv4Network(f"{dest}/{mask}", strict=False)
        except ValueError:
            continue
        if addr in net and (best is None or net.prefixlen > best[1].prefixlen):
            best = (cols[0], net)
    return best


def why_not_up(ip: str, table: str | None = None) -> str | None:
    """Why a sandbox address is not reachable inside this machine now (None: a bridge routes it); table: a
    /proc/net/route text, else the kernel's."""
    net = next(n for n in SANDBOX_NETWORKS if ipaddress.ip_address(ip) in n)
    try:
        route = route_of(ip, ROUTES.read_text() if table is None else table)
    except OSError as exc:
        return f"cannot read the routes ({ROUTES}: {exc.strerror}) to see that its fleet is up"
    if route is None or not route[0].startswith(BRIDGE_PREFIX) or route[1].prefixlen <= net.prefixlen:
        return "no sandbox fleet is up there (no bridge of this machine routes it: `inv sandbox.up` its instance)"
    return None


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
        if not ipaddress.ip_address(ip).is_loopback and (why := why_not_up(ip)):
            shown = ip if hostname == ip else f"{hostname} ({ip})"
            raise GuardError(f"{role} {shown} refused: FLEET_SANDBOX_ONLY=1 and {why}; nothing was sent")
    return ips[0]

