"""One venv per package set on a host, built from the controller's wheelhouse with no package index.

    /var/lib/fleet/wheels/<file>.whl         the wheels the controller sent (sha256 checked before each build)
    /var/lib/fleet/venvs/<digest>            -> .build/<digest>.<pid>, published by a rename once whole
    /var/lib/fleet/venvs/builds.log          one line per build (when, which, pip or uv)

`ensure` returns the venv of a pin set, building it when the host has none: only the wheels the host lacks are
sent, then host/programs/venv_build.sh installs them (uv where the host has it, else pip, `--no-index`).
Nothing here stops or changes a server: a deploy builds before it stops anything. `prune` drops the venvs no
kept release's unit names (host/programs/venv_prune.sh).
"""

from __future__ import annotations

import json
import re
import shlex
import time
from dataclasses import dataclass, field

from fabric import Connection

from fleet.errors import FleetError
from fleet.host import programs as hostside
from fleet.host.releases import RELEASES, ROOT, ROUTER_ROOT
from fleet.host.service import ServiceError, sh, write_atomic
from fleet.inventory import Host
from fleet.progress import Progress
from fleet.ssh.remote import CommandTimedOut, OutputTooLarge, run
from fleet.upstream import wheelhouse
from fleet.upstream.wheelhouse import Wheel

VENVS = f"{ROOT}/venvs"
WHEELS = f"{ROOT}/wheels"
BUILD_TIMEOUT_S = 1800  # a real torch + flashinfer install from local wheels takes minutes
SEND_RATE = 5e6  # bytes/s a wheel is given at least to reach the host (torch's wheel is about 900 MB)
_PYTHON = re.compile(r"3\.\d{1,2}")
_VENV = re.compile(re.escape(VENVS) + r"/[0-9a-f]{16}")
_HAVE = re.compile(r"([0-9a-f]{64})  (\S{1,255})")
UNIT_DIRS = ("/etc/systemd/system",)


class VenvError(FleetError):
    """The host could not get the venv of a pin set: nothing was stopped."""


@dataclass
class Venv:
    path: str
    digest: str
    python: str
    built: str | None = None  # "pip" or "uv" when this run built it; None when the host had it
    sent: list[str] = field(default_factory=list)  # the wheels sent (the host lacked them)
    bytes_sent: int = 0
    seconds: float = 0.0


def path_of(digest: str) -> str:
    return f"{VENVS}/{digest}"


def parse_python(output: str) -> str:
    """'3.11' from the host's answer; VenvError for anything else (the host's text is never trusted)."""
    text = output.strip()
    if not _PYTHON.fullmatch(text):
        raise VenvError(f"the host's python3 did not say its version (said {text[:40]!r})")
    return text


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


def host_python(conn: Connection, host: Host) -> str:
    res = run(conn, host, "python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'", timeout=60)
    if not res.ok:
        raise VenvError(f"{host.name}: no python3 to build a venv with (exit {res.exited})")
    return parse_python(res.stdout)


def exists(conn: Connection, host: Host, path: str) -> bool:
    """A published venv: its marker (written last) and its python."""
    q = shlex.quote(path)
    return run(conn, host, f"test -f {q}/.fleet-venv && test -x {q}/bin/python", timeout=60).ok


def said(text: str) -> str:
    """A host's line as fleet may print it: printable, at most 300 characters."""
    return "".join(c if c.isprintable() else "?" for c in text[:300])


def _send(conn: Connection, host: Host, wheels: list[Wheel], say: Progress) -> tuple[list[str], int]:
    wanted = {w.filename: w.sha256 for w in wheels}
    quoted = " ".join(shlex.quote(f"{WHEELS}/{w.filename}") for w in wheels)
    listing = run(conn, host, f"mkdir -p -m 0755 {WHEELS} && sha256sum -- {quoted} 2>/dev/null; true",
                  timeout=600, max_output=1 << 20)
    have = parse_have(listing.stdout, wanted)
    sent, size = [], 0
    for w in wheels:
        if w.filename in have:
            continue
        try:
            data = w.path.read_bytes()
        except OSError as exc:  # the wheelhouse changed under the run
            raise VenvError(f"{host.name}: reading {w.path}: {exc.strerror or exc}; nothing was sent") from None
        say(f"sending {w.filename} ({len(data) / 1e6:.1f} MB)")
        write_atomic(conn, host, f"{WHEELS}/{w.filename}", data, 0o644, timeout=120 + len(data) / SEND_RATE)
        sent.append(w.filename)
        size += len(data)
    return sent, size


def _plan(conn: Connection, host: Host, pins: dict[str, str]) -> tuple[str, list[Wheel]]:
    python = host_python(conn, host)
    try:
        wheels = wheelhouse.closure(pins, python)
    except wheelhouse.WheelhouseError as exc:
        raise VenvError(f"{host.name}: {exc}") from None
    return python, wheels


def planned(conn: Connection, host: Host, pins: dict[str, str]) -> tuple[str, bool]:
    """(the venv these pins would run in, whether the host has it): reads only."""
    python, wheels = _plan(conn, host, pins)
    path = path_of(wheelhouse.digest(pins, python, [w.sha256 for w in wheels]))
    return path, exists(conn, host, path)


def ensure(conn: Connection, host: Host, pins: dict[str, str], say: Progress) -> Venv:
    """The venv of these pins on this host, built (wheels sent, installed) when it has none; VenvError with
    one line otherwise (a lost link is raised as it is). Never stops or touches a server."""
    start = time.monotonic()
    python, wheels = _plan(conn, host, pins)
    digest = wheelhouse.digest(pins, python, [w.sha256 for w in wheels])
    venv = Venv(path_of(digest), digest, python)
    if exists(conn, host, venv.path):
        say(f"venv {venv.path} of these packages is there: no install")
        return venv
    try:
        venv.sent, venv.bytes_sent = _send(conn, host, wheels, say)
        say(f"building venv {venv.path} ({len(wheels)} wheels, {len(venv.sent)} sent)")
        marker = json.dumps({"pins": pins, "python": python, "wheels": {w.filename: w.sha256 for w in wheels}})
        args = [f"{w.sha256} {w.filename}" for w in wheels] + ["--"] + [f"{w.name}=={w.version}" for w in wheels]
        res = run(conn, host, hostside.sh_command("venv_build.sh", "python3", venv.path, WHEELS, marker, *args),
                  timeout=BUILD_TIMEOUT_S, max_output=1 << 20)
    except (ServiceError, CommandTimedOut, OutputTooLarge) as exc:  # sending or building: nothing stopped yet
        raise VenvError(f"{host.name}: the venv {venv.path} could not be built: {said(str(exc))}") from None
    if not res.ok:
        lines = res.stderr.strip().splitlines()
        raise VenvError(f"{host.name}: building the venv {venv.path} failed (exit {res.exited}): "
                        f"{said(lines[-1]) if lines else 'no output'}")
    last = res.stdout.strip().splitlines()[-1:] or [""]
    venv.built = {"built pip": "pip", "built uv": "uv"}.get(last[0])
    venv.seconds = time.monotonic() - start
    return venv


def prune(conn: Connection, host: Host) -> list[str]:
    """Drop the venvs no kept release (nor a live unit) names; returns their digests."""
    out = sh(conn, host, hostside.sh_command("venv_prune.sh", VENVS, RELEASES, ROUTER_ROOT, *UNIT_DIRS), timeout=600)
    return [line.split()[1] for line in out.splitlines() if re.fullmatch(r"pruned [0-9a-f]{16}", line)]
