"""One host, one connection: the object every operation on a host is handed.

A HostSession binds the SSH connection to the inventory host it reaches (its become, its venv) and answers
the verbs operations need: run a command, read a file, write one atomically, ask systemd about a unit. The
operations above never hold a connection and a host side by side; shell text stays in fleet.host and
fleet.ssh, behind these verbs. Every command verb goes through `run`, so a fake session (tests) that answers
`run` from a script answers them all.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace

from fabric import Connection

from fleet.host import lock as hostlock
from fleet.host import probe_run, service
from fleet.host.facts import HostFacts
from fleet.inventory import Host
from fleet.progress import Progress, quiet
from fleet.ssh.connect import ConnectOptions, open_connection
from fleet.ssh.remote import ChannelFailed as ChannelFailed
from fleet.ssh.remote import CommandResult as CommandResult
from fleet.ssh.remote import CommandTimedOut as CommandTimedOut
from fleet.ssh.remote import ConnectionLost as ConnectionLost
from fleet.ssh.remote import OutputTooLarge as OutputTooLarge
from fleet.ssh.remote import lost_link, run

BOOT_ID = "cat /proc/sys/kernel/random/boot_id"  # the kernel's id of this boot: another after a reboot
_BOOT_ID = re.compile(r"[0-9A-Za-z-]{1,64}")  # a UUID on Linux; one token, never empty
RUNNING = frozenset({"active", "activating", "reloading"})  # running, or trying to (a Restart= loop between tries)


def one_line(text: str, limit: int = 200) -> str:
    """What a host sent, fit for an operator's one line: its first non-empty line, printable, at most `limit`."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return service.printable(first, limit)


@dataclass
class HostSession:
    """The connection to `host`, and the verbs every operation on it uses."""

    conn: Connection
    host: Host

    @classmethod
    def open(cls, host: Host, opts: ConnectOptions | None) -> HostSession:
        return cls(open_connection(host, opts), host)

    @property
    def name(self) -> str:
        return self.host.name

    def close(self) -> None:
        self.conn.close()

    def as_host(self, host: Host) -> HostSession:
        """The same connection, for the host as a release sees it (its own venv, say)."""
        return replace(self, host=host)

    # ------------------------------------------------------------------ commands
    def run(self, command: str, timeout: float = 120.0) -> CommandResult:
        return run(self.conn, self.host, command, timeout=timeout)

    def sh(self, command: str, timeout: float = 120.0, check: bool = True) -> str:
        """Its stdout; ServiceError naming the command when it fails and `check`."""
        return service.checked(self.name, self.run(command, timeout=timeout), check)

    def remove(self, path: str, check: bool = True) -> None:
        self.sh(f"rm -f -- {shlex.quote(path)}", check=check)

    def said(self, command: str, timeout: float) -> tuple[int, str]:
        """The command's exit status and the last of what it printed (stdout, then stderr), for one line."""
        res = self.run(command, timeout=timeout)
        return res.exited, (res.stdout + res.stderr).strip()[-300:]

    def boot_id(self) -> str:
        """The kernel's id of this boot: it differs after a reboot. A read that fails or answers what is no boot
        id (a shell killed mid-shutdown) raises: it is no new boot."""
        exited, out = self.said(BOOT_ID, timeout=10)
        if exited != 0 or not _BOOT_ID.fullmatch(out):
            raise service.ServiceError(f"{self.name}: `{BOOT_ID}` answered {one_line(out, 60)!r} (exit {exited})")
        return out

    def reboot(self) -> tuple[int, str]:
        """`systemctl reboot`: its exit status and what it said (the link may drop before either comes)."""
        return self.said("systemctl reboot", timeout=20)

    # ------------------------------------------------------------------ files
    def any_exists(self, *paths: str) -> bool:
        """Whether any of `paths` exists on the host (a command that fails raises)."""
        tests = " -o ".join(f"-e {shlex.quote(p)}" for p in paths)
        return self.sh(f"if [ {tests} ]; then echo yes; fi").strip() == "yes"

    def read(self, path: str) -> bytes | None:
        return service.read_file(self.conn, self.host, path)

    def write_atomic(self, path: str, data: bytes, mode: int, keep: bool = False) -> None:
        """`keep`: what stood there stays beside it, for put_back_kept (fleet.host.service.write_atomic)."""
        service.write_atomic(self.conn, self.host, path, data, mode, keep=keep)

    def put_back_kept(self, path: str, want: str) -> bool:
        """`path` back to the copy a keeping write left of it with sha256 `want`, by rename; False: no such copy."""
        return service.put_back_kept(self.conn, self.host, path, want)

    def drop_kept(self, paths: list[str]) -> None:
        service.drop_kept(self.conn, self.host, paths)

    # ------------------------------------------------------------------ systemd
    def unit_state(self, unit: str) -> dict[str, str]:
        return service.parse_unit_state(self.sh(service.unit_show(unit), check=False))

    def unit_running(self, unit: str) -> bool:
        """Running, or trying to (a Restart= loop between its tries counts)."""
        return self.unit_state(unit).get("ActiveState") in RUNNING

    def is_active(self, unit: str) -> str:
        """`systemctl is-active`: active, activating, inactive, failed ...; "" when systemctl answered nothing (a
        failed command is no answer, never "inactive"); what a host sends is bounded to one printable line."""
        return one_line(self.run(f"systemctl is-active {shlex.quote(unit)}", timeout=60).stdout, 80)

    def unit_text(self, unit: str) -> str | None:
        """`systemctl cat` of the unit: its file wherever it is, then its drop-ins, as systemd runs it; None where
        systemctl said nothing or knows no such unit (`No files found for`). ServiceError where it failed otherwise
        (no bus): never read as a unit without drop-ins."""
        command = f"systemctl cat -- {shlex.quote(unit)}.service"
        res = service.asked_twice(lambda: self.run(command, timeout=60), _said_cat)
        if _said_cat(res):
            return res.stdout if res.ok and res.stdout.strip() else None
        return service.checked(self.name, res) or None  # raises: it failed twice

    def disable_unit(self, unit: str) -> None:
        """`systemctl disable`, never failing (a unit already gone is disabled)."""
        self.sh(f"systemctl disable {shlex.quote(unit)} 2>/dev/null; true")

    def enable_unit(self, unit: str) -> None:
        """`systemctl enable`: started at boot (WantedBy= of its [Install] section)."""
        self.sh(f"systemctl enable --quiet {shlex.quote(unit)}")

    def unit_file_states(self, units: list[str]) -> dict[str, str]:
        """`systemctl is-enabled` of each unit (enabled, disabled, masked, not-found ...; "" when systemctl
        answered nothing), in one round trip; what a host sends is bounded to one printable word."""
        out = self.sh("for u in " + " ".join(shlex.quote(u) for u in units) + "; do "
                      's=$(systemctl is-enabled "$u" 2>/dev/null); printf \'%s\\n\' "${s%%[[:space:]]*}"; done',
                      timeout=60, check=False)
        lines = out.splitlines()
        return {u: one_line(lines[i], 40) if i < len(lines) else "" for i, u in enumerate(units)}

    def daemon_reload(self) -> None:
        self.sh("systemctl daemon-reload")

    def stop_and_empty_gpus(self, unit: str, budget: float, log: Callable[[str], None]) -> list[service.GpuApp]:
        """The unit stopped and its processes off the GPUs (fleet.host.service.stop_and_empty_gpus)."""
        return service.stop_and_empty_gpus(self.conn, self.host, unit, budget, log)

    def start(self, unit: str, timeout: float = 120.0, check: bool = True) -> None:
        """fleet's start is deliberate: a start limit left by a crash loop (an enabled unit that failed at boot on
        a lost GPU, Restart= on) is cleared first, as restart_unit does, or systemd refuses the start."""
        self.sh(f"systemctl reset-failed {shlex.quote(unit)} 2>/dev/null || true", timeout=timeout, check=False)
        self.sh(f"systemctl start {shlex.quote(unit)}", timeout=timeout, check=check)

    def stop(self, unit: str, timeout: float = 120.0) -> None:
        self.sh(f"systemctl stop {shlex.quote(unit)}", timeout=timeout, check=False)

    # ------------------------------------------------------------------ GPUs
    def gpu_processes(self, index: int) -> tuple[int, str]:
        """`nvidia-smi`'s compute processes on GPU `index` (their pids, one a line)."""
        return self.said(f"nvidia-smi --query-compute-apps=pid --format=csv,noheader -i {int(index)}", timeout=60)

    def gpu_persistence(self, index: int, on: bool) -> tuple[int, str]:
        return self.said(f"nvidia-smi -pm {int(on)} -i {int(index)}", timeout=60)

    def gpu_reset(self, index: int) -> tuple[int, str]:
        """`nvidia-smi -r`: the driver resets GPU `index`, or says why not."""
        return self.said(f"nvidia-smi -r -i {int(index)}", timeout=120)

    # ------------------------------------------------------------------ the host lock
    def acquire_lock(self, purpose: str) -> hostlock.Lock:
        return hostlock.acquire(self.conn, self.host, purpose)

    def release_lock(self, lock: hostlock.Lock) -> None:
        hostlock.release(self.conn, self.host, lock)

    # ------------------------------------------------------------------ facts
    def probe(self, say: Progress = quiet) -> HostFacts:
        return probe_run.probe_on(self.conn, self.host, say)

    def lost(self, where: str, exc: BaseException | None = None) -> None:
        """Raise ConnectionLost when the link died under `exc` (the keepalive watchdog, a dropped transport)."""
        lost_link(self.conn, self.host, where, exc)


def _said_cat(res: CommandResult) -> bool:
    """`systemctl cat` answered: the unit's text, or that it knows no such unit."""
    return res.ok or "No files found for" in res.stderr + res.stdout
