"""Blackhole routes for every address in the real inventory, so a slip that bypasses the guard fails here.

usage: python -m sandbox.blackhole [inventory/hosts.yaml ...]  (default: the shipped example and the site's own)
"""

from __future__ import annotations

import ipaddress
import subprocess
import sys
from pathlib import Path

import yaml

from sandbox.config import REPO


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


def install(paths: list[Path] | None = None) -> list[str]:
    shipped = [REPO / "inventory" / name for name in ("hosts.example.yaml", "hosts.yaml")]
    addrs = addresses(paths or [p for p in shipped if p.is_file()])
    for a in addrs:
        prefix = "32" if ":" not in a else "128"
        subprocess.run(["ip", "route", "replace", "blackhole", f"{a}/{prefix}"], check=True)
    return addrs


if __name__ == "__main__":
    done = install([Path(p) for p in sys.argv[1:]] or None)
    print("blackholed:", " ".join(done) or "nothing")
