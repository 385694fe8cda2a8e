"""`inv audit`: the tables of which architecture gates in the installed packages still exclude a host's SM."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fleet import archgate
from fleet.cli import print_json
from fleet.connect import ConnectOptions
from fleet.errors import EXIT_HOST_FAILED, EXIT_OK
from fleet.inventory import Host


def run(hosts: Sequence[Host], opts: ConnectOptions, packages: list[str], sm: int | None, sets: list[str],
        full: bool, as_json: bool, console: Console) -> int:
    """Exit 0: nothing excludes the SM; 1: gates remain (or a host failed)."""
    outcomes = archgate.audit_hosts(hosts, opts, packages, sm, sets, full)
    if as_json:
        print_json({"hosts": [o.value.to_json() if o.value else {"host": o.host.name, "error": o.error}
                              for o in outcomes]})
    for o in outcomes if not as_json else []:
        if o.value is None:
            console.print(f"[red]{escape(o.error or '')}[/]", soft_wrap=True)
            continue
        res = o.value
        table = Table(title=f"{res.host}: {len(res.excluding)} of {len(res.gates)} gates exclude SM {res.sm}")
        for col in ("file:line", "kind", "condition", "lifted by"):
            table.add_column(col, overflow="fold")
        for g in res.excluding:
            table.add_row(f"{g.file}:{g.line}", g.kind, escape(g.condition), ", ".join(g.lifted_by) or "[red]-[/]")
        console.print(table)
    if any(not o.ok for o in outcomes):
        return EXIT_HOST_FAILED
    return EXIT_OK if all(o.value is not None and not o.value.excluding for o in outcomes) else EXIT_HOST_FAILED


def render_audit(results: list[archgate.AuditResult], console: Console) -> None:
    for r in results:
        t = Table(title=f"{r.host} (SM{r.sm}): {len(r.excluding)} gate(s) exclude it", title_justify="left")
        for col in ("file:line", "kind", "condition", "lifted by"):
            t.add_column(col, overflow="fold")
        for g in r.excluding:
            t.add_row(f"{g.file}:{g.line}", g.kind, g.condition, ", ".join(g.lifted_by) or "-")
        console.print(t)
