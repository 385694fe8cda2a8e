"""The sglang unit on a host: files written atomically, systemd driven, GPUs emptied, the journal followed.

Everything here is I/O over one Fabric connection; what the output means is decided elsewhere.
"""

from __future__ import annotations

import hashlib
import posixpath
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass

from fabric import Connection

from fleet.errors import FleetError
from fleet.host import programs as hostside
from fleet.inventory import Host
from fleet.ssh.remote import run, run_bytes


class ServiceError(FleetError):
    pass


READ_MAX = 16 << 20  # the files fleet reads back (units, env files, keys, manifests) are far smaller


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_file(conn: Connection, host: Host, path: str) -> bytes | None:
    """The file's bytes, or None when it does not exist; read as root on a become host. A file the reader
    may not see (a folder it cannot enter) is an error, not a missing file."""
    res = run_bytes(conn, host, f"LC_ALL=C cat -- {shlex.quote(path)}", timeout=120, max_output=READ_MAX)
    if res.exited == 0:
        return res.stdout
    why = res.stderr.decode("utf-8", "replace").strip().splitlines()
    if res.exited == 1 and why and why[-1].endswith(": No such file or directory"):
        return None
    raise ServiceError(f"{host.name}: reading {path}: {why[-1] if why else f'exit {res.exited}'}")


def write_atomic(conn: Connection, host: Host, path: str, data: bytes, mode: int) -> None:
    """`path` becomes `data`, or stays as it was (fleet/host/programs/write.sh: temp file in the same folder, mode
    before data, owner kept, synced, renamed; symlinks refused). The data travels on stdin, never in a command
    line; on a become host it is written as root."""
    res = run_bytes(conn, host, hostside.sh_command("write.sh", path, f"{mode:04o}"), data, timeout=120)
    if res.exited != 0:
        why = res.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = why[-1] if why else f"exit {res.exited}"
        if res.exited == 65:
            raise ServiceError(f"writing {path}: {detail}; nothing was written")
        raise ServiceError(f"writing {path}: {detail}{_space_left(conn, host, posixpath.dirname(path))}; "
                           "the old file is untouched")


def _space_left(conn: Connection, host: Host, folder: str) -> str:
    """Say so when the folder's filesystem is (nearly) full: the likeliest reason a write failed."""
    res = run(conn, host, f"df -Pk {shlex.quote(folder)} | tail -n 1", timeout=30)
    bits = res.stdout.split()
    if len(bits) >= 6 and bits[3].isdigit() and int(bits[3]) < 64:
        return f" (no space left on device: {bits[3]} KiB free on {bits[5]})"
    return ""


def sh(conn: Connection, host: Host, command: str, timeout: float = 120, check: bool = True) -> str:
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
        write_atomic(conn, host, path, text.encode(), 0o644)
        return verify_unit(conn, host, path)
    finally:
        run(conn, host, f"rm -rf {shlex.quote(folder)}")


def unit_state(conn: Connection, host: Host, unit: str) -> dict[str, str]:
    out = sh(conn, host, f"systemctl show {shlex.quote(unit)} -p ActiveState -p SubState -p MainPID "
                         f"-p ExecMainStatus -p Result", check=False)
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
