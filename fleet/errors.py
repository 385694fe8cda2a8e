"""Errors fleet reports to people, and the exit codes they map to."""

from __future__ import annotations

# Exit codes every task documents: 0 all ok, 1 some host failed, 2 bad input (nothing was changed), 130 Ctrl-C.
EXIT_OK = 0
EXIT_HOST_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # Ctrl-C: the shell's own code for SIGINT (128 + 2)


class FleetError(Exception):
    """An error with a one-line message meant for the operator."""

    exit_code = EXIT_HOST_FAILED


class InputError(FleetError):
    """Bad input (inventory, playbook, flag): reported before any host is touched."""

    exit_code = EXIT_BAD_INPUT


class GuardError(InputError):
    """FLEET_SANDBOX_ONLY refused an address: no packet was sent."""


class ConnectError(FleetError):
    """A host could not be reached or refused us; the message says which and why. `unreachable`: SSH could not
    reach the host itself (timed out, refused, dropped before the SSH banner), not a host that answered and refused
    us (key, login), nor a jump host or a name that failed on the way; never by itself a reason to reset it."""

    def __init__(self, message: str, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable
