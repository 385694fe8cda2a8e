"""`inv status`: the board, one row per host (and `--watch`, refreshed in place until Ctrl-C)."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from fleet.cli import print_json
from fleet.connect import ConnectOptions
from fleet.errors import EXIT_HOST_FAILED, EXIT_OK
from fleet.inventory import Host
from fleet.status import HostStatus, collect
from fleet.status_watch import Poller, check_interval


def render(rows: list[HostStatus], console: Console) -> None:
    console.print(table_of(rows))


def router_cell(router: dict[str, Any] | None) -> str:
    """The router column: its unit's state, its /health, how many workers its release names."""
    if not router:
        return "-"
    state, health = router.get("state") or "?", router.get("health")
    colour = "green" if state == "active" and health == 200 else "red"
    return (f"[{colour}]{escape(str(state))}, health {health or 'no answer'}[/], "
            f"{router.get('workers', 0)} workers ({escape(str(router.get('release') or '-'))})")


def table_of(rows: list[HostStatus], title: str = "fleet status") -> Table:
    table = Table(title=title)
    routers = any(r.router for r in rows)  # a column only where a router: playbook put one
    columns = ["host", "GPUs", "unit", "release", "rung", "health", "reqs run/queue", "gen tok/s", "bench tok/s",
               "power", "last failure", "drift", *(["router"] if routers else [])]
    for col in columns:
        table.add_column(col, overflow="fold")
    for r in rows:
        if not r.ok:
            table.add_row(r.host, "-", "[red]unreachable[/]", *["-"] * (len(columns) - 3))
            continue
        state = r.unit.get("ActiveState", "?")
        colour = {"active": "green", "failed": "red"}.get(state, "yellow")
        health = "[green]ok[/]" if r.health == "200" else f"[red]{r.health or 'no answer'}[/]"
        power = (f"{r.power_w:.0f}/{r.power_limit_w:.0f} W" if r.power_w is not None and r.power_limit_w
                 else "-")
        m = r.metrics
        reqs = (f"{m.get('sglang:num_running_reqs', 0):.0f}/{m.get('sglang:num_queue_reqs', 0):.0f}"
                if m else "-")
        gen = f"{m['sglang:gen_throughput']:,.0f}" if "sglang:gen_throughput" in m else "-"
        table.add_row(r.host, str(r.gpus), f"[{colour}]{state}[/] ({r.unit.get('SubState', '?')})",
                      r.release or "-", r.rung or "-", health, reqs, gen,
                      f"{r.bench_tok_s:,.0f}" if r.bench_tok_s else "-", power, r.interrupted or r.last_failure or "-",
                      "[red]" + escape(", ".join(r.drift)) + "[/]" if r.drift else "none",
                      *([router_cell(r.router)] if routers else []))
    # Whole sentences (host, what was expected, what happened, what to try) read better under the table.
    errors = [f"[red]{escape(r.error)}[/]" for r in rows if not r.ok and r.error]
    if errors:
        table.caption, table.caption_justify = "\n".join(errors), "left"
    return table


def watch(hosts: Sequence[Host], opts: ConnectOptions, port: int, interval: float, as_json: bool,
          console: Console, stop: threading.Event | None = None) -> int:
    """Refresh until Ctrl-C (exit 130, like `inv logs -f`), the reader of --json going away, or `stop`."""
    out = threading.Lock()

    def print_row(row: HostStatus) -> bool:
        with out:
            try:
                sys.stdout.write(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **row.to_json()},
                                            default=str) + "\n")
                sys.stdout.flush()
            except BrokenPipeError:  # the reader went away (| head): stop quietly
                return False
        return True

    poller = Poller(hosts, opts, port, interval, print_row if as_json else None, stop)
    poller.start()
    try:
        if as_json:
            while not poller.stop.is_set():
                poller.schedule()
                poller.stop.wait(0.1)
            return 0
        with Live(console=console, auto_refresh=False, transient=False) as live:
            drawn = False
            while not poller.stop.is_set():
                poller.schedule()
                if poller.board.changed.wait(0.1) or not drawn:
                    poller.board.changed.clear()
                    drawn = True
                    rows, waiting = poller.board.snapshot()
                    table = table_of(rows, title=f"fleet status, every {interval:g}s (Ctrl-C ends)")
                    if waiting:
                        caption = str(table.caption or "")
                        table.caption = "\n".join(filter(None, ["reading: " + ", ".join(waiting), caption]))
                        table.caption_justify = "left"
                    live.update(table, refresh=True)
            return 0
    except KeyboardInterrupt:
        return 130
    finally:
        poller.stop.set()


def command(hosts: list[Host], opts: ConnectOptions, port: int, as_json: bool, watching: bool,
            interval: float | str | None, console: Console) -> int:
    if watching:
        return watch(hosts, opts, port, check_interval(interval or 5), as_json, console)
    rows = collect(hosts, opts, port)
    if as_json:
        print_json({"hosts": [r.to_json() for r in rows]})
    else:
        render(rows, console)
    return EXIT_OK if all(r.ok for r in rows) else EXIT_HOST_FAILED
