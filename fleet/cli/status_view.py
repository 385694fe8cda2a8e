"""What `inv status` draws: the board's table, one row per host."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fleet.status import HostStatus


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
