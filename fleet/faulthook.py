"""TEST HOOKS, inert unless their variables are set, and only under FLEET_SANDBOX_ONLY=1 (the sandbox's guard): the
fault suite (tests/faults/) injects faults through them. Outside the sandbox they were live, and undocumented: a
FLEET_FAULT_AT left in a shell failed, dropped or SIGKILLed a real deploy at its step, FLEET_FAULT_FILL ran its
shell command on the real host (issue 46, finding 8).

FLEET_FAULT_KILL_AT=<step>: SIGKILL this fleet process at a named step of a deploy, as a crash or `kill -9`
would. Steps are the release journal's (opened, stop, installed, restarted, attempt, current), `phase:<name>`
when the journal watch enters a start-up phase, and `mid-patch`: the host-side patch writer dies after its
first file, and fleet with it, so the host is left half-patched.

Fault points, derived from the code: every remote step (each command of fleet.ssh.remote, the journal's
follower channel) passes through `remote_step`, numbered in order within the process: fleet.ssh.faulty's runner,
put on each connection opened while FLEET_FAULT_TRACE or FLEET_FAULT_AT is set, counts them.
FLEET_FAULT_TRACE=<file> appends `<n>\t<monotonic time>\t<label>` for each (the harness learns a flow's points
from one clean run); FLEET_FAULT_AT=<n>:<kind> injects a fault at step n: `fail` (the command fails without
running), `drop` (the link drops while it runs), `kill` (this process is SIGKILLed before it is sent), `full`
(FLEET_FAULT_FILL, a shell command, fills the host's disks first; the command then runs on a full disk), `late`
(the command runs to its end on the host, and its answer is lost as a timeout would lose it: CommandTimedOut).
A new remote step is a new point without anyone listing it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable

ENV = "FLEET_FAULT_KILL_AT"
MID_PATCH = "mid-patch"
TRACE, AT, FILL = "FLEET_FAULT_TRACE", "FLEET_FAULT_AT", "FLEET_FAULT_FILL"
KINDS = ("fail", "drop", "kill", "full", "late")

_steps = 0
_counting = threading.Lock()


def sandboxed() -> bool:
    """As fleet.ssh.guard.enabled (a layer above this one): the hooks act only where it guards."""
    return os.environ.get("FLEET_SANDBOX_ONLY", "") not in ("", "0", "false", "no")


def armed(step: str) -> bool:
    return sandboxed() and os.environ.get(ENV) == step


def reached(step: str) -> None:
    """Die here, without cleanup, when the fault suite asked for this step."""
    if armed(step):
        os.kill(os.getpid(), signal.SIGKILL)


def active() -> bool:
    """Whether the fault harness counts remote steps in this process (fleet.ssh.faulty wraps connections then)."""
    return sandboxed() and bool(os.environ.get(TRACE) or os.environ.get(AT))


def remote_step(label: Callable[[], str]) -> str | None:
    """Count one remote step; the fault kind to inject at it (fail, drop, full or late), or None. A `kill` never
    returns. `label` (called only when tracing) names the step: its caller and what it runs."""
    trace, at = os.environ.get(TRACE), os.environ.get(AT)
    if not trace and not at or not sandboxed():
        return None
    global _steps
    with _counting:  # steps on several threads (a multi-node deployment's journals) get one number each
        _steps += 1
        step = _steps
        if trace:
            with open(trace, "a") as f:
                f.write(f"{step}\t{time.monotonic():.3f}\t{label()}\n")
    number, _, kind = (at or "").partition(":")
    if number != str(step) or kind not in KINDS:
        return None
    if kind == "kill":
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    return kind


def number_from_one() -> None:
    """Remote steps are numbered from 1 again: a new flow in this process (each test of the hooks is one)."""
    global _steps
    with _counting:
        _steps = 0


def fill_command() -> str:
    """The shell command that fills the host's disks for a `full` fault (the harness names its folders)."""
    return os.environ.get(FILL, "")


def caller(skip: frozenset[str]) -> str:
    """`module.function` of the nearest fleet frame whose function is not in `skip` (the generic helpers
    every step goes through): who asked for the step."""
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if ("/fleet/" in path and frame.f_code.co_name not in skip and "/fleet/ssh/" not in path
                and not path.endswith("faulthook.py")):
            module = path.rsplit("/fleet/", 1)[1].removesuffix(".py").replace("/", ".")
            return f"{module}.{frame.f_code.co_name}"
        frame = frame.f_back  # type: ignore[assignment]
    return "?"
