"""What `inv status` draws: the board, one line per host at any width, and one host in full (`--detail`).

Columns come in order of priority and are added while they fit the terminal: host, unit, health, release,
rung, gen tok/s, drift, last failure, then requests, bench tok/s, power, GPUs and the router. Long values are
shortened the way people read them (a release id to its date, time and suffix, drift to "3 files", a rung or
failure class to its first characters and "…"), and whole sentences (why a host is unreachable) go below the
table, folded, never into a cell. `--wide` shows every column in full; `--detail H` every fact of one host.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from fleet.cli import real_console
from fleet.remedies import remedy_for
from fleet.status import HostStatus

GAP = 2  # the space between two columns (one cell of padding each side)


def plain_terminal(console: Console) -> bool:
    """ASCII only: an encoding other than UTF-8, or the C/POSIX locale (whose terminals often lack the glyphs,
    even where Python itself coerces the encoding to UTF-8)."""
    locale = os.environ.get("LC_ALL") or os.environ.get("LC_CTYPE") or os.environ.get("LANG") or ""
    return not (console.encoding or "").lower().startswith("utf") or locale in ("C", "POSIX")


def short_id(release: str | None) -> str:
    """20261202T142659Z-ab12 -> 1202T1426-ab12: date, minute and suffix (the full id is in `inv history`)."""
    if not release:
        return "-"
    stamp, _, suffix = release.partition("-")
    if len(stamp) == 16 and stamp.endswith("Z") and suffix:
        return f"{stamp[4:13]}-{suffix}"
    return release


def _state(r: HostStatus) -> tuple[str, str]:
    if not r.ok:
        return "unreachable", "red"
    state = r.unit.get("ActiveState", "?")
    return state, {"active": "green", "failed": "red"}.get(state, "yellow")


def _health(r: HostStatus) -> tuple[str, str]:
    if not r.ok:
        return "-", ""
    return ("ok", "green") if r.health == "200" else (r.health or "none", "red")


def _drift(r: HostStatus, full: bool) -> tuple[str, str]:
    if not r.ok:
        return "-", ""
    if not r.drift:
        return "none", ""
    return (", ".join(r.drift) if full else f"{len(r.drift)} file" + ("s" if len(r.drift) > 1 else "")), "red"


def _metric(r: HostStatus, name: str) -> float | None:
    return r.metrics.get(name) if r.metrics else None


def _num(value: float | None) -> str:
    return f"{value:,.0f}" if value is not None else "-"


@dataclass(frozen=True)
class Column:
    header: str
    cell: Callable[[HostStatus, bool], tuple[str, str]]  # (row, full) -> (text, style)
    cap: int | None = None  # widest a cell gets on the board (not under --wide)
    right: bool = False


COLUMNS = (
    Column("host", lambda r, full: (r.host, "bold"), cap=24),
    Column("unit", lambda r, full: _state(r) if not full or not r.ok else
           (f"{_state(r)[0]} ({r.unit.get('SubState', '?')})", _state(r)[1])),
    Column("health", lambda r, full: _health(r)),
    Column("release", lambda r, full: ((r.release or "-") if full else short_id(r.release), "") if r.ok
           else ("-", "")),
    Column("rung", lambda r, full: (r.rung or "-", ""), cap=16),
    Column("gen tok/s", lambda r, full: (_num(_metric(r, "sglang:gen_throughput")), ""), right=True),
    Column("drift", _drift, cap=12),
    Column("failure", lambda r, full: (r.interrupted or r.last_failure or "-", "yellow" if r.interrupted else ""),
           cap=18),
    Column("run/queue", lambda r, full: (f"{_metric(r, 'sglang:num_running_reqs') or 0:.0f}/"
                                         f"{_metric(r, 'sglang:num_queue_reqs') or 0:.0f}" if r.metrics else "-", ""),
           right=True),
    Column("bench tok/s", lambda r, full: (_num(r.bench_tok_s) if r.bench_tok_s else "-", ""), right=True),
    Column("power", lambda r, full: (f"{r.power_w:,.0f}/{r.power_limit_w:,.0f} W"
                                     if r.power_w is not None and r.power_limit_w else "-", ""), right=True),
    Column("GPUs", lambda r, full: (str(r.gpus) if r.ok else "-", ""), right=True),
)


def router_cell(router: dict[str, Any] | None, full: bool = False) -> tuple[str, str]:
    """The router column: its unit's state, its /health, how many workers its release names."""
    if not router:
        return "-", ""
    state, health = router.get("state") or "?", router.get("health")
    ok = state == "active" and health == 200
    text = f"{state}, {router.get('workers', 0)} workers"
    if full:
        text = f"{state}, health {health or 'no answer'}, {router.get('workers', 0)} workers ({router.get('release')})"
    return text, "green" if ok else "red"


ROUTER = Column("router", lambda r, full: router_cell(r.router, full), cap=22)


def _fit(text: str, cap: int | None, ascii_only: bool = False) -> str:
    if cap is None or len(text) <= cap:
        return text
    return text[:cap - 1] + ("~" if ascii_only else "…")


def layout(rows: list[HostStatus], width: int, wide: bool = False,
           ascii_only: bool = False) -> list[tuple[Column, list[tuple[str, str]]]]:
    """The columns that fit `width` (all of them when wide), in priority order, with their cells."""
    columns = [*COLUMNS, *([ROUTER] if any(r.router for r in rows) else [])]
    chosen: list[tuple[Column, list[tuple[str, str]]]] = []
    used = 0
    for col in columns:
        cells = [col.cell(r, wide) for r in rows]
        if not wide:
            cells = [(_fit(text, col.cap, ascii_only), style) for text, style in cells]
        need = max(len(col.header), *(len(t) for t, _ in cells)) if cells else len(col.header)
        extra = need + (GAP if chosen else 0)
        if not wide and chosen and used + extra > width:
            continue  # a narrower column further down may still fit
        chosen.append((col, cells))
        used += extra
    return chosen


def table_of(rows: list[HostStatus], title: str = "fleet status", width: int = 80, wide: bool = False,
             ascii_only: bool = False) -> Table:
    table = Table(title=title, box=None, show_edge=False, pad_edge=False, header_style="bold",
                  title_justify="left", expand=False)
    chosen = layout(rows, width, wide, ascii_only)
    for col, _ in chosen:
        table.add_column(col.header, justify="right" if col.right else "left", no_wrap=True,
                         overflow="ellipsis" if not wide else "fold")
    for i in range(len(rows)):
        table.add_row(*(Text(cells[i][0], style=cells[i][1]) for _, cells in chosen))
    errors = [escape(r.error) for r in rows if not r.ok and r.error]
    if errors:  # whole sentences read better under the table, folded to the terminal
        table.caption, table.caption_justify = "\n".join(errors), "left"
        table.caption_style = "red"
    return table


def render(rows: list[HostStatus], console: Console, wide: bool = False) -> None:
    table = table_of(rows, width=console.width, wide=wide, ascii_only=plain_terminal(console))
    if not wide:
        console.print(table)
        return
    screen = real_console(console)
    width = screen.width
    screen.width = max(width, _natural_width(rows))  # every column in full: the terminal wraps, less -S does not
    try:
        screen.print(table, crop=False)
    finally:
        screen.width = width


def _natural_width(rows: list[HostStatus]) -> int:
    return sum(max(len(c.header), *(len(c.cell(r, True)[0]) for r in rows)) + GAP for c, _ in layout(rows, 0, True))


def render_detail(r: HostStatus, console: Console) -> None:
    """One host in full: every fact the board shortens, every drifted file and why, the last failure's
    evidence and what to try next."""
    state, colour = _state(r)
    console.print(f"[bold]{escape(r.host)}[/] ({escape(r.address)}): [{colour}]{escape(state)}[/]"
                  + (f" ({escape(r.unit.get('SubState', '?'))})" if r.ok else ""))
    if not r.ok:
        console.print(f"  [red]{escape(r.error or 'no answer')}[/]")
        return
    facts = [("release", r.release or "-"), ("playbook", r.playbook or "-"), ("rung", r.rung or "-"),
             ("health", "ok (200)" if r.health == "200" else (r.health or "no answer")),
             ("GPUs", str(r.gpus)),
             ("power", f"{r.power_w:,.0f} of {r.power_limit_w:,.0f} W" if r.power_w is not None and r.power_limit_w
              else "-"),
             ("bench", f"{r.bench_tok_s:,.0f} tok/s (the release's latest)" if r.bench_tok_s else "-"),
             *((name.removeprefix("sglang:"), f"{value:,.2f}".rstrip("0").rstrip(".")) for name, value in
               sorted(r.metrics.items())),
             ("router", router_cell(r.router, True)[0] if r.router else "-"),
             ("interrupted", r.interrupted or "-")]
    for name, value in facts:
        console.print(f"  {name + ':':<22} {escape(value)}", highlight=False, soft_wrap=False)
    console.print(f"  {'drift:':<22} " + ("none" if not r.drift else f"{len(r.drift)} files"), highlight=False)
    for path in r.drift:
        console.print(f"    [red]{escape(path)}[/]", highlight=False)
    if r.last_failure:
        console.print(f"  {'last failure:':<22} [red]{escape(r.last_failure)}[/]", highlight=False)
        if r.last_failure_evidence:
            console.print(f"    evidence: {escape(r.last_failure_evidence)}", highlight=False)
        remedy = remedy_for(r.last_failure, r.last_failure_evidence or "")
        if remedy:
            console.print(f"    next: {escape(remedy)}", highlight=False)
