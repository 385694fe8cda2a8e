"""What `inv status` draws: the board, one line per host at any width, and one host in full (`--detail`).

Columns come in order of priority and are added while they fit the terminal: host, unit, health, release, rung,
drift, playbook (the model it serves), gen tok/s, last failure, then requests, bench tok/s, power, GPUs and
the router. Long values are shortened the way people read them (a release id to its date, time and suffix,
drift to "3 files", a rung or failure class to its first characters and "…"), and whole sentences (why a host
is unreachable) go below the table, folded, never into a cell. `--wide` shows every column in full;
`--detail H` every fact of one host.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Console
from rich.table import Table

from fleet.cli import fit, real_console, words
from fleet.cli.fit import Col, plain_terminal
from fleet.cli.hosttext import escape
from fleet.logs.remedies import remedy_for
from fleet.multihost.status import HostStatus, RouterStatus


def short_id(release: str | None) -> str:
    """20261202T142659Z-ab12 -> 1202T1426-ab12: date, minute and suffix (the full id is in `inv history`)."""
    if not release:
        return "-"
    stamp, _, suffix = release.partition("-")
    if len(stamp) == 16 and stamp.endswith("Z") and suffix:
        return f"{stamp[4:13]}-{suffix}"
    return release


def _state(r: HostStatus) -> tuple[str, str]:
    if not r.ok:  # a host that answered and refused us (its key, the login) is never `unreachable`
        return str(r.why_not_ok), "red"
    state = r.unit.get("ActiveState", "?")
    return state, {"active": "green", "failed": "red"}.get(state, "yellow")


def failure_of(r: HostStatus) -> str | None:
    """The newest failed attempt of the current release, named by its rung (`triton-moe: PERF_REGRESSION`): a tune's
    trial that lost, or a rung a deploy fell back from, never the rung that serves."""
    if not r.last_failure:
        return None
    return f"{r.last_failure_rung}: {r.last_failure}" if r.last_failure_rung else r.last_failure


def _health(r: HostStatus) -> tuple[str, str]:
    if not r.ok:
        return "-", ""
    return ("ok", "green") if r.health == "200" else (r.health or "none", "red")


def _gpu(r: HostStatus) -> tuple[str, str]:
    """GPU health at a glance: the first fault (and how many), a note count, or ok."""
    if not r.ok or r.kernel_log is None and not r.gpu_faults:
        return "-", ""
    if r.gpu_faults:  # `--detail H` lists them
        return f"FAULT ({len(r.gpu_faults)})", "bold red"
    return (f"ok, {len(r.gpu_notes)} notes", "yellow") if r.gpu_notes else ("ok", "green")


def _drift(r: HostStatus, full: bool) -> tuple[str, str]:
    if not r.ok:
        return "-", ""
    boot = ["not enabled"] if r.boot else []  # a reboot would not start it: what boots drifted from what serves
    if not r.drift:
        return (boot[0], "red") if boot else ("none", "")
    files = ", ".join(r.drift) if full else f"{len(r.drift)} file" + ("s" if len(r.drift) > 1 else "")
    return ", ".join([files, *boot]), "red"


def _metric(r: HostStatus, name: str) -> float | None:
    return r.metrics.get(name) if r.metrics else None


def _num(value: float | None) -> str:
    return f"{value:,.0f}" if value is not None else "-"


def columns(rows: list[HostStatus], wide: bool) -> list[Col]:
    """Every column of the board in order of priority, with its cells (full values when wide)."""
    def col(header: str, cell: Callable[[HostStatus], tuple[str, str]], cap: int | None = None,
            right: bool = False) -> Col:
        return Col(header, [cell(r) for r in rows], cap, right)

    out = [
        col("host", lambda r: (r.host, "bold"), cap=24),
        col("unit", lambda r: _state(r) if not wide or not r.ok else
            (f"{_state(r)[0]} ({r.unit.get('SubState', '?')})", _state(r)[1])),
        col("health", _health),
        col("release", lambda r: (((r.release or "-") if wide else short_id(r.release)) if r.ok else "-", "")),
        col("rung", lambda r: (r.rung or "-", ""), cap=16),
        col("drift", lambda r: _drift(r, wide), cap=12),
        col("playbook", lambda r: (r.playbook or "-" if r.ok else "-", ""), cap=12),
        col("gen tok/s", lambda r: (_num(_metric(r, "sglang:gen_throughput")), ""), right=True),
        col("GPU health", _gpu),
        col("failure", lambda r: (r.interrupted or failure_of(r) or "-", "yellow" if r.interrupted else ""), cap=30),
        col("run/queue", lambda r: (f"{_metric(r, 'sglang:num_running_reqs') or 0:.0f}/"
                                    f"{_metric(r, 'sglang:num_queue_reqs') or 0:.0f}" if r.metrics else "-", ""),
            right=True),
        col("bench tok/s", lambda r: (_num(r.bench_tok_s) if r.bench_tok_s else "-", ""), right=True),
        col("power", lambda r: (f"{r.power_w:,.0f}/{r.power_limit_w:,.0f} W"
                                if r.power_w is not None and r.power_limit_w else "-", ""), right=True),
        col("GPUs", lambda r: (str(r.gpus) if r.ok else "-", ""), right=True),
    ]
    if any(r.router for r in rows):
        out.append(col("router", lambda r: router_cell(r.router, wide), cap=22))
    return out


def router_cell(router: RouterStatus | None, full: bool = False) -> tuple[str, str]:
    """The router column: its unit's state, how many workers its release names (and its /health, release)."""
    if not router:
        return "-", ""
    state = router.state or "?"
    text = f"{state}, {router.workers} workers"
    if full:
        text = f"{state}, health {router.health or 'no answer'}, {router.workers} workers ({router.release})"
    return text, "green" if router.ok else "red"


def table_of(rows: list[HostStatus], title: str = "fleet status", width: int = 80, wide: bool = False,
             ascii_only: bool = False, reading: Sequence[str] = ()) -> Table:
    """`reading`: the hosts a live view still waits for, said over the errors."""
    # whole sentences read better under the table, folded to the terminal
    errors = [escape(r.error) for r in rows if not r.ok and r.error]
    every = columns(rows, wide)
    # room left over goes back to the cells cut to their caps (two playbooks alike in their first 12 characters)
    shown = fit.choose(every, width, wide, ascii_only, grow=True)
    # a narrow pane dropped the playbook column (and the rung, at 45) without a word: the board read as one without
    left = [c.header for c in every if c.header not in {s.header for s in shown}
            and any(t.strip() not in ("", "-") for t, _ in c.cells)]
    caption = [*(["reading: " + ", ".join(reading)] if reading else []), *errors,
               *([f"[default]a wider terminal (or --wide) adds: {', '.join(left)}[/]"] if left else [])]
    return fit.table(shown, title, "\n".join(caption) or None, "red" if errors else None)


def render(rows: list[HostStatus], console: Console, wide: bool = False) -> None:
    screen = real_console(console)
    table = table_of(rows, width=screen.width, wide=wide, ascii_only=plain_terminal(screen))
    if wide:
        fit.print_wide(screen, table, fit.width_of(fit.choose(columns(rows, True), 0, True)))
    else:
        screen.print(table)


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
             ("versions", ", ".join(f"{k} {v}" for k, v in r.versions.items()) or "-"),
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
    console.print(f"  {'GPU health:':<22} {escape(_gpu(r)[0])}", highlight=False)
    for fault in r.gpu_faults:
        console.print(f"    [red]{escape(fault)}[/]", highlight=False)
    for note in r.gpu_notes:
        console.print(f"    [yellow]{escape(note)}[/]", highlight=False)
    read = r.kernel_log in ("journalctl", "dmesg")  # else why it could not be read (or not asked)
    said = (f"{sum(e.count for e in r.xid)} (read from {r.kernel_log})" if r.xid else
            f"none (read from {r.kernel_log})" if read else escape(r.kernel_log or "-"))
    console.print(f"  {'Xid since boot:':<22} {said}", highlight=False)
    for e in r.xid:
        gpu = f"GPU {e.gpu_index}" if e.gpu_index is not None else f"PCI {e.pci}"
        console.print(f"    Xid {e.code} on {escape(gpu)} x{e.count}, last: {escape(e.last)}",
                      highlight=False, soft_wrap=False)
    drift = words.count(len(r.drift), "file") if r.drift else "none"
    console.print(f"  {'drift:':<22} {drift}", highlight=False)
    for path in r.drift:
        console.print(f"    [red]{escape(path)}[/]", highlight=False)
    at_boot = (f"[red]{escape(r.boot)}[/]" if r.boot else
               "starts (enabled)" if r.unit.get("UnitFileState") == "enabled" else "-")
    console.print(f"  {'after a reboot:':<22} {at_boot}", highlight=False)
    if r.last_failure:
        console.print(f"  {'last failure:':<22} [red]{escape(failure_of(r) or '')}[/]", highlight=False)
        if r.last_failure_evidence:  # folded under itself (it ran on from the terminal's first column)
            fit.say(console, f"evidence: {r.last_failure_evidence}", indent=4)
        remedy = (f"nothing to do: a tune's trial; the tune kept rung {r.last_failure_lost_to}, which was faster"
                  if r.last_failure_lost_to else remedy_for(r.last_failure, r.last_failure_evidence or "",
                                                            sglang=r.sglang))
        if remedy:
            fit.say(console, f"next: {remedy}", indent=4)
