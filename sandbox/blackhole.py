"""Blackhole routes, so a slip that bypasses the guard fails here instead of leaving the machine: for every sandbox
range (always; a bridge that is up has its more specific /24, so only a fleet that is down is cut off) and, for the
tests and CI, every address in the real inventory.

usage: python -m sandbox.blackhole [inventory/hosts.yaml ...]  (default: the shipped example and the site's own)
       python -m sandbox.blackhole --sandbox-ranges             (only the sandbox ranges: bootstrap.sh, sandbox.up)
"""

from __future__ import annotations

import ipaddress
import subprocess
import sys
from pathlib import Path

import yaml

from sandbox.config import REPO, SANDBOX_SUPERNET


def addresses(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        doc = yaml.safe_load(path.read_text()) or {}
        for entry in (doc.get("hosts") or {}).values():
            try:
                found.append(str(ipaddress.ip_address(entry.get("address", ""))))
            except ValueError:
                continue  # a DNS name: the guard refuses it unless it resolves into the sandbox
    return sorted(set(found))


def sandbox_ranges() -> list[str]:
    """Every sandbox range blackholed (idempotent); it stays when the fleets go down."""
    ranges = [str(SANDBOX_SUPERNET)]
    for r in ranges:
        subprocess.run(["ip", "route", "replace", "blackhole", r], check=True)
    return ranges


def install(paths: list[Path] | None = None) -> list[str]:
    shipped = [REPO / "inventory" / name for name in ("hosts.example.yaml", "hosts.yaml")]
    addrs = addresses(paths or [p for p in shipped if p.is_file()])
    for a in addrs:
        prefix = "32" if ":" not in a else "128"
        subprocess.run(["ip", "route", "replace", "blackhole", f"{a}/{prefix}"], check=True)
    return sandbox_ranges() + addrs


if __name__ == "__main__":
    if sys.argv[1:] == ["--sandbox-ranges"]:
        done = sandbox_ranges()
    else:
        done = install([Path(p) for p in sys.argv[1:]] or None)
    print("blackholed:", " ".join(done) or "nothing")
