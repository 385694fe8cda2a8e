"""`inv audit`: which architecture gates in the installed packages still exclude a host's SM."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fleet import archgate, parallel, patchsets
from fleet.cli import print_json
from fleet.connect import ConnectOptions, open_connection
from fleet.errors import EXIT_HOST_FAILED, EXIT_OK
from fleet.inventory import Host


def run(hosts: Sequence[Host], opts: ConnectOptions, packages: list[str], sm: int | None, sets: list[str],
        full: bool, as_json: bool, console: Console) -> int:
    """Exit 0: nothing excludes the SM; 1: gates remain (or a host failed)."""
    loaded = patchsets.load_sets(sets) if sets else None  # unknown set names fail here, before any host

    def one(host: Host) -> archgate.AuditResult:
        conn = open_connection(host, opts)
        try:
            return archgate.audit_host(conn, host, sm=sm, packages=packages or None, sets=loaded, full=full)
        finally:
            conn.close()

    outcomes = parallel.run_all(hosts, one)
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
    return EXIT_OK if all(not o.value.excluding for o in outcomes) else EXIT_HOST_FAILED
