"""One venv per package set on a host, built from the controller's wheelhouse with no package index.

    /var/lib/fleet/wheels/<file>.whl         the wheels the controller sent (sha256 checked before each build)
    /var/lib/fleet/venvs/<digest>            -> .build/<digest>.<pid>, published by a rename once whole
    /var/lib/fleet/venvs/builds.log          one line per build (when, which, pip or uv)

`ensure` returns the venv of a pin set, building it when the host has none: the wheels of the playbook's lock
for the host's Python and platform (`host_target`; fleet.upstream.lockfile), and only those the host lacks sent,
streamed from disk, once the host was seen to have room for them and the venv (`space_problem`); then
host/programs/venv_build.sh installs exactly those files by path (uv where the host has one that runs, else
pip; `--no-index`, offline, on the host's own /usr/bin/python3, checked first: pycheck.sh).
Nothing here stops or changes a server: a deploy builds before it stops anything. `prune` drops the venvs no
kept release's unit names (host/programs/venv_prune.sh).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from fabric import Connection
from packaging.version import Version

from fleet.errors import FleetError
from fleet.host import programs as hostside
from fleet.host.releases import RELEASES, ROOT, ROUTER_ROOT, Release, ReleaseDamaged, ReleaseStore
from fleet.host.render import unit_runs
from fleet.host.service import ServiceError, sh, write_atomic
from fleet.inventory import Host
from fleet.progress import Progress, quiet, ticking
from fleet.ssh.remote import CommandTimedOut, OutputTooLarge, run
from fleet.upstream import lockfile, resolver, wheelhouse
from fleet.upstream.wheelhouse import Wheel

VENVS = f"{ROOT}/venvs"
WHEELS = f"{ROOT}/wheels"
BUILD_TIMEOUT_S = 1800  # a real torch + flashinfer install from local wheels takes minutes
SEND_RATE = 5e6  # bytes/s a wheel is given at least to reach the host (torch's wheel is about 900 MB)
# ASCII digits only: `\d` also takes '\uff11' (a full-width 1), which int() reads and markers then compare as text
_TARGET = re.compile(r"(3\.[0-9]{1,2}) (3\.[0-9]{1,2}\.[0-9]{1,3}) ([A-Za-z0-9_]{1,20}) (2\.[0-9]{1,3}|-)", re.ASCII)
MAX_MICRO = 99  # a CPython X.Y.Z past this is no release (3.11 stopped at 3.11.14 in 2025)
_FREE = re.compile(r"\d{1,15}")
SPACE_MARGIN = 1.25  # an installed venv grows past its wheels' unpacked size (bytecode, pip's temp files)
_VENV = re.compile(re.escape(VENVS) + r"/[0-9a-f]{16}")
_HAVE = re.compile(r"([0-9a-f]{64})  (\S{1,255})")
_CAUSE = re.compile(r"\s*cause: ")  # uv: the line that says which package and why, under "error: No solution ..."
_ERROR = re.compile(r"\s*error: ", re.IGNORECASE)  # pip's "ERROR: ...", uv's "error: ..."
UNIT_DIRS = ("/etc/systemd/system",)


class VenvError(FleetError):
    """The host could not get the venv of a pin set: nothing was stopped."""


@dataclass(frozen=True)
class VenvRecord:
    """The pins' venv as a deploy's or tune's `--json` reports it: where, built by pip/uv this run (None: the
    host had it), the wheels sent and their bytes, and (deploy) how long getting it took."""

    path: str
    built: str | None
    sent: tuple[str, ...]
    bytes_sent: int
    seconds: float | None = None  # None: not reported (inv tune)

    def to_json(self) -> dict[str, str | int | float | list[str] | None]:
        out: dict[str, str | int | float | list[str] | None] = {
            "path": self.path, "built": self.built, "sent": list(self.sent), "bytes_sent": self.bytes_sent}
        if self.seconds is not None:
            out["seconds"] = self.seconds
        return out


@dataclass(frozen=True)
class Venv:
    """A venv of one pin set on one host (/var/lib/fleet/venvs/<digest>), and what getting it took this run."""

    path: str
    digest: str
    python: str
    built: str | None = None  # "pip" or "uv" when this run built it; None when the host had it
    sent: list[str] = field(default_factory=list)  # the wheels sent (the host lacked them)
    bytes_sent: int = 0
    seconds: float = 0.0


    def record(self, timed: bool = True) -> VenvRecord:
        return VenvRecord(self.path, self.built, tuple(self.sent), self.bytes_sent,
                          round(self.seconds, 2) if timed else None)


def path_of(digest: str) -> str:
    return f"{VENVS}/{digest}"


def parse_target(output: str) -> wheelhouse.Target:
    """'3.11 3.11.2 x86_64 2.36' (python3's version, its full version, machine, glibc; '-' without glibc) from the
    host's answer; VenvError for anything else (the host's text is never trusted)."""
    m = _TARGET.fullmatch(output.strip())
    if m:  # '3.11.007' is 3.11.7, as packaging reads it; what the lock and pip are given
        short, full = Version(m.group(1)).release, Version(m.group(2)).release
        if full[:2] == short and full[2] <= MAX_MICRO:
            python = f"{short[0]}.{short[1]}"
            glibc = None if m.group(4) == "-" else f"2.{int(m.group(4)[2:])}"
            return wheelhouse.Target(python, m.group(3), glibc, f"{python}.{full[2]}")
    raise VenvError(f"the host's python3 did not say its version and platform (said {output.strip()[:60]!r})")


def space_problem(free: int, send: int, venv: int) -> str | None:
    """Why the host's /var/lib/fleet cannot take `send` bytes of wheels and a venv of `venv` bytes unpacked (pure);
    None when it can."""
    need = send + int(venv * SPACE_MARGIN)
    if free >= need:
        return None
    return (f"{ROOT} has {free / 1e9:.2f} GB free; the venv needs about {need / 1e9:.2f} GB ({send / 1e9:.2f} GB of "
            f"wheels to send, {venv / 1e9:.2f} GB unpacked): free space there (old venvs go with their releases)")


def parse_have(output: str, wanted: dict[str, str]) -> set[str]:
    """The file names among `wanted` (name -> sha256) whose sha256 the host reported as the controller's."""
    have = set()
    for line in output.splitlines():
        m = _HAVE.fullmatch(line.strip())
        if m and wanted.get(m.group(2).rsplit("/", 1)[-1]) == m.group(1):
            have.add(m.group(2).rsplit("/", 1)[-1])
    return have


def recorded(facts: dict[str, object]) -> str | None:
    """The venv a release recorded (`packages:`), when it is one of fleet's (a manifest is not trusted)."""
    path = facts.get("venv")
    return path if isinstance(path, str) and _VENV.fullmatch(path) else None


def serving(conn: Connection, host: Host) -> Host:
    """The host as its current release runs it (what patch, audit and bench must act on): see release_venv; the
    inventory's venv where no release is current. A `current` or unit copy that cannot be read raises
    (ReleaseDamaged): nothing is acted on in a venv that may not be the one serving."""
    store = ReleaseStore(conn, host)
    current = store.current()
    return release_venv(store, host, current) if current is not None else host


def release_venv(store: ReleaseStore, host: Host, release: Release) -> Host:
    """The host as the release's unit runs it: in the venv its kept unit's ExecStart names (a playbook's
    serve.venv too), read from the store and checked against its recorded sha256; else as in_own_venv."""
    units = [path for path in release.files if path.endswith(".service") and not path.startswith("before:")]
    if not units:
        return in_own_venv(host, release)
    data = store.file(release, units[0])
    if data is None or hashlib.sha256(data).hexdigest() != release.files[units[0]].get("sha256"):
        raise ReleaseDamaged(f"{host.name}: release {release.id} copy of {units[0]} is missing or damaged "
                             "(sha256 mismatch): which venv it serves from is not known")
    return in_unit_venv(host, release, {units[0]: data})


def in_own_venv(host: Host, release: Release) -> Host:
    """The host as a release of `packages:` pins saw it: its venv the release's own; else the inventory's."""
    own = recorded(release.facts)
    return replace(host, venv=own) if own else host


def in_unit_venv(host: Host, release: Release, copies: dict[str, bytes]) -> Host:
    """The host as the release's unit runs it: in the venv its own unit's ExecStart names (`copies`, its files as
    restore.verified_copies checked them: what a put-back installs), e.g. a playbook's serve.venv; else as
    in_own_venv."""
    unit = next((data for path, data in copies.items() if path.endswith(".service")), None)
    runs = unit_runs(unit.decode("utf-8", "replace")) if unit is not None else None
    return replace(host, venv=runs[1]) if runs else in_own_venv(host, release)


def host_python(conn: Connection, host: Host) -> str:
    return host_target(conn, host).python


_TARGET_CODE = ("import platform, sys; v = sys.version_info; "
                "print('%d.%d %d.%d.%d' % (v[:2] + v[:3]), platform.machine(), platform.libc_ver()[1] or '-')")


def host_target(conn: Connection, host: Host) -> wheelhouse.Target:
    """The Python and platform the host's venvs are built for (one round trip, reads only)."""
    res = run(conn, host, hostside.checked_python("-c", _TARGET_CODE), timeout=60)
    if not res.ok:
        why = res.stderr.strip().splitlines()[-1:] if res.exited == 77 else []
        raise VenvError(f"{host.name}: no {hostside.SYSTEM_PYTHON} to build a venv with (exit {res.exited})"
                        + "".join(f": {w[:200]}" for w in why))
    try:
        return parse_target(res.stdout)
    except VenvError as exc:
        raise VenvError(f"{host.name}: {exc}") from None


def free_bytes(conn: Connection, host: Host) -> int | None:
    """Bytes free for root under /var/lib/fleet (None when df did not say)."""
    res = run(conn, host, f"mkdir -p -m 0755 {WHEELS} && df -Pk {WHEELS} | awk 'NR==2 {{print $4}}'", timeout=60)
    text = res.stdout.strip()
    return int(text) * 1024 if res.ok and _FREE.fullmatch(text) else None


def exists(conn: Connection, host: Host, path: str) -> bool:
    """A published venv: its marker (written last) and its python."""
    q = shlex.quote(path)
    return run(conn, host, f"test -f {q}/.fleet-venv && test -x {q}/bin/python", timeout=60).ok


def build_failure(stderr: str) -> str:
    """The line of a failed build's last lines (pip's or uv's) that says why: uv's `cause:`, else the last
    `error:`/`ERROR:`, else the last line that says anything (printable, as `said`)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for pattern in (_CAUSE, _ERROR):
        found = [line for line in lines if pattern.match(line)]
        if found:
            return said(found[-1])
    return said(lines[-1]) if lines else "no output"


def said(text: str) -> str:
    """A host's line as fleet may print it: printable, at most 300 characters."""
    return "".join(c if c.isprintable() else "?" for c in text[:300])


def _lacking(conn: Connection, host: Host, wheels: list[Wheel]) -> list[Wheel]:
    """The wheels the host does not have (by sha256) in its wheel folder."""
    wanted = {w.filename: w.sha256 for w in wheels}
    quoted = " ".join(shlex.quote(f"{WHEELS}/{w.filename}") for w in wheels)
    listing = run(conn, host, f"mkdir -p -m 0755 {WHEELS} && sha256sum -- {quoted} 2>/dev/null; true",
                  timeout=600, max_output=1 << 20)
    have = parse_have(listing.stdout, wanted)
    return [w for w in wheels if w.filename not in have]


def _send(conn: Connection, host: Host, wheels: list[Wheel], say: Progress) -> tuple[list[str], int]:
    """Each wheel streamed from the wheelhouse (never read whole: torch's is about 900 MB), written atomically."""
    sent, size = [], 0
    for w in wheels:
        try:
            f = w.path.open("rb")
            length = os.fstat(f.fileno()).st_size
        except OSError as exc:  # the wheelhouse changed under the run (an OSError past here is the link's)
            raise VenvError(f"{host.name}: reading {w.path}: {exc.strerror or exc}; nothing more was sent") from None
        with f:
            budget = 120 + length / SEND_RATE
            say(f"sending {w.filename} ({length / 1e6:.1f} MB; budget {budget:.0f}s)")
            with ticking(say, "send", budget):
                write_atomic(conn, host, f"{WHEELS}/{w.filename}", f, 0o644, timeout=budget)
        sent.append(w.filename)
        size += length
    return sent, size


def _plan(conn: Connection, host: Host, pins: dict[str, str], lock: Path | None,
          write: bool = True, say: Progress = quiet) -> tuple[str, list[Wheel]]:
    """The host's Python and the wheels of its venv: the lock's, verified (fleet.upstream.lockfile), where a lock
    is given; else pip's resolve over the wheelhouse."""
    target = host_target(conn, host)
    try:
        if lock is not None:
            wheels = lockfile.ensure(lock, pins, target, write=write, say=say)
        else:
            wheels = resolver.resolve(pins, target)
            wheelhouse.contained(wheels)
    except wheelhouse.WheelhouseError as exc:
        raise VenvError(f"{host.name}: {exc}") from None
    return target.python, wheels


def planned(conn: Connection, host: Host, pins: dict[str, str], lock: Path | None = None) -> tuple[str, bool]:
    """(the venv these pins would run in, whether the host has it): reads only (the lock is not written)."""
    python, wheels = _plan(conn, host, pins, lock, write=False)
    path = path_of(wheelhouse.digest(pins, python, [w.sha256 for w in wheels]))
    return path, exists(conn, host, path)


def ensure(conn: Connection, host: Host, pins: dict[str, str], say: Progress, lock: Path | None = None) -> Venv:
    """The venv of these pins on this host, built (wheels sent, installed) when it has none, from the lock's wheels
    where a lock is given; VenvError with one line otherwise (a lost link is raised as it is). Never stops or
    touches a server."""
    start = time.monotonic()
    python, wheels = _plan(conn, host, pins, lock, say=say)
    digest = wheelhouse.digest(pins, python, [w.sha256 for w in wheels])
    venv = Venv(path_of(digest), digest, python)
    if exists(conn, host, venv.path):
        say(f"venv {venv.path} of these packages is there: no install")
        return venv
    try:
        sizes = {w.filename: w.path.stat().st_size for w in wheels}
    except OSError as exc:  # the wheelhouse changed under the run
        raise VenvError(f"{host.name}: the wheelhouse changed under the run: {exc}; nothing was stopped") from None
    try:
        lacking = _lacking(conn, host, wheels)
        free = free_bytes(conn, host)
        problem = space_problem(free, sum(sizes[w.filename] for w in lacking),
                                wheelhouse.unpacked_size(wheels)) if free is not None else None
        if problem:
            raise VenvError(f"{host.name}: {problem}; nothing was sent")
        sent, bytes_sent = _send(conn, host, lacking, say)
        say(f"building venv {venv.path} ({len(wheels)} wheels, {len(sent)} sent; budget {BUILD_TIMEOUT_S}s)")
        marker = json.dumps({"pins": pins, "python": python, "wheels": {w.filename: w.sha256 for w in wheels}})
        args = [f"{w.sha256} {w.filename}" for w in wheels]  # installed by path: these files and no others
        with ticking(say, "venv build", BUILD_TIMEOUT_S):
            build = hostside.sh_command("venv_build.sh", hostside.SYSTEM_PYTHON, venv.path, WHEELS, marker, *args)
            res = run(conn, host, build, timeout=BUILD_TIMEOUT_S, max_output=1 << 20)
    except (ServiceError, CommandTimedOut, OutputTooLarge) as exc:  # sending or building: nothing stopped yet
        raise VenvError(f"{host.name}: the venv {venv.path} could not be built: {said(str(exc))}") from None
    if not res.ok:
        raise VenvError(f"{host.name}: building the venv {venv.path} failed (exit {res.exited}): "
                        f"{build_failure(res.stderr)}")
    last = res.stdout.strip().splitlines()[-1:] or [""]
    return replace(venv, built={"built pip": "pip", "built uv": "uv"}.get(last[0]), sent=sent, bytes_sent=bytes_sent,
                   seconds=time.monotonic() - start)


def prune(conn: Connection, host: Host) -> list[str]:
    """Drop the venvs no kept release (nor a live unit) names; returns their digests."""
    out = sh(conn, host, hostside.sh_command("venv_prune.sh", VENVS, RELEASES, ROUTER_ROOT, *UNIT_DIRS), timeout=600)
    return [line.split()[1] for line in out.splitlines() if re.fullmatch(r"pruned [0-9a-f]{16}", line)]
