"""A host session that answers from a script, as fabric's MockRemote does for a Connection: what fleet sent is
logged, in order, and nothing is patched into a module. Every command verb of HostSession goes through `run`, so
`answer` (a command -> (exit code, output)) answers them all; the lock, the probe and files are kept here."""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from fleet.deploy.hostrun import HostRun
from fleet.host import lock as hostlock
from fleet.host.facts import HostFacts
from fleet.host.service import GpuApp, sha256
from fleet.host.session import HostSession
from fleet.inventory import Host
from fleet.ssh.remote import CommandResult

HOST = Host(name="h1", address="127.0.0.1", port=22, user="u", become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(), source=Path("/x/inv.yaml"))

Answer = Callable[[str], tuple[int, str]]


def ok(command: str) -> tuple[int, str]:
    return 0, ""


class FakeSession(HostSession):
    """`sent`: every command, and `lock PURPOSE` / `unlock` / `write PATH` / `put back PATH` / `drop kept PATHS` /
    `close`, in the order fleet made them. `files` and `kept`: the host's files and the copies keeping writes left.
    `log`: shared with the other sessions a test opens (a reconnect after a reboot lands in the same list)."""

    def __init__(self, host: Host = HOST, answer: Answer = ok, facts: Iterable[HostFacts] = (),
                 log: list[str] | None = None, lock_error: Exception | None = None,
                 files: dict[str, bytes] | None = None) -> None:
        super().__init__(conn=None, host=host)
        self.answer, self.lock_error = answer, lock_error
        self.facts: Iterator[HostFacts] = iter(facts)
        self.sent = log if log is not None else []
        self.files = files if files is not None else {}  # shared: a host's files outlive a session
        self.kept: dict[tuple[str, str], bytes] = {}  # (path, sha256): what a keeping write left beside it

    def run(self, command: str, timeout: float = 120.0) -> CommandResult:
        self.sent.append(command)
        exited, out = self.answer(command)
        return CommandResult(command=command, exited=exited, stdout=out, stderr="")

    def read(self, path: str) -> bytes | None:
        return self.files.get(path)

    def write_atomic(self, path: str, data: bytes, mode: int, keep: bool = False) -> None:
        self.sent.append(f"write {path}")
        if keep and path in self.files:
            self.kept[(path, sha256(self.files[path]))] = self.files[path]
        self.files[path] = data

    def put_back_kept(self, path: str, want: str) -> bool:
        if (path, want) not in self.kept:
            return False
        self.sent.append(f"put back {path}")
        self.files[path] = self.kept.pop((path, want))
        return True

    def drop_kept(self, paths: list[str]) -> None:
        self.sent.append(f"drop kept {' '.join(paths)}")
        self.kept = {k: v for k, v in self.kept.items() if k[0] not in paths}

    def stop_and_empty_gpus(self, unit: str, budget: float, log: Callable[[str], None]) -> list[GpuApp]:
        """The stop goes through `run`; the GPUs are empty at once."""
        self.sh(f"systemctl stop {unit} || true", check=False)
        return []

    def remove(self, path: str, check: bool = True) -> None:
        super().remove(path, check)  # the command is sent (and may fail) as on a host
        self.files.pop(path, None)

    def acquire_lock(self, purpose: str) -> hostlock.Lock:
        self.sent.append(f"lock {purpose}")
        if self.lock_error is not None:
            raise self.lock_error
        return hostlock.Lock(self.host.name, "t" * 32, {})

    def release_lock(self, lock: hostlock.Lock) -> None:
        self.sent.append("unlock")

    def probe(self, say=None) -> HostFacts:
        return next(self.facts)

    def as_host(self, host: Host) -> HostSession:
        """The same session (its log, files and answers), for the host as a release sees it (its own venv)."""
        twin = copy.copy(self)
        twin.host = host
        return twin

    def close(self) -> None:
        self.sent.append("close")

    def lost(self, where: str, exc: BaseException | None = None) -> None:
        pass

    def __repr__(self) -> str:
        return f"FakeSession({self.host.name}, {len(self.sent)} sent)"


def here(command: str) -> tuple[int, str]:
    """A command run on this machine, in sh, as a host would run it (its stderr with its stdout when it fails)."""
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30)
    return done.returncode, done.stdout + done.stderr if done.returncode else done.stdout


class Here(FakeSession):
    """A session on this machine: its commands run here (`answer`: `here` unless a test gives another), its files
    are this machine's (a temporary folder standing in for /var/lib/fleet)."""

    def __init__(self, host: Host = HOST, answer: Answer = here) -> None:
        super().__init__(host, answer=answer)

    def read(self, path: str) -> bytes | None:
        return Path(path).read_bytes() if Path(path).exists() else None

    def write_atomic(self, path: str, data: bytes, mode: int, keep: bool = False) -> None:
        Path(path).write_bytes(data)


def host_run(session: HostSession | None = None, opened: Callable[..., Any] | None = None) -> HostRun:
    """A run as fleet.deploy.hostrun hands it to a body (the lock taken, nothing recovered) on `session`;
    `opened`: what opens its release runs (a stand-in's `open`), else the real ReleaseRun."""
    session = session or FakeSession()

    class Run(HostRun):
        def open_release(self, store: Any, release: Any, **what: Any) -> Any:
            if opened is None:
                return super().open_release(store, release, **what)
            run = opened(store, release, **what)
            self.releases.append(run)
            return run

    return Run(session, hostlock.Lock(session.host.name, "t" * 32, {}), None, lambda m: None)


def opener(*sessions: FakeSession) -> Callable[[Host, Any], HostSession]:
    """What `recover(..., sessions=)` opens: the given sessions in turn (a reconnect after a reboot is the next)."""
    left = iter(sessions)

    def open_session(host: Host, opts: Any) -> HostSession:
        return next(left)

    return open_session
