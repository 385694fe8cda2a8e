"""The sglang unit on a host: files written atomically, systemd driven, GPUs emptied, the journal followed.

Everything here is I/O over one Fabric connection; what the output means is decided elsewhere.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from fabric import Connection

from fleet.errors import FleetError
from fleet.host import programs as hostside
from fleet.inventory import Host
from fleet.ssh.remote import MAX_OUTPUT, CommandResult, CommandTimedOut, OutputTooLarge, run, run_bytes


class Shell(Protocol):
    """What runs a command on a host and answers its stdout: a host session (fleet.host.session), a release
    store's files (fleet.host.releases.HostFiles); a fake of either in tests."""

    def sh(self, command: str, timeout: float = 120.0, check: bool = True) -> str: ...


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


def write_atomic(conn: Connection, host: Host, path: str, data: bytes | BinaryIO, mode: int, keep: bool = False,
                 timeout: float = 120) -> None:
    """`path` becomes `data`, or stays as it was (fleet/host/programs/write.sh: temp file in the same folder, mode
    before data, owner kept, synced, renamed; symlinks refused). The data travels on stdin, never in a command
    line; on a become host it is written as root. `keep`: the old file stays beside it as a hardlink named by its
    sha256, for `put_back_kept` (a served unit or env file)."""
    args = (path, f"{mode:04o}", *(("keep",) if keep else ()))
    res = run_bytes(conn, host, hostside.sh_command("write.sh", *args), data, timeout=timeout)
    if res.exited != 0:
        why = res.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = why[-1] if why else f"exit {res.exited}"
        if res.exited == 65:
            raise ServiceError(f"writing {path}: {detail}; nothing was written")
        raise ServiceError(f"writing {path}: {detail}{_space_left(conn, host, posixpath.dirname(path))}; "
                           "the old file is untouched")


KEPT = ".kept-by-fleet."  # write.sh's kept copies: FOLDER/.BASE.kept-by-fleet.SHA256
_SHA256 = re.compile(r"[0-9a-f]{64}")


def put_back_kept(conn: Connection, host: Host, path: str, want: str) -> bool:
    """`path` back to the copy write.sh kept of it with sha256 `want`, by link and rename (no free space needed);
    False when there is no such copy or linking it failed (the caller writes instead). `want` comes from a
    manifest the host sent: anything but 64 lower-case hex digits is no copy."""
    if not _SHA256.fullmatch(want):
        return False
    res = run(conn, host, hostside.sh_command("putback.sh", path, want), timeout=120)
    if res.exited in (3, 74):
        return False
    if res.exited != 0:
        why = (res.stderr or res.stdout).strip().splitlines()
        raise ServiceError(f"putting back {path}: {why[-1] if why else f'exit {res.exited}'}; "
                           "the old file is untouched")
    return True


def drop_kept(conn: Connection, host: Host, paths: list[str]) -> None:
    """Remove the copies write.sh kept of `paths` (once a run has ended, they are not needed)."""
    globs = " ".join(f"{shlex.quote(posixpath.dirname(p))}/{shlex.quote('.' + posixpath.basename(p) + KEPT)}*"
                     for p in paths)
    sh(conn, host, f"rm -f -- {globs}", timeout=60, check=False)


def _space_left(conn: Connection, host: Host, folder: str) -> str:
    """Say so when the folder's filesystem is (nearly) full: the likeliest reason a write failed."""
    res = run(conn, host, f"df -Pk {shlex.quote(folder)} | tail -n 1", timeout=30)
    bits = res.stdout.split()
    if len(bits) >= 6 and bits[3].isdigit() and int(bits[3]) < 64:
        return f" (no space left on device: {bits[3]} KiB free on {bits[5]})"
    return ""


def sh(conn: Connection, host: Host, command: str, timeout: float = 120, check: bool = True) -> str:
    return checked(host.name, run(conn, host, command, timeout=timeout), check)


def checked(host: str, res: CommandResult, check: bool = True) -> str:
    """The command's stdout; ServiceError naming it when it failed and `check`."""
    if check and not res.ok:
        detail = (res.stderr or res.stdout).strip().splitlines()
        raise ServiceError(f"{host}: `{res.command[:80]}` failed (exit {res.exited}): "
                           f"{detail[-1] if detail else 'no output'}")
    return res.stdout


@dataclass
class GpuApp:
    pid: int
    name: str
    used_mib: int | None
    bus_id: str | None = None  # the GPU it holds, as nvidia-smi names it (00000000:01:00.0)
    user: str | None = None  # None: not visible from here (another PID namespace, or gone)
    command: str | None = None
    cgroups: tuple[str, ...] = ()  # /proc/PID/cgroup's paths

    def of_unit(self, unit: str) -> bool:
        """Whether the process runs in the systemd unit's own cgroup (what `systemctl stop` stops)."""
        return any(_in_unit(path, unit) for path in self.cgroups)

    def describe(self) -> str:
        return (f"pid {self.pid} ({(self.command or self.name)[:120]}) of user {self.user or '?'}"
                + (f", {self.used_mib} MiB" if self.used_mib is not None else ""))


def _in_unit(path: str, unit: str) -> bool:
    return f"{unit}.service" in path.split("/")


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


_APPS = "nvidia-smi --query-compute-apps=pid,gpu_bus_id,used_gpu_memory,process_name --format=csv,noheader,nounits"
# Each holder's user, cgroups and command line, from /proc (nothing when the pid is not visible here).
HOLDERS = (f"apps=$({_APPS}) || {{ printf 'nvidia-smi failed (exit %s): %s\\n' \"$?\" \"$(printf '%s' \"$apps\" | "
           "tr '\\n' ' ' | head -c 300)\" >&2; exit 3; }; "
           "printf '%s\\n' \"$apps\"; echo @@; "
           "for p in $(printf '%s\\n' \"$apps\" | cut -d, -f1); do case $p in ''|*[!0-9]*) continue;; esac; "
           "[ -r /proc/$p/cgroup ] || continue; "
           "printf 'P %s\\t%s\\t%s\\t%s\\n' \"$p\" \"$(stat -c %U /proc/$p 2>/dev/null)\" "
           "\"$(cut -d: -f3- /proc/$p/cgroup 2>/dev/null | tr '\\n\\t' '  ')\" "
           "\"$(tr '\\0\\t\\n' '   ' < /proc/$p/cmdline 2>/dev/null | head -c 300)\"; done")


def parse_holders(text: str) -> list[GpuApp]:
    """HOLDERS' output -> every process holding a GPU, with its user, cgroups and command where visible. Pure."""
    apps_text, _, procs = text.partition("@@\n")
    seen: dict[int, tuple[str, tuple[str, ...], str]] = {}
    for line in procs.splitlines():
        bits = line[2:].split("\t") if line.startswith("P ") else []
        if len(bits) == 4 and bits[0].isdigit():
            seen[int(bits[0])] = (bits[1].strip(), tuple(bits[2].split()), bits[3].strip())
    apps = []
    for line in apps_text.splitlines():
        parts = [p.strip() for p in line.split(",", 3)]
        if len(parts) < 4 or not parts[0].isdigit():
            continue
        pid = int(parts[0])
        user, cgroups, command = seen.get(pid, ("", (), ""))
        apps.append(GpuApp(pid=pid, name=parts[3], used_mib=int(parts[2]) if parts[2].isdigit() else None,
                           bus_id=parts[1] or None, user=user or None, command=command or None, cgroups=cgroups))
    return apps


def gpu_holders(conn: Connection, host: Host) -> list[GpuApp]:
    res = run(conn, host, HOLDERS, timeout=120)
    said = res.stderr.strip().splitlines()
    if res.exited == 3 and said and said[-1].startswith("nvidia-smi failed"):  # its words, not fleet's shell
        why = said[-1].strip()
        raise ServiceError(f"{host.name}: listing what holds the GPUs: {why}" + (
            "; the driver was upgraded under its loaded kernel module: reboot the host (or reload the nvidia "
            "modules)" if "version mismatch" in why else ""))
    return parse_holders(checked(host.name, res))


def gpu_apps(conn: Connection, host: Host) -> list[GpuApp]:
    out = sh(conn, host, "nvidia-smi --query-compute-apps=pid,process_name,used_gpu_memory "
                         "--format=csv,noheader,nounits")
    return parse_compute_apps(out)


def stop_and_empty_gpus(conn: Connection, host: Host, unit: str, budget: float,
                        log: Callable[[str], None]) -> list[GpuApp]:
    """Stop the unit, wait for its processes to leave the GPUs; kill (TERM, then KILL) those of its cgroup still
    there. Only the unit's own: any other process on a GPU (another team's job, a second server) is left alone
    (preflight refuses to start next to one on a GPU the playbook uses). Returns what was killed."""
    sh(conn, host, f"systemctl stop {shlex.quote(unit)} || true", timeout=budget + 30)
    deadline = time.monotonic() + budget
    killed: list[GpuApp] = []
    signal = "TERM"
    told = False
    while True:
        holders = gpu_holders(conn, host)
        ours = [a for a in holders if a.of_unit(unit)]
        others = [a for a in holders if not a.of_unit(unit)]
        if others and not told:
            told = True
            log("GPU also held by processes that are not the unit's, left alone: "
                + "; ".join(a.describe() for a in others))
        if not ours:
            return killed
        if time.monotonic() > deadline:
            raise ServiceError(f"{host.name}: GPUs still held by {unit}'s processes after {budget:.0f}s: "
                               + ", ".join(f"{a.pid} {a.name}" for a in ours))
        log(f"GPU still held by {len(ours)} process(es) the unit left behind: "
            + ", ".join(f"{a.pid} ({a.name}, {a.used_mib} MiB)" for a in ours) + f"; sending SIG{signal}")
        killed += [a for a in ours if a.pid not in {k.pid for k in killed}]
        pattern = shlex.quote("/" + f"{unit}.service".replace(".", "\\.") + "(/|$)")
        # checked again at the kill: a pid reused since the listing is not killed
        sh(conn, host, f"for p in {' '.join(str(a.pid) for a in ours)}; do grep -qE {pattern} /proc/$p/cgroup "
                       f"2>/dev/null && kill -{signal} $p 2>/dev/null; done; true")
        signal = "KILL"
        time.sleep(0.5)


def foreign_holders(holders: list[GpuApp], unit: str, bus_ids: set[str] | None) -> list[GpuApp]:
    """Processes not of the unit holding a GPU among `bus_ids` (None: any GPU). Pure."""
    wanted = None if bus_ids is None else {_bus(b) for b in bus_ids}
    return [a for a in holders if not a.of_unit(unit) and (wanted is None or not a.bus_id or _bus(a.bus_id) in wanted)]


def _bus(bus_id: str) -> str:
    """00000000:01:00.0 and 0000:01:00.0 are the same GPU: compare bus:device.function, lower case."""
    return bus_id.lower().split(":", 1)[-1] if bus_id.count(":") == 2 else bus_id.lower()


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


DROP_INS_AGAIN_S = 2.0  # a systemctl question that failed is asked again after this (asked_twice)
DISTRIBUTION_DROP_INS = ("/usr/lib/systemd/system/service.d/", "/lib/systemd/system/service.d/")


def drop_in_files(drop_in_paths: str) -> list[str]:
    """Every path of `systemctl show -p DropInPaths --value`, as systemd names it: a path with a space in it comes
    quoted as a shell quotes it (`"/etc/systemd/system/sglang.service.d/by hand.conf"`); a word that does not parse
    is kept as it came, so it still counts (pure: what a host sent)."""
    try:
        return shlex.split(drop_in_paths)
    except ValueError:  # an unbalanced quote: garbage, kept
        return drop_in_paths.split()


def overriding(drop_in_paths: str) -> list[str]:
    """The drop-ins of `systemctl show -p DropInPaths` that override this unit as nobody checked: all but the
    distribution's `service.d/` for every service (an admin's /etc/systemd/system/service.d/ is one), each as
    drop_in_files reads it (pure: what a host sent)."""
    return [p for p in drop_in_files(drop_in_paths) if not p.startswith(DISTRIBUTION_DROP_INS)]


def printable(text: str, limit: int = 200) -> str:
    """What a host sent (a path, a line), for an operator's line: printable, at most `limit` characters."""
    return "".join(c if c.isprintable() else "?" for c in text)[:limit]


def shown(paths: list[str], most: int = 10) -> str:
    """Paths a host sent, for a line: each printable, at most `most` of them."""
    said = [printable(p) for p in paths[:most]]
    return ", ".join(said + ([f"and {len(paths) - most} more"] if len(paths) > most else []))


def asked_twice(ask: Callable[[], CommandResult], answered: Callable[[CommandResult], bool] = lambda r: r.ok
                ) -> CommandResult:
    """A systemctl question asked once more, DROP_INS_AGAIN_S later, where its first answer failed: systemd
    re-executing (a package upgrade's daemon-reexec) refuses for a moment, and a refusal there may leave a host
    stopped."""
    res = ask()
    if not answered(res):
        time.sleep(DROP_INS_AGAIN_S)
        res = ask()
    return res


def drop_ins(conn: Connection, host: Host, unit_path: str, every: bool = False) -> list[str]:
    """The drop-ins systemd would apply over the unit at `unit_path` that nobody checked (`every`: the
    distribution's for every service too): their Environment=, ExecStart= and User= win over the unit fleet
    renders, so what would run is not what fleet checked. A host that cannot say (systemctl fails: no bus; hangs;
    answers without end) is ServiceError, never "none": the question is asked before a server is stopped or a
    put-back judged. A lost link still raises as itself (the run's recovery finishes the job)."""
    name = shlex.quote(posixpath.basename(unit_path))
    command = f"systemctl show -p DropInPaths --value -- {name}"
    try:
        res = asked_twice(lambda: run(conn, host, command, timeout=60))
    except (CommandTimedOut, OutputTooLarge) as e:
        raise ServiceError(str(e)) from None
    said = checked(host.name, res)
    return drop_in_files(said) if every else overriding(said)


def unit_state(conn: Connection, host: Host, unit: str) -> dict[str, str]:
    return parse_unit_state(sh(conn, host, unit_show(unit), check=False))


def unit_show(unit: str) -> str:
    return f"systemctl show {shlex.quote(unit)} -p ActiveState -p SubState -p MainPID -p ExecMainStatus -p Result"


def parse_unit_state(out: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


# ---------------------------------------------------------------------- verbs: what callers ask of a host by name


def stop_quietly(conn: Connection, host: Host, unit: str) -> None:
    """`systemctl stop`, its failure ignored (a unit that is not there is stopped)."""
    sh(conn, host, f"systemctl stop {shlex.quote(unit)} || true")


def restart_unit(conn: Connection, host: Host, unit: str, first: str = "") -> None:
    """A failed unit's start limit cleared first, so a restart after a crash loop is not refused; `first`: shell
    run before, in the same round trip."""
    sh(conn, host, (f"{first}; " if first else "") +
       f"systemctl reset-failed {shlex.quote(unit)} 2>/dev/null; systemctl restart {shlex.quote(unit)}")


def make_folders(conn: Connection, host: Host, private: list[str], public: list[str]) -> None:
    """`private` folders made 0700 (fleet's state, keys), then `public` ones 0755 (the launcher's)."""
    sh(conn, host, f"mkdir -p -m 0700 {' '.join(shlex.quote(f) for f in private)}"
                   + (f" && mkdir -p -m 0755 {' '.join(shlex.quote(f) for f in public)}" if public else ""))


def names_in(conn: Connection, host: Host, folder: str) -> list[str]:
    """The names in `folder` ([] when it does not exist)."""
    return sh(conn, host, f"ls -1 {shlex.quote(folder)} 2>/dev/null || true").split()


def sha256s(s: Shell, paths: list[str]) -> dict[str, str]:
    """{path: sha256} of the files that exist among `paths`."""
    out = s.sh("sha256sum -- " + " ".join(shlex.quote(p) for p in paths) + " 2>/dev/null; true")
    return {bits[1].lstrip("*"): bits[0] for bits in (line.split(None, 1) for line in out.splitlines())
            if len(bits) == 2}


def remove_file(s: Shell, path: str, check: bool = True) -> None:
    s.sh(f"rm -f -- {shlex.quote(path)}", check=check)


def read_quiet(s: Shell, path: str) -> str:
    """The file's text, "" when it is missing or unreadable (a mark that may be absent)."""
    return s.sh(f"cat -- {shlex.quote(path)} 2>/dev/null; true")


def run_system_python(conn: Connection, host: Host, program: str, *args: str, timeout: float = 120,
                      max_output: int = MAX_OUTPUT) -> CommandResult:
    """A standard-library program shipped as text (fleet/host/programs) run by the host's own Python, isolated
    (hostside.system_python_command: never a venv's python, which fleet would run as root); a host without
    /usr/bin/python3 answers one line of why, nothing run."""
    res = run(conn, host, hostside.system_python_command(program, *args), timeout=timeout, max_output=max_output)
    if res.exited in hostside.NOT_RUN:
        why = (f"no {hostside.SYSTEM_PYTHON} on the host: fleet runs {program} on the host's own Python, never on "
               "a venv's (whose owner may change what it runs); nothing was run")
        return CommandResult(command=res.command, exited=res.exited, stdout="", stderr=why)
    return res


def _venv_of(python: str) -> str:
    """The venv of its `bin/python`."""
    return posixpath.dirname(posixpath.dirname(python))


def python_says(conn: Connection, host: Host, python: str, code: str, timeout: float = 60) -> str:
    """What `python -c code` prints on the host, as the venv's owner where that is not root (as_owner.py); "" when
    it fails (no such python, an import error, a venv others may change)."""
    return sh(conn, host, hostside.as_owner(_venv_of(python), python, "-c", code) + " 2>/dev/null || true",
              timeout=timeout)


def can_import(conn: Connection, host: Host, python: str, module: str) -> bool:
    """As the venv's owner where that is not root (as_owner.py)."""
    out = sh(conn, host, hostside.as_owner(_venv_of(python), python, "-c", "import " + module) +
             " 2>&1 || echo FLEET-MISSING")
    return "FLEET-MISSING" not in out.strip()
