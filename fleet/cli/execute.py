"""`inv exec`: one command's output on every host, as a table or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.cli import console, fit, print_json, real_console
from fleet.cli.hosttext import escape
from fleet.errors import EXIT_HOST_FAILED, EXIT_OK
from fleet.host import execute
from fleet.inventory import Host
from fleet.parallel import Outcome
from fleet.ssh.connect import ConnectOptions
from fleet.ssh.remote import CommandResult

if TYPE_CHECKING:
    from rich.console import Console


def report(outcomes: list[Outcome[CommandResult]], as_json: bool, wide: bool = False,
           out: Console | None = None) -> int:
    """The host's output is data: escaped before it meets rich, its control characters shown (JSON escapes
    them its own way). Folded within the terminal's width, or with wide each output line whole."""
    failed = [o for o in outcomes if not (o.ok and o.value and o.value.ok)]
    if as_json:
        print_json({"hosts": [
            {"host": o.host.name, "address": o.host.address, "ok": bool(o.ok and o.value and o.value.ok),
             "error": o.error, "exit": o.value.exited if o.value else None,
             "stdout": o.value.stdout if o.value else None, "stderr": o.value.stderr if o.value else None,
             "seconds": round(o.seconds, 3)}
            for o in outcomes]})
    else:
        from rich.table import Table

        table = Table(title=f"{len(outcomes) - len(failed)}/{len(outcomes)} hosts ok")
        for col in ("host", "address", "exit", "output"):
            table.add_column(col, overflow="fold")
        for o in outcomes:
            if o.value is None:
                table.add_row(o.host.name, o.host.address, "-", f"[red]{escape(o.error or '')}[/]")
            else:
                text = escape(o.value.stdout.rstrip()) if not o.value.stderr else (
                    escape(o.value.stdout) + f"[red]{escape(o.value.stderr.rstrip())}[/]")
                table.add_row(o.host.name, o.host.address, str(o.value.exited), text)
        fit.emit(real_console(out or console), table, wide)
    return EXIT_HOST_FAILED if failed else EXIT_OK


def parse_timeout(text: str | float | None) -> float:
    """--timeout as given (exit 2 when it is not a positive number of seconds)."""
    return execute.parse_timeout(text)


def command(hosts: list[Host], cmd: str, opts: ConnectOptions, as_json: bool,
            timeout: float = execute.DEFAULT_TIMEOUT_S, wide: bool = False) -> int:
    return report(execute.run_everywhere(hosts, cmd, opts, timeout), as_json, wide)
