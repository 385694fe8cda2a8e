"""The sglang unit on a host: files written atomically, systemd driven, GPUs emptied, the journal followed.

Everything here is I/O over one Fabric connection; what the output means is decided elsewhere.
"""

from __future__ import annotations

import errno
import hashlib
import posixpath
import shlex
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass

from fabric import Connection

from fleet.errors import FleetError
from fleet.inventory import Host
from fleet.remote import run


class ServiceError(FleetError):
    pass


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_file(conn: Connection, path: str) -> bytes | None:
    """The file's bytes, or None when it does not exist."""
    sftp = conn.sftp()
    try:
        with sftp.open(path, "rb") as f:
            data: bytes = f.read()
            return data
    except FileNotFoundError:
        return None
    except OSError as exc:
        if getattr(exc, "errno", None) == 2:
            return None
        raise


def write_atomic(conn: Connection, path: str, data: bytes, mode: int) -> None:
    """Never half a file, never a secret readable on the way, the owner kept:
    - a symlink at `path` is refused (fleet replaces plain files only; it does not write through links);
    - a temp file in the same folder, created exclusively (O_EXCL), its mode set before any data;
    - the old file's owner and group given to it (root's when there was none);
    - the data fsync'd, the temp renamed over the target, the folder fsync'd (`sync FILE`, one command)."""
    sftp = conn.sftp()
    folder = posixpath.dirname(path)
    try:
        old = sftp.lstat(path)
    except OSError as exc:
        if getattr(exc, "errno", None) != errno.ENOENT and not isinstance(exc, FileNotFoundError):
            raise ServiceError(f"writing {path}: {exc}; the old file is untouched") from None
        old = None
    if old is not None and old.st_mode is not None and stat.S_ISLNK(old.st_mode):
        raise ServiceError(f"writing {path}: it is a symlink; fleet replaces only plain files (remove the link "
                           "or point the setting at the real file); nothing was written")
    tmp = posixpath.join(folder, f".{posixpath.basename(path)}.fleet-{time.monotonic_ns()}")
    try:
        with sftp.open(tmp, "wbx") as f:
            f.chmod(mode)  # before the data: a secret never sits in a world-readable file
            if old is not None and old.st_uid is not None and old.st_gid is not None:
                f.chown(old.st_uid, old.st_gid)
            f.write(data)
            f.flush()
        q = shlex.quote
        res = conn.run(f"sync {q(tmp)} && mv -fT {q(tmp)} {q(path)} && sync {q(folder)}", hide=True, warn=True,
                       in_stream=False, timeout=60)
        if not res.ok:
            raise OSError((res.stderr or res.stdout).strip() or f"exit {res.exited}")
    except OSError as exc:
        try:
            sftp.remove(tmp)
        except OSError:
            pass
        raise ServiceError(f"writing {path}: {exc}{_space_left(conn, folder)}; the old file is untouched") from None


def _space_left(conn: Connection, folder: str) -> str:
    """SFTP reports a full disk as a bare "Failure": say so when the folder's filesystem is (nearly) full."""
    res = conn.run(f"df -Pk {shlex.quote(folder)} | tail -n 1", hide=True, warn=True, in_stream=False, timeout=30)
    bits = res.stdout.split()
    if len(bits) >= 6 and bits[3].isdigit() and int(bits[3]) < 64:
        return f" (no space left on device: {bits[3]} KiB free on {bits[5]})"
    return ""


def sh(conn: Connection, host: Host, command: str, timeout: float | None = 120, check: bool = True) -> str:
    res = run(conn, host, command, timeout=timeout)
    if check and not res.ok:
        detail = (res.stderr or res.stdout).strip().splitlines()
        raise ServiceError(f"{host.name}: `{command[:80]}` failed (exit {res.exited}): "
                           f"{detail[-1] if detail else 'no output'}")
    return res.stdout


@dataclass
class GpuApp:
    pid: int
    name: str
    used_mib: int | None


def parse_compute_apps(text: str) -> list[GpuApp]:
    """`nvidia-smi --query-compute-apps=pid,process_name,used_gpu_memory --format=csv,noheader,nounits`."""
    apps = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        used = parts[-1]
        apps.append(GpuApp(pid=int(parts[0]), name=",".join(parts[1:-1]),
                           used_mib=int(used) if used.isdigit() else None))
    return apps


def gpu_apps(conn: Connection, host: Host) -> list[GpuApp]:
    out = sh(conn, host, "nvidia-smi --query-compute-apps=pid,process_name,used_gpu_memory "
                         "--format=csv,noheader,nounits")
    return parse_compute_apps(out)


def stop_and_empty_gpus(conn: Connection, host: Host, unit: str, budget: float,
                        log: Callable[[str], None]) -> list[GpuApp]:
    """Stop the unit, wait for the GPUs to empty; kill (TERM, then KILL) what is left. Returns what was killed."""
    sh(conn, host, f"systemctl stop {shlex.quote(unit)} || true", timeout=budget + 30)
    deadline = time.monotonic() + budget
    killed: list[GpuApp] = []
    signal = "TERM"
    while apps := gpu_apps(conn, host):
        if time.monotonic() > deadline:
            raise ServiceError(f"{host.name}: GPUs still busy after {budget:.0f}s: "
                               + ", ".join(f"{a.pid} {a.name}" for a in apps))
        log(f"GPU still held by {len(apps)} process(es) the unit left behind: "
            + ", ".join(f"{a.pid} ({a.name}, {a.used_mib} MiB)" for a in apps) + f"; sending SIG{signal}")
        killed += [a for a in apps if a.pid not in {k.pid for k in killed}]
        sh(conn, host, "kill -" + signal + " " + " ".join(str(a.pid) for a in apps) + " 2>/dev/null; true")
        signal = "KILL"
        time.sleep(0.5)
    return killed


def daemon_reload(conn: Connection, host: Host) -> None:
    sh(conn, host, "systemctl daemon-reload")


def verify_unit(conn: Connection, host: Host, path: str) -> str | None:
    """`systemd-analyze verify` where present: its complaint, or None."""
    res = run(conn, host, f"command -v systemd-analyze >/dev/null || exit 0; "
                          f"systemd-analyze verify {shlex.quote(path)} 2>&1")
    out = res.stdout.strip()
    return out if (res.exited != 0 and out) else None


def verify_unit_text(conn: Connection, host: Host, text: str, unit_path: str) -> str | None:
    """`systemd-analyze verify` of a unit not installed yet, in a private temporary folder under the unit's
    own name: its complaint, or None. Nothing else on the host changes."""
    res = run(conn, host, "mktemp -d /tmp/fleet-verify.XXXXXXXX")
    folder = res.stdout.strip()
    if not res.ok or not folder.startswith("/tmp/fleet-verify."):
        raise ServiceError(f"{host.name}: cannot make a temporary folder to verify the unit: {res.stderr.strip()}")
    try:
        path = posixpath.join(folder, posixpath.basename(unit_path))
        with conn.sftp().open(path, "wb") as f:
            f.write(text.encode())
        return verify_unit(conn, host, path)
    finally:
        run(conn, host, f"rm -rf {shlex.quote(folder)}")


def unit_state(conn: Connection, host: Host, unit: str) -> dict[str, str]:
    out = sh(conn, host, f"systemctl show {shlex.quote(unit)} -p ActiveState -p SubState -p MainPID "
                         f"-p ExecMainStatus -p Result", check=False)
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
