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
from fleet.host.service import sh, write_atomic
from fleet.inventory import Host
from fleet.progress import Progress
from fleet.ssh.remote import run
from fleet.upstream import wheelhouse
from fleet.upstream.wheelhouse import Wheel

VENVS = f"{ROOT}/venvs"
WHEELS = f"{ROOT}/wheels"
BUILD_TIMEOUT_S = 1800  # a real torch + flashinfer install from local wheels takes minutes
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
    return run(conn, host, f"test -f {shlex.quote(path + '/.fleet-venv')}", timeout=60).ok


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
        data = w.path.read_bytes()
        say(f"sending {w.filename} ({len(data) / 1e6:.1f} MB)")
        write_atomic(conn, host, f"{WHEELS}/{w.filename}", data, 0o644)
        sent.append(w.filename)
        size += len(data)
    return sent, size


def ensure(conn: Connection, host: Host, pins: dict[str, str], say: Progress) -> Venv:
    """The venv of these pins on this host, built (wheels sent, installed) when it has none; VenvError with
    one line otherwise. Never stops or touches a server."""
    start = time.monotonic()
    python = host_python(conn, host)
    digest = wheelhouse.digest(pins, python)
    venv = Venv(path_of(digest), digest, python)
    if exists(conn, host, venv.path):
        say(f"venv {venv.path} of these packages is there: no install")
        return venv
    try:
        wheels = wheelhouse.closure(pins, python)
    except wheelhouse.WheelhouseError as exc:
        raise VenvError(f"{host.name}: {exc}") from None
    venv.sent, venv.bytes_sent = _send(conn, host, wheels, say)
    say(f"building venv {venv.path} ({len(wheels)} wheels, {len(venv.sent)} sent)")
    marker = json.dumps({"pins": pins, "python": python, "wheels": {w.filename: w.sha256 for w in wheels}})
    args = [f"{w.sha256} {w.filename}" for w in wheels] + ["--"] + [f"{w.name}=={w.version}" for w in wheels]
    res = run(conn, host, hostside.sh_command("venv_build.sh", "python3", venv.path, WHEELS, marker, *args),
              timeout=BUILD_TIMEOUT_S, max_output=1 << 20)
    if not res.ok:
        lines = res.stderr.strip().splitlines()
        raise VenvError(f"{host.name}: building the venv {venv.path} failed (exit {res.exited}): "
                        f"{lines[-1][:300] if lines else 'no output'}")
    said = res.stdout.strip().splitlines()
    venv.built = said[-1].removeprefix("built ") if said and said[-1].startswith("built ") else None
    venv.seconds = time.monotonic() - start
    return venv


def prune(conn: Connection, host: Host) -> list[str]:
    """Drop the venvs no kept release (nor a live unit) names; returns their digests."""
    out = sh(conn, host, hostside.sh_command("venv_prune.sh", VENVS, RELEASES, ROUTER_ROOT, *UNIT_DIRS), timeout=600)
    return [line.split()[1] for line in out.splitlines() if re.fullmatch(r"pruned [0-9a-f]{16}", line)]
