"""The real uv on a sandbox host (the image has none), for the test and the bench that build venvs with it.

Its binary comes from a uv wheel on this machine (PyPI's `uv-<v>-py3-none-manylinux_2_17_x86_64...whl` holds
it at `uv-<v>.data/scripts/uv`): the one `FLEET_UV_WHEEL` or a `--uv-wheel` option names, else the one
bootstrap.sh downloads into ~/.cache/fleet/uv (uv VERSION, the release the recorded fixtures in
tests/fixtures/venv_build come from). Nothing here reaches an index. It is written to the host's
/usr/local/bin/uv (on the PATH of fleet's SSH commands) atomically, and removed by `remove`.
"""

from __future__ import annotations

import io
import os
import re
import zipfile
from pathlib import Path

from fabric import Connection

from fleet.host.service import sh, write_atomic
from fleet.inventory import Host

ON_HOST = "/usr/local/bin/uv"
VERSION = "0.13.9"  # bootstrap.sh downloads this one
CACHE = Path("~/.cache/fleet/uv").expanduser()
_BINARY = re.compile(r"uv-[0-9][0-9A-Za-z.+]*\.data/scripts/uv")


def wheel() -> Path | None:
    """The uv wheel FLEET_UV_WHEEL names, else bootstrap's copy of uv VERSION; None when neither is a file."""
    named = os.environ.get("FLEET_UV_WHEEL", "")
    if named:
        return Path(named) if Path(named).is_file() else None
    found = sorted(CACHE.glob(f"uv-{VERSION}-*manylinux*x86_64*.whl"))
    return found[0] if found else None


def binary(path: Path) -> bytes:
    """The uv executable inside a uv wheel; ValueError naming the wheel when it has none."""
    with zipfile.ZipFile(path) as z:
        names = [n for n in z.namelist() if _BINARY.fullmatch(n)]
        if len(names) != 1:
            raise ValueError(f"{path}: not a uv wheel (no uv-<version>.data/scripts/uv in it)")
        return z.read(names[0])


def install(conn: Connection, host: Host, path: Path) -> str:
    """The wheel's uv at /usr/local/bin/uv on the host; returns what `uv --version` says there."""
    write_atomic(conn, host, ON_HOST, io.BytesIO(binary(path)), 0o755, timeout=300)
    return sh(conn, host, f"{ON_HOST} --version", timeout=60).strip()


def remove(conn: Connection, host: Host) -> None:
    sh(conn, host, f"rm -f {ON_HOST}", timeout=60)
