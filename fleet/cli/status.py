"""`inv status`: the board, one row per host (and `--watch`, refreshed in place until Ctrl-C); drawn by
fleet.cli.status_view, which alone loads rich."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from fleet import parallel
from fleet.cli import print_json, real_console, say_on_stderr, words
from fleet.cli.liveline import say_now
from fleet.errors import EXIT_HOST_FAILED, EXIT_INTERRUPTED, EXIT_OK
from fleet.host.session import one_line
from fleet.inventory import Host
from fleet.multihost.status import HostStatus, collect, collect_one
from fleet.multihost.status_watch import Poller, check_interval
from fleet.ssh.connect import ConnectOptions

if TYPE_CHECKING:
    from rich.console import Console


def watch(hosts: Sequence[Host], opts: ConnectOptions, port: int, interval: float, as_json: bool,
          console: Console, stop: threading.Event | None = None, wide: bool = False,
          read_one: Callable[[Host, ConnectOptions, int], HostStatus] = collect_one) -> int:
    """Refresh until Ctrl-C (exit 130, like `inv logs -f`), the reader of --json going away, or `stop`. On a
    terminal the board is redrawn in place; elsewhere (a pipe, a CI log) a board is printed after each round
    in which every host answered and something changed. `read_one`: how one host is read."""
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

    poller = Poller(hosts, opts, port, interval, print_row if as_json else None, stop, read_one)
    poller.start()
    try:
        if as_json:
            while not poller.stop.is_set():
                poller.schedule()
                poller.stop.wait(0.1)
            return 0
        from rich.live import Live

        from fleet.cli.fit import plain_terminal
        from fleet.cli.status_view import table_of

        title = f"fleet status, every {interval:g}s (Ctrl-C ends)"
        screen = real_console(console)
        if not screen.is_terminal:
            return _snapshots(poller, screen, title, wide)
        with Live(console=screen, auto_refresh=False, transient=False) as live:
            drawn = False
            while not poller.stop.is_set():
                poller.schedule()
                if poller.board.changed.wait(0.1) or not drawn:
                    poller.board.changed.clear()
                    drawn = True
                    rows, waiting = poller.board.snapshot()
                    table = table_of(rows, title=title, width=screen.width, wide=wide,
                                     ascii_only=plain_terminal(screen), reading=waiting)
                    live.update(table, refresh=True)
            return 0
    except KeyboardInterrupt:
        return 130
    finally:
        poller.stop.set()


def _snapshots(poller: Poller, out: Console, title: str, wide: bool) -> int:
    from fleet.cli.fit import plain_terminal
    from fleet.cli.status_view import table_of

    last: list[dict[str, object]] | None = None
    while not poller.stop.is_set():
        poller.schedule()
        if not poller.board.changed.wait(0.1):
            continue
        poller.board.changed.clear()
        rows, waiting = poller.board.snapshot()
        now = [r.to_json() for r in rows]
        if waiting or now == last:
            continue
        last = now
        out.print(table_of(rows, title=f"{title} {time.strftime('%H:%M:%S')}", width=out.width, wide=wide,
                           ascii_only=plain_terminal(out)))
    return 0


def sent(text: str) -> str:
    """A value a host sent, for a plain stderr line: one line, no control characters, 40 at most."""
    return one_line(text, 40)


def not_clean(row: HostStatus) -> str | None:
    """Why a host makes `inv status` exit 1 (docs/cli.md: some host failed, or what it checks is not clean), or None.
    A host with a release fleet made current is meant to serve: its unit not active (stopped, killed, failed) or its
    /health not 200 is not clean; so are drift, its unit not enabled (a reboot would not start it), a GPU fault,
    a router of fleet's that does not serve, and what a run that died left (its lock, a release in progress). A host
    with no current release (fleet never deployed there, or `rollback --to before-fleet`) has nothing to serve."""
    if not row.ok:
        return row.why_not_ok
    why = []
    state = row.unit.get("ActiveState") or "unknown"
    if row.release and state != "active":  # what the host sent, as data on a plain line
        why.append(f"unit {sent(state)}" + (f" ({sent(row.unit['SubState'])})" if row.unit.get("SubState") else ""))
    elif row.release and row.health != "200":
        why.append(f"health {sent(row.health or 'no answer')}")
    if row.drift:
        why.append(f"drift in {words.count(len(row.drift), 'file')}")
    if row.boot:
        why.append("unit not enabled (no start after a reboot)")
    if row.left_by_dead_run:  # a deploy killed (or stopped by a second Ctrl-C) mid-step: it read as clean, exit 0
        why.append("left half-done by a run that died (the next deploy or rollback puts it back)")
    if row.gpu_faults:
        why.append("GPU fault")
    if row.router and not row.router.ok:
        why.append(f"router {sent(row.router.state or 'unknown')}")
    return ", ".join(why) or None


def exit_code(rows: Sequence[HostStatus]) -> int:
    """EXIT_HOST_FAILED when any host is not clean, with one line on stderr saying which and why."""
    bad = [(r.host, why) for r in rows if (why := not_clean(r))]
    if not bad:
        return EXIT_OK
    say_on_stderr("not clean (exit 1): " + "; ".join(f"{host}: {why}" for host, why in bad))
    return EXIT_HOST_FAILED


def command(hosts: list[Host], opts: ConnectOptions, port: int, as_json: bool, watching: bool,
            interval: float | str | None, console: Console, wide: bool = False, detail: bool = False) -> int:
    if watching:
        return watch(hosts, opts, port, check_interval(interval or 5), as_json, console, wide=wide)
    try:
        rows, stopped = collect(hosts, opts, port), False
    except parallel.PartlyDone as stop:  # what was gathered is shown, the rest marked interrupted
        rows, stopped = stop.rows, True
    _show(rows, as_json, console, wide, detail)
    if stopped:  # 130 whatever the rows say: the board is not whole
        say_now(INTERRUPTED_LINE)
        return EXIT_INTERRUPTED
    return exit_code(rows)


INTERRUPTED_LINE = ("interrupted: the hosts that answered are shown; a host marked interrupted was not read "
                    "(Ctrl-C)")


def _show(rows: list[HostStatus], as_json: bool, console: Console, wide: bool, detail: bool) -> None:
    if as_json:
        print_json({"hosts": [r.to_json() for r in rows]})
    elif detail:
        from fleet.cli.status_view import render_detail

        for row in rows:
            render_detail(row, console)
    else:
        from fleet.cli.status_view import render

        render(rows, console, wide=wide)
