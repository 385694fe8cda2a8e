"""The host lock: one fleet operation that changes a host (patch, deploy, rollback, tune) at a time.

The lock is a directory, /var/lib/fleet/lock, made with `mkdir` (atomic: exactly one caller wins),
holding owner.json: who (user@machine), pid, what for, when, and a token. A second caller fails fast
with an error naming the holder. Release removes the lock only when the token is ours.

A lock whose owner is provably dead (it ran on this machine, by host name and machine-id, and the machine
has rebooted since, or its pid is gone or now belongs to a process started later) is recovered: removed by
its token and taken, and the Lock says so. Any other lock is never broken silently: when it is older than
STALE_AFTER_S the error says it looks stale and how to remove it (`inv unlock`, given the token the error
shows).
"""

from __future__ import annotations

import getpass
import json
import os
import re
import shlex
import socket
import time
import uuid
from dataclasses import dataclass, fields
from enum import Enum

from fabric import Connection

from fleet.errors import FleetError, InputError
from fleet.inventory import Host
from fleet.ssh import remote

LOCK_DIR = "/var/lib/fleet/lock"
STALE_AFTER_S = 6 * 3600


class HostLockError(FleetError):
    """The host is locked by someone else (or the lock could not be taken)."""


_TOKEN = re.compile(r"[0-9a-f]{32}")  # uuid4().hex, as LockOwner.mine writes it
PID_MAX = 1 << 22  # the kernel's highest pid_max
_NUMBERS = frozenset({"pid", "pid_start", "epoch"})  # LockOwner's int fields; the others are texts


@dataclass(frozen=True)
class LockOwner:
    """Who holds a host lock: owner.json, as this run writes it (mine) or as a host sent it (from_json).

    The field order is owner.json's key order. From a host, every field is None unless it has its type:
    texts bounded, a pid the kernel could have, a token of mine's shape. The token goes into a path on the
    host and the pid to os.kill here: neither is taken as the host wrote it."""

    owner: str | None = None  # user@machine
    machine: str | None = None
    machine_id: str | None = None
    boot_id: str | None = None
    pid: int | None = None
    pid_start: int | None = None  # clock ticks since boot: tells a reused pid apart
    purpose: str | None = None
    time: str | None = None
    epoch: int | None = None
    token: str | None = None

    @classmethod
    def mine(cls, purpose: str) -> LockOwner:
        try:
            user = getpass.getuser()
        except Exception:  # no passwd entry (containers)
            user = str(os.getuid())
        return cls(f"{user}@{socket.gethostname()}", socket.gethostname(), _read_id("/etc/machine-id"),
                   _read_id("/proc/sys/kernel/random/boot_id"), os.getpid(), _started(os.getpid()), purpose,
                   time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), int(time.time()), uuid.uuid4().hex)

    def to_json(self) -> dict[str, str | int | None]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, text: str) -> LockOwner | None:
        """owner.json's text as the host sent it; None for what is no JSON object at all."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            return None
        if not isinstance(data, dict):
            return None
        got: dict[str, str | int | None] = {}
        for f in fields(cls):
            value = data.get(f.name)
            if f.name in _NUMBERS:
                ok = isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1 << 62
                got[f.name] = value if ok else None
            else:
                got[f.name] = value[:200] if isinstance(value, str) else None
        if not (isinstance(got["pid"], int) and 0 < got["pid"] <= PID_MAX):
            got["pid"] = None
        if not _TOKEN.fullmatch(str(got["token"] or "")):
            got["token"] = None
        return cls(**got)  # type: ignore[arg-type]  # each value checked against its field's type above


@dataclass(frozen=True)
class Lock:
    """A host lock this run holds: its token, the owner.json it wrote, and the dead run's lock it replaced."""

    host: str
    token: str
    owner: LockOwner
    recovered: str | None = None  # the dead owner's lock this one replaced, described


def whoami() -> str:
    """user@machine of this fleet run, as locks and manifests record it."""
    return str(LockOwner.mine("").owner)


def _read_id(path: str) -> str | None:
    """/etc/machine-id or the kernel's boot_id; None where the machine has none (some containers)."""
    try:
        with open(path) as f:
            return f.read().strip() or None
    except OSError:
        return None


def _started(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22): tells a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def dead_owner(owner: LockOwner | None) -> str | None:
    """Why the lock's owner is provably gone, or None when it may still run. Only positive evidence counts:
    the owner ran on this very machine (its machine id recorded and equal to ours: a host name alone is shared
    by clones and containers) and either the machine has rebooted since (another boot id), or, in this boot, its
    pid is gone or now belongs to a process that started at another time."""
    if owner is None or owner.machine != socket.gethostname() or owner.pid is None:
        return None
    machine_id = _read_id("/etc/machine-id")
    if not owner.machine_id or not machine_id or owner.machine_id != machine_id:
        return None  # another machine, maybe one with the same host name: its runs are not ours to judge
    boot_id = _read_id("/proc/sys/kernel/random/boot_id")
    if owner.boot_id and boot_id and owner.boot_id != boot_id:
        return f"{owner.machine} has rebooted since it took the lock"
    if not owner.boot_id or not boot_id:
        return None  # no boot id on one side: a pid cannot be judged across a reboot we cannot see
    pid = owner.pid
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"pid {pid} is no longer running on {owner.machine}"
    except PermissionError:
        pass
    now_started = _started(pid)
    if owner.pid_start is not None and now_started is not None and now_started != owner.pid_start:
        return f"pid {pid} on {owner.machine} is now another process"
    return None


TOKEN = re.compile(r"[A-Za-z0-9_-]{1,128}")  # fleet's own are 32 hex digits (uuid4)


def token_problem(token: str) -> str | None:
    """Why `token` cannot be a lock's token: None when it can. Compared whole, never as a pattern."""
    return None if TOKEN.fullmatch(token) else (f"--token {token!r} is not a lock token (letters, digits, - and _, "
                                                "as the lock error shows it)")


def _token_test(token: str, path: str) -> str:
    """A shell test true when the owner file at `path` carries exactly this token (json.dumps' spelling)."""
    return f"grep -qF -- {shlex.quote(json.dumps({'token': token})[1:-1])} {path} 2>/dev/null"


def _or_unknown(value: str | int | None) -> str | int:
    return "?" if value is None else value


def describe(owner: LockOwner | None, now: float | None = None, host: str = "<host>") -> str:
    """One phrase naming the holder, and why the lock looks stale if it does (with the `inv unlock` that removes
    it, for `host`)."""
    if owner is None:
        return "held by an unknown owner (owner.json missing or unreadable: a run may be starting or crashed)"
    if owner == LockOwner():  # read, but no field of it is one fleet writes (a hostile or foreign owner.json)
        return "held by an unknown owner (its owner.json names no pid, user or time fleet takes: check it by hand)"
    text = (f"held by {_or_unknown(owner.owner)} pid {_or_unknown(owner.pid)} for {_or_unknown(owner.purpose)} "
            f"since {_or_unknown(owner.time)}")
    now = time.time() if now is None else now
    dead = dead_owner(owner)
    stale = [dead] if dead else []
    if owner.epoch is not None and now - owner.epoch > STALE_AFTER_S:
        stale.append(f"it is {(now - owner.epoch) / 3600:.1f} h old")
    if stale:
        text += (f"; looks STALE ({', '.join(stale)}): if no fleet run is active, remove it with "
                 f"`inv unlock --host {host} --token {_or_unknown(owner.token)}`")
    return text


def acquire(conn: Connection, host: Host, purpose: str) -> Lock:
    """Take the host's lock, recovering it from a provably dead owner, or raise HostLockError naming the
    holder. One round trip (three when a dead owner's lock is recovered)."""
    try:
        return _acquire(conn, host, purpose)
    except _Held as held:
        why, o = dead_owner(held.owner), held.owner or LockOwner()
        if not why or not o.token or not _take_over(conn, host, o.token):
            raise HostLockError(str(held)) from None
        lock = _acquire(conn, host, purpose)  # a live rival that won the race in between still wins
        return Lock(lock.host, lock.token, lock.owner,
                    recovered=f"recovered the lock of a dead run: {_or_unknown(o.owner)} pid {o.pid} for "
                              f"{_or_unknown(o.purpose)} since {_or_unknown(o.time)} ({why})")


class _Held(HostLockError):
    def __init__(self, message: str, owner: LockOwner | None):
        super().__init__(message)
        self.owner = owner


def _acquire(conn: Connection, host: Host, purpose: str) -> Lock:
    me = LockOwner.mine(purpose)
    parent = os.path.dirname(LOCK_DIR)
    d, o = shlex.quote(LOCK_DIR), shlex.quote(f"{LOCK_DIR}/owner.json")
    cmd = (f"mkdir -p {shlex.quote(parent)} || exit 3; "
           f"if mkdir {d} 2>/dev/null; then if printf '%s\\n' {shlex.quote(json.dumps(me.to_json()))} > {o}.tmp "
           f"&& mv {o}.tmp {o}; then echo ACQUIRED; else rm -rf {d}; exit 4; fi; "  # never a lock without owner
           # no owner.json yet: a rival between its mkdir and mv; give it up to a second to name itself
           f"else echo HELD; for i in 1 2 3 4 5 6 7 8 9 10; do cat {o} 2>/dev/null && break; sleep 0.1; done; "
           "true; fi")
    res = remote.run(conn, host, cmd, timeout=30)
    out = res.stdout.strip()
    if res.ok and out == "ACQUIRED":
        return Lock(host.name, str(me.token), me)
    if res.ok and out.startswith("HELD"):
        owner = LockOwner.from_json(out[4:].strip() or "null")
        raise _Held(f"{host.name}: host is locked ({LOCK_DIR}) {describe(owner, host=host.name)}", owner)
    raise HostLockError(f"{host.name}: cannot take the host lock {LOCK_DIR} (exit {res.exited}): "
                        f"{(res.stderr or res.stdout).strip()[:300]}")


def read_owner(conn: Connection, host: Host) -> LockOwner | None:
    res = remote.run(conn, host, f"cat {shlex.quote(LOCK_DIR + '/owner.json')} 2>/dev/null", timeout=30)
    return LockOwner.from_json(res.stdout) if res.ok and res.stdout.strip() else None


def _remove_if_token(conn: Connection, host: Host, token: str) -> bool:
    o = shlex.quote(f"{LOCK_DIR}/owner.json")
    if token_problem(token):
        return False
    cmd = (f"if {_token_test(token, o)}; then rm -rf {shlex.quote(LOCK_DIR)} && echo RELEASED; "
           f"else echo NOTOURS; fi")
    res = remote.run(conn, host, cmd, timeout=30)
    return res.ok and res.stdout.strip() == "RELEASED"


def _take_over(conn: Connection, host: Host, token: str) -> bool:
    """Move a dead owner's lock aside in one rename, to a name made of its token, and keep it there.

    rename(2) is atomic, and it cannot replace a non-empty folder: of several runs taking over the same dead
    lock at once, one rename succeeds and the others fail, also after the winner has taken a new lock (the
    moved-aside folder still holds the target name). A rename that caught a lock that is not the dead one
    (taken in between) puts it back. Folders moved aside more than an hour ago are removed."""
    if token_problem(token):
        return False
    d = shlex.quote(LOCK_DIR)
    aside = shlex.quote(f"{LOCK_DIR}.dead-{token}")
    parent, base = shlex.quote(os.path.dirname(LOCK_DIR)), shlex.quote(os.path.basename(LOCK_DIR) + ".dead-*")
    cmd = (f"find {parent} -maxdepth 1 -name {base} -mmin +60 -exec rm -rf {{}} + 2>/dev/null; "
           f"mv -T {d} {aside} 2>/dev/null || {{ echo LOST; exit 0; }}; "
           f"if {_token_test(token, aside + '/owner.json')}; then echo TAKEN; "
           f"else mv -T {aside} {d} 2>/dev/null; echo NOTDEAD; fi")
    res = remote.run(conn, host, cmd, timeout=30)
    return res.ok and res.stdout.strip() == "TAKEN"


def release(conn: Connection, host: Host, lock: Lock) -> None:
    """Remove the lock if it is still ours; HostLockError if someone else's lock is there now."""
    if not _remove_if_token(conn, host, lock.token):
        raise HostLockError(f"{host.name}: lock {LOCK_DIR} is no longer ours at release; "
                            f"now {describe(read_owner(conn, host), host=host.name)}")


class Unlocked(Enum):
    """What `inv unlock` did: removed the lock, or found none (nothing to do: exit 0, as docs/cli.md says)."""

    REMOVED = "removed"
    NOT_LOCKED = "not locked"


def break_lock(conn: Connection, host: Host, token: str) -> Unlocked:
    """Remove a (stale) lock whose token the operator has read from the error: never someone else's new one.
    The token must be a whole token and equal to the owner's (no part of it, no pattern)."""
    if (why := token_problem(token)):
        raise InputError(f"{host.name}: {why}; nothing was changed")
    if _remove_if_token(conn, host, token):
        return Unlocked.REMOVED
    if not remote.run(conn, host, f"test -e {shlex.quote(LOCK_DIR)}", timeout=30).ok:
        return Unlocked.NOT_LOCKED
    raise HostLockError(f"{host.name}: lock {LOCK_DIR} does not carry token {token}; "
                        f"now {describe(read_owner(conn, host), host=host.name)}")
