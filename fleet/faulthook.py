"""TEST HOOK, inert unless FLEET_FAULT_KILL_AT is set: the fault suite (tests/faults/) uses it to SIGKILL
this fleet process at a named step of a deploy, as a crash or `kill -9` would, at a known point.

Steps are the release journal's (opened, stop, installed, restarted, attempt, current), `phase:<name>` when
the journal watch enters a start-up phase, and `mid-patch`: the host-side patch writer dies after its first
file, and fleet with it, so the host is left half-patched.
"""

from __future__ import annotations

import os
import signal

ENV = "FLEET_FAULT_KILL_AT"
MID_PATCH = "mid-patch"


def armed(step: str) -> bool:
    return os.environ.get(ENV) == step


def reached(step: str) -> None:
    """Die here, without cleanup, when the fault suite asked for this step."""
    if armed(step):
        os.kill(os.getpid(), signal.SIGKILL)
