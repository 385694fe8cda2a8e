"""The real sglang-router on every sandbox host (PyPI's wheels: a Rust binary that needs no GPU), in both API
generations fleet speaks (fleet.multihost.router_api):

- NEWEST (0.3.2, POST/GET/DELETE /workers, 202 done in the background) in the hosts' venv, /root/ml-env, where
  a playbook's router runs by default;
- OLDEST (0.1.9, POST /add_worker, /remove_worker, GET /list_workers) in a venv of its own, OLD_VENV, that a
  playbook names with `router: {venv: ...}`.

    python -m sandbox.router fetch      (bootstrap.sh: the wheels into ~/.cache/fleet/router, once)

`fetch` downloads each release's wheel and its dependency closure for the hosts' Python (Debian 12's 3.11,
x86_64) with `pip download --only-binary :all:`, then installs each into a site folder of the cache with
`pip install --target --no-index`; `install(upper)` hard-links those folders into a host's overlay at `sandbox up`
(copies where a link cannot cross file systems): a file a host rewrites in place would change the cache, so
tests replace files (new inodes), never edit them. Nothing is downloaded when the cache has them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

NEWEST = "0.3.2"
OLDEST = "0.1.9"
HOST_VENV = "/root/ml-env"
OLD_VENV = f"/opt/sglang-router-{OLDEST}"
PYTHON = "3.11"  # Debian 12's, the sandbox image's
CACHE = Path(os.environ.get("FLEET_ROUTER_CACHE", "~/.cache/fleet/router")).expanduser()
SITE = f"lib/python{PYTHON}/site-packages"
_PIP_TARGET = ["--only-binary", ":all:", "--python-version", PYTHON, "--implementation", "cp",
               "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
               "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_34_x86_64"]


def site_of(version: str) -> Path:
    return CACHE / f"site-{version}"


def fetch(versions: tuple[str, ...] = (NEWEST, OLDEST), say=print) -> list[Path]:
    """Each release installed (with what it requires) into its site folder of the cache; the folders."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two sandboxes brought up at once share one fetch
        return [_fetched(version, say) for version in versions]


def _fetched(version: str, say) -> Path:
    site = site_of(version)
    if not (site / ".complete").exists():
        say(f"sandbox: fetching sglang-router {version} and its requirements into {CACHE}")
        wheels = CACHE / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "download", f"sglang-router=={version}", "-d", str(wheels), *_PIP_TARGET],
                       check=True)
        tmp = site.with_name(site.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run([*pip, "install", "--no-index", "--find-links", str(wheels), "--target", str(tmp),
                        "--no-compile", f"sglang-router=={version}", *_PIP_TARGET], check=True)
        (tmp / ".complete").write_text(version + "\n")
        shutil.rmtree(site, ignore_errors=True)
        tmp.rename(site)
    return site


def _link_tree(src: Path, dst: Path) -> None:
    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)
    shutil.copytree(src, dst, copy_function=link, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(".complete", "bin"))


def install(upper: Path) -> None:
    """The newest router into the host venv's site-packages, the oldest into a venv of its own (the host's
    python3 behind it), in a host's overlay `upper`."""
    newest, oldest = fetch()
    _link_tree(newest, upper / HOST_VENV.lstrip("/") / SITE)
    venv = upper / OLD_VENV.lstrip("/")
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    for name in ("python", "python3"):
        (venv / "bin" / name).unlink(missing_ok=True)
        (venv / "bin" / name).symlink_to("/usr/bin/python3")
    (venv / "pyvenv.cfg").write_text(f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {PYTHON}\n")
    _link_tree(oldest, venv / SITE)


if __name__ == "__main__":
    if sys.argv[1:] != ["fetch"]:
        sys.exit("usage: python -m sandbox.router fetch")
    fetch()
