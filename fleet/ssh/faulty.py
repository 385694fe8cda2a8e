"""The fault harness's runner (tests/faults, through fleet.faulthook's variables): chosen once, when a connection
opens under FLEET_FAULT_TRACE or FLEET_FAULT_AT, it wraps that connection's commands (fleet.ssh.remote.exchange)
and its journal channels. Each is a numbered step, labelled by who asked; at the armed step it injects its kind:
`fail` (not run), `drop` (the link drops while it runs), `full` (the disks filled first), `late` (it runs, its
answer is lost), `kill` (fleet.faulthook kills the process). Without those variables nothing here runs."""

from __future__ import annotations

import shlex
from typing import BinaryIO

import paramiko
from fabric import Connection

from fleet import faulthook
from fleet.errors import FleetError
from fleet.inventory import Host
from fleet.ssh import become
from fleet.ssh.remote import (
    BytesResult,
    CommandTimedOut,
    ConnectionLost,
    connected,
    exchange,
    late,
    lost_link,
    start_channel,
    use_runner,
)

# Frames of the generic helpers every step passes through, and of fleet.host's verbs (a caller's command said by
# name): a step is labelled by the fleet code that asked for it.
_GENERIC = frozenset({"run", "run_bytes", "sh", "read_file", "write_atomic", "_space_left", "<lambda>", "file",
                      "keep_file", "save", "event", "load", "events", "events_read"})
_VERBS = frozenset({"start", "stop_quietly", "restart_unit", "disable_unit", "enable_unit", "unit_file_states",
                    "remove_file", "make_folders", "names_in", "sha256s", "read_quiet", "run_system_python",
                    "can_import", "python_says", "cursor_of", "journal_tail",
                    "open_follower", "manifests_with", "patch_runs_open", "dead_run_marks",
                    "drop_temps", "remove", "launch_help", "model_check", "port_users", "health_code", "metrics_text",
                    "answer", "request", "run_bench", "said"})


def step_label(command: str) -> str:
    """A remote step as the fault harness names it: who asked, and what runs (a shipped program by its name)."""
    try:
        words = shlex.split(command)  # whole: a shipped program's text (kcache.py: 22 KB) is one word
    except ValueError:
        words = command.split()
    i = words.index("fleet-interpreter") if "fleet-interpreter" in words[3:6] else 0
    if i and words[i - 3:i - 1] == ["sh", "-c"]:  # the host's python checked first (interpreter.sh): as it runs
        return step_label(shlex.join(words[:i - 3] + words[i + 1:]))
    if "-c" in words[1:4] and words[words.index("-c") + 2:][:1] == ["fleet-as_owner"]:
        i = words.index("-c") + 4  # past `-c AS_OWNER_TEXT fleet-as_owner VENV`: the venv's own command, as its owner
        if len(words) > i and words[i] != "--who":
            return step_label(shlex.join(words[i:]))
    if words[:2] == ["sh", "-c"] and len(words) > 3:
        what = " ".join(words[3:])
    elif len(words) > 3 and "-c" in words[1:4] and words[0].rstrip("0123456789.").endswith("python"):
        args = [w for w in words[words.index("-c") + 2:] if not w.startswith(("--user=", "--venv="))]  # the verb
        what = "python " + " ".join(w for w in args[:2] if len(w) < 40)
    else:
        what = " ".join(command.split())
    return f"{faulthook.caller(_GENERIC | _VERBS)}: {what[:70]}"


def install(conn: Connection) -> None:
    """This connection's commands through the fault runner when the harness's variables are set; else as they are."""
    if faulthook.active():
        use_runner(conn, FAULTY)


def _fill(transport: paramiko.Transport, how: become.Become) -> None:
    """FLEET_FAULT_FILL on the host, outside the step count: the disks are full from this step on."""
    chan = transport.open_session()
    try:
        chan.exec_command(how.wrap(faulthook.fill_command()))
        chan.sendall(how.stdin())
        chan.shutdown_write()
        chan.recv_exit_status()
    finally:
        chan.close()


class _Faulty:
    def run_bytes(self, conn: Connection, host: Host, command: str, data: bytes | BinaryIO, timeout: float,
                  max_output: int) -> BytesResult:
        transport = connected(conn, host, command)  # a dead link is no step: it raises before, as it always did
        fault = faulthook.remote_step(lambda: step_label(command))
        if fault == "fail":
            return BytesResult(exited=1, stdout=b"", stderr=b"fleet fault hook: injected failure\n")
        if fault == "full":
            _fill(transport, become.of(conn, host.become))

        def drop() -> None:
            transport.close()
            lost_link(conn, host, f"during `{command[:60]}`", EOFError("fleet fault hook: the link dropped"))

        res = exchange(conn, host, command, data, timeout, max_output, sent=drop if fault == "drop" else None)
        if fault == "late":
            raise late(host, command, timeout, " (fleet fault hook: it ran, its answer was lost)")
        return res

    def open_channel(self, conn: Connection, host: Host, command: str, open_s: float,
                     what: str) -> paramiko.Channel:
        fault = faulthook.remote_step(lambda: step_label(command))
        transport = conn.client.get_transport()
        if fault == "fail":
            raise FleetError(f"{host.name}: `{command[:60]}` failed: fleet fault hook: injected failure")
        if fault == "drop" and transport is not None:
            transport.close()
            raise ConnectionLost(f"{host.name}: connection lost before `{command[:60]}`: fleet fault hook: "
                                 "link dropped")
        if fault == "full" and transport is not None:
            _fill(transport, become.of(conn, host.become))
        if fault == "late":
            raise CommandTimedOut(f"{host.name}: `{command[:60]}` did not answer in time: fleet fault hook: answer "
                                  "lost")
        return start_channel(conn, host, command, open_s, what)


FAULTY = _Faulty()
