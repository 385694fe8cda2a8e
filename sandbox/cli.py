"""The sandbox tasks' views: what `inv sandbox.*` prints."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from sandbox.config import config
from sandbox.hosts import Sandbox, SandboxError

console = Console(highlight=False)


def sandbox() -> Sandbox:
    return Sandbox(config(), log=lambda m: console.print(f"[dim]{m}[/]"))


def up(hosts: int, profiles: Sequence[str]) -> None:
    sb = sandbox()
    start = time.monotonic()
    records, changed = sb.up(hosts, profiles)
    took = time.monotonic() - start
    console.print(f"{'up' if changed else 'already up (same arguments): nothing to do'}: {len(records)} hosts"
                  f"{f' ssh-ready in {took:.1f}s' if changed else ''}; inventory {sb.cfg.inventory_path}")
    status()


def status() -> None:
    sb = sandbox()
    rows = sb.status()
    if not rows:
        console.print(f"no sandbox fleet ({sb.cfg.instance}) is up")
        return
    table = Table(title=f"sandbox fleet '{sb.cfg.instance}' on {sb.cfg.bridge} {sb.cfg.subnet}")
    for col in ("host", "address", "profile", "state", "link", "ssh", "pid"):
        table.add_column(col)
    for r in rows:
        colour = "green" if r["state"] == "running" and r["ssh"] else "red"
        table.add_row(r["host"], r["address"], r["profile"], f"[{colour}]{r['state']}[/]", r["link"],
                      "yes" if r["ssh"] else "no", str(r["pid"] or "-"))
    console.print(table)


def down() -> None:
    sb = sandbox()
    n = len(sb.hosts())
    start = time.monotonic()
    sb.down()
    console.print(f"down: {n} hosts stopped and removed in {time.monotonic() - start:.1f}s")


def fault(action: str, host: str) -> None:
    sb = sandbox()
    getattr(sb, action)(host)
    console.print(f"{action} {host}: done")


def require_root() -> None:
    if os.geteuid() != 0:
        raise SandboxError("the sandbox needs root (network namespaces, overlayfs, systemd-nspawn)")
