"""What deploy, rollback and history print for people."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fleet.deploy import DeployResult
from fleet.releases import Release

_COLOURS = {"ok": "green", "unchanged": "green", "rolled_back": "yellow", "failed": "bold red", "dry-run": "cyan"}


def render(result: DeployResult, console: Console) -> None:
    colour = _COLOURS.get(result.status, "white")
    console.print(f"[bold]{result.host}[/]: [{colour}]{result.status}[/]"
                  + (f", release {result.release}" if result.release else "")
                  + (f", rung {result.config.get('rung')}" if result.config.get("rung") else ""))
    if result.diff is not None:
        console.print(result.diff or "(no differences)", markup=False, highlight=False, soft_wrap=True)
    if result.attempts:
        table = Table(title=f"{result.host}: attempts")
        for col in ("rung", "outcome", "evidence", "seconds"):
            table.add_column(col, overflow="fold")
        for a in result.attempts:
            style = "green" if a.outcome == "READY" else ("dim" if a.outcome == "PREFLIGHT" else "red")
            table.add_row(a.rung, f"[{style}]{a.outcome}[/]", a.evidence, f"{a.seconds:.1f}")
        console.print(table)
    if result.error:
        console.print(f"[red]{result.error}[/]")


def render_history(host: str, releases: list[Release], current: str | None, console: Console) -> None:
    table = Table(title=f"{host}: releases (newest last)")
    for col in ("release", "", "status", "playbook", "rung", "attempts", "created"):
        table.add_column(col)
    for r in releases:
        outcomes = ", ".join(f"{a['rung']}:{a['outcome']}" for a in r.attempts)
        table.add_row(r.id, "current" if r.id == current else "", r.status, r.playbook, r.rung or "-",
                      outcomes, r.created)
    console.print(table)
