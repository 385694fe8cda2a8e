"""A canary's traffic on one host (fleet/host/programs/canary_load.py, under `timeout`): requests at a fixed rate
to the local server, one JSON line each; or the greedy answers to prompts. The key is read on the host from the
server's key file, never put on a command line. Parsing is the caller's (fleet.deploy.judge, .numerics)."""

from __future__ import annotations

from typing import Protocol

from fleet.host import programs as hostside
from fleet.ssh.remote import CommandResult


class Runs(Protocol):
    def run(self, command: str, timeout: float = 120.0) -> CommandResult: ...


def load_command(venv: str, port: int, key_file: str | None, seconds: float, rate: float, seed: int) -> str:
    return f"timeout {int(seconds) + 330} " + hostside.system_python_command(
        "canary_load.py", "load", str(int(port)), key_file or "-", f"{seconds:g}", f"{rate:g}",
        str(int(seed)))


def answers_command(venv: str, port: int, key_file: str | None, tokens: int, prompts: list[str]) -> str:
    return "timeout 600 " + hostside.system_python_command(
        "canary_load.py", "answers", str(int(port)), key_file or "-", str(int(tokens)), *prompts)


def lines(session: Runs, command: str, timeout: float) -> list[str]:
    """The program's output lines (what it printed before it ended, whatever its exit status)."""
    return [ln for ln in session.run(command, timeout=timeout).stdout.splitlines() if ln.startswith(("[", "{"))]
