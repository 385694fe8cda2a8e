"""`inv exec`: one shell command on many hosts in parallel, over fleet's own connections."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from fleet import parallel
from fleet.errors import InputError
from fleet.host import programs
from fleet.inventory import Host
from fleet.parallel import HostOutcome
from fleet.progress import Progress, quiet, ticking
from fleet.ssh import remote
from fleet.ssh.connect import ConnectOptions, open_connection
from fleet.ssh.remote import CommandResult, CommandTimedOut

if TYPE_CHECKING:
    from fabric import Connection

DEFAULT_TIMEOUT_S = 120.0  # what `inv exec` waits for one host's command when no --timeout is given
MAX_TIMEOUT_S = 86400.0  # a deadline, not a way to wait forever (and what timers can hold)
MIN_TIMEOUT_S = 0.001  # what the host is given is written in milliseconds at most
KILL_AFTER_S = 5  # exec.sh's KILL_AFTER: from TERM to KILL on the host
# timeout(1)'s exit status when it ended the command: 124 after TERM, 128+9 when KILL was needed
ENDED_BY_TIMEOUT = (124, 137)
CHANNEL_SLACK_S = 3.0  # beyond the host's own deadline and kill: what the host may take to say it ended
GROUP_ONLY = "fleet: no systemd scope here"  # how exec.sh begins its line where only the process group is ended


def parse_timeout(text: str | float | None) -> float:
    """--timeout SECONDS: a positive, finite number; none given is DEFAULT_TIMEOUT_S."""
    if text is None or not str(text).strip():
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"--timeout {str(text)[:40]!r}: not a number of seconds") from None
    if not value > 0 or not math.isfinite(value):
        raise InputError(f"--timeout {str(text)[:40]!r}: must be a positive number of seconds")
    if value < MIN_TIMEOUT_S:
        raise InputError(f"--timeout {str(text)[:40]!r}: at least {MIN_TIMEOUT_S:.3f} seconds (a millisecond)")
    if value > MAX_TIMEOUT_S:
        raise InputError(f"--timeout {str(text)[:40]!r}: at most {MAX_TIMEOUT_S:g} seconds (a day)")
    return value


def seconds(value: float) -> str:
    """A deadline as the host is given it: a plain decimal, at most milliseconds ('0.001', '2.5', '120'), never
    Python's '1e-05', which systemd's time spans (RuntimeMaxSec) refuse."""
    return f"{value:.3f}".rstrip("0").rstrip(".")


def run_everywhere(hosts: Sequence[Host], command: str, opts: ConnectOptions, timeout: float = DEFAULT_TIMEOUT_S,
                   notice: Callable[[str], None] | None = None,
                   progress: Progress = quiet) -> list[HostOutcome[CommandResult]]:
    """The command on every host, each under `timeout` and remote.MAX_OUTPUT. The host ends it at the deadline
    (exec.sh: its systemd scope, whatever left the process group): a command that ran past it is a
    CommandTimedOut that says it was ended there. Ctrl-C: as `each`."""
    def one(host: Host) -> CommandResult:
        conn = open_connection(host, opts)
        try:
            return run_one(conn, host, command, timeout)
        finally:
            conn.close()

    return each(hosts, one, timeout, notice, progress)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during `inv exec`: every host's outcome, one not ended saying why (not started, or left running)."""

    def __init__(self, outcomes: list[HostOutcome[CommandResult]]) -> None:
        super().__init__()
        self.outcomes = outcomes


def each(hosts: Sequence[Host], one: Callable[[Host], CommandResult], timeout: float,
         notice: Callable[[str], None] | None = None, progress: Progress = quiet) -> list[HostOutcome[CommandResult]]:
    """`one` on every host in parallel; `progress` is told where the commands stand while they run (the hosts done,
    those still running: the table comes once every host ended, up to --timeout). Ctrl-C: `notice` says at once
    that no host starts and the commands under way are waited for (a second Ctrl-C stops waiting), then Interrupted
    with every host's outcome."""
    started: set[str] = set()
    ended: set[str] = set()

    def run(host: Host) -> CommandResult:
        started.add(host.name)
        try:
            return one(host)
        finally:
            ended.add(host.name)

    def note() -> str:
        running = [h.name for h in hosts if h.name in started and h.name not in ended]
        shown = ", ".join(running[:8]) + (f" and {len(running) - 8} more" if len(running) > 8 else "")
        return f"; {len(ended)} of {len(hosts)} hosts done" + (f", still running: {shown}" if running else "")

    try:
        with ticking(progress, "exec", timeout, note=note):
            return parallel.run_all(hosts, run, notice=notice,
                                    ends=f"a command ends by itself or at its --timeout of {seconds(timeout)}s",
                                    left=f"the host ends its command at its --timeout of {seconds(timeout)}s")
    except parallel.Interrupted as stop:
        left = f"interrupted while its command ran; the host ends it at its --timeout of {seconds(timeout)}s"
        raise Interrupted([o if o is not None else HostOutcome(
            h, False, None, f"{h.name}: {left if h.name in started else 'not started: interrupted'}", 0.0)
            for h, o in zip(hosts, stop.outcomes, strict=True)]) from None


def run_one(conn: Connection, host: Host, command: str, timeout: float) -> CommandResult:
    """One host's command through exec.sh; the channel waits a little longer than the host's own deadline."""
    wrapped = programs.sh_command("exec.sh", seconds(timeout), command)
    grace = KILL_AFTER_S + CHANNEL_SLACK_S
    start = time.monotonic()
    try:
        res = remote.run(conn, host, wrapped, timeout=timeout + grace, shown=command)
    except CommandTimedOut:
        raise CommandTimedOut(f"{host.name}: `{command[:60]}` did not finish within {timeout:g}s, nor did the host "
                              f"say it ended it {grace:g}s later; the channel was closed (the host is slow, stuck "
                              "or hostile: the command may still run there)") from None
    if res.exited in ENDED_BY_TIMEOUT and time.monotonic() - start >= timeout:
        raise CommandTimedOut(f"{host.name}: `{command[:60]}` did not finish within {timeout:g}s: ended on the host "
                              f"({ended(res.exited, res.stderr)})")
    return res


def ended(exited: int, stderr: str) -> str:
    """How exec.sh ended a command at its deadline, from its exit status and its own line on stderr."""
    how = "TERM" if exited == 124 else f"TERM, then KILL {KILL_AFTER_S}s later"
    # exec.sh writes its line before the command runs: only stderr's first line can be its
    if stderr.split("\n", 1)[0].startswith(GROUP_ONLY):
        return f"its process group sent {how} by timeout(1); this host has no systemd scope for what left it"
    return f"everything it started, in its own systemd scope, sent {how}"
