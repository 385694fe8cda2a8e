"""Everything fleet runs on a host, as real files: shell scripts and Python programs shipped as text over
the one SSH round trip of their task (`sh -c TEXT ARGS...` or `python -c TEXT ARGS...`), never installed;
save the launcher, which a unit starts.

    probe.sh        the probe: GPUs, topology, driver, system, packages (fleet.host.probe parses it)
    status.sh       inv status: unit, release, health, drift hashes, power, metrics, leftovers, router
    patch_host.py   the patch engine's host side: read, apply, revert, cleanup (fleet.patches.engine)
    scan.py         inv audit's scan of installed packages for arch gates (fleet.patches.audit)
    venv_site.py    a venv's packages read as data by patch_host.py and scan.py (`#@include venv_site.py`)
    owner.py        who may change a venv or a path: the one rule before fleet runs a venv's code or writes
                    there (as_owner.py and patch_host.py: `#@include owner.py`); its drop() is kcache.py's too
    as_owner.py     a command that runs a venv's code, run as the venv's owner where that is not root
    interpreter.sh  the host's own python checked (root's all the way to its real file) before any program runs on it
    pycheck.sh      that check as a shell function (interpreter.sh, status.sh, venv_build.sh: `#@include pycheck.sh`)
    write.sh        every file fleet writes on a host: stdin to a temp file in the same folder, then rename
                    (fleet.host.service.write_atomic), as root through sudo on a become host; with `keep`,
                    the old file stays beside it as a hardlink named by its sha256
    putback.sh      a kept file back by link and rename, no data written: what served goes back on a full
                    disk (fleet.host.service.put_back_kept)
    p2p_check.py    inv probe --p2p-check: a buffer copied between each pair of GPUs and compared (fleet.host.p2pcheck)
    exec.sh         inv exec's command under the host's own deadline: its systemd scope ends all it started there
                    (fleet.host.execute)
    xid.sh          the kernel log's Xid events (probe.sh and status.sh include it: `#@include xid.sh`)
    venv_build.sh   a `packages:` venv built with no index beside the others, published by a rename (fleet.host.venvs)
    venv_prune.sh   the venvs no kept release names, dropped (fleet.host.venvs)
    canary_load.py  a canary's traffic: requests at a fixed rate to the local server, each timed (fleet.deploy.judge
                    reads the samples), or the greedy answers to prompts (fleet.deploy.numerics)
    kcache.py       compile and tune caches: collected as a bounded tar, placed after a checksum by rename,
                    cleared (fleet.host.kcache)
    launch.py       installed as /var/lib/fleet/bin/fleet-launch where a server has an API key: hands the
                    key to the server inside its process and masks it in its output (fleet.host.render)

Each is linted (`sh -n`, `py_compile`) and run against a temporary folder that mimics a host in
tests/unit/host/test_hostside.py.
"""

from __future__ import annotations

import functools
import shlex
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ("probe.sh", "status.sh", "patch_host.py", "scan.py", "launch.py", "write.sh", "putback.sh", "xid.sh",
           "exec.sh", "p2p_check.py", "venv_build.sh", "venv_prune.sh", "canary_load.py", "kcache.py",
           "venv_site.py", "owner.py", "as_owner.py", "interpreter.sh", "pycheck.sh")
_INCLUDE = "#@include "


@functools.cache
def text(name: str) -> str:
    """The script's text (read once per process)."""
    if name not in SCRIPTS:
        raise KeyError(f"no host-side script {name!r}")
    lines = (HERE / name).read_text().splitlines(keepends=True)
    return "".join(text(line[len(_INCLUDE):].strip()) if line.startswith(_INCLUDE) else line for line in lines)


def sh_command(name: str, *args: str) -> str:
    """`sh -c SCRIPT NAME ARGS...`: the script runs with its arguments as $1, $2, ..., every one quoted."""
    return " ".join(shlex.quote(a) for a in ("sh", "-c", text(name), f"fleet-{name.split('.')[0]}", *args))


SYSTEM_PYTHON = "/usr/bin/python3"  # root's, as the host's packages installed it
NOT_RUN = (126, 127)  # the shell found no interpreter to run (a host without python3): nothing changed


def system_python_command(name: str, *args: str) -> str:
    """A standard-library program on the host's own Python, isolated and without site (-I -S: no PYTHON* variable,
    no user site, no .pth), never on a venv's: fleet runs as root, and a venv's interpreter, .pth files and
    packages are whatever its owner made them. The interpreter is checked first, in the same round trip
    (interpreter.sh: root's all the way, else exit 77 and one line), as it is what owner.py's rule runs on."""
    return checked_python("-c", text(name), *args)


def checked_python(*args: str) -> str:
    """`SYSTEM_PYTHON -I -S ARGS...` after interpreter.sh's check, in the same round trip: every python root runs."""
    return sh_command("interpreter.sh", SYSTEM_PYTHON, "-I", "-S", *args)


AS_OWNER = "fleet-as_owner"  # as_owner.py's first argument: its name in `ps` and in the fault harness's labels


def as_owner(venv: str, *argv: str) -> str:
    """`argv`, which runs the venv's code, run as the venv's owner where that is not root (as_owner.py, on the
    host's own python: owner.py's rule); a venv others may change too: exit 77, one line on stderr."""
    return system_python_command("as_owner.py", AS_OWNER, venv, *argv)


def owner_of_venv(venv: str, *also: str) -> str:
    """Shell: prints `uid:gid` of the user `as_owner` runs the venv's code as, nothing for root; exit 77 where it
    refuses. `also`: files and folders (walked whole) that count as the venv's (what else its python loads)."""
    return system_python_command("as_owner.py", AS_OWNER, "--who", venv, *also)


def words(*argv: str) -> str:
    """Shell: `argv`, every word quoted (a venv's command that benchrun.script runs as its owner)."""
    return " ".join(shlex.quote(a) for a in argv)


def as_decided(owner: str, command: str) -> str:
    """Shell: `command` (shell words) as `owner` (shell text: `"$o"`), the `uid:gid` owner_of_venv printed before,
    root for "": one rule asked for several commands of one venv (a benchmark's run and the read of its details)."""
    return f"{system_python_command('as_owner.py', AS_OWNER, '--as')} {owner} {command}"


def python_command(python: str, name: str, *args: str, options: tuple[str, ...] = ()) -> str:
    """`PYTHON OPTIONS... -c PROGRAM ARGS...` (sys.argv[1:] are the args), every word quoted."""
    return " ".join(shlex.quote(a) for a in (python, *options, "-c", text(name), *args))


def answered_otherwise(what: str, exited: int, stdout: str, stderr: str) -> str:
    """Why a program's answer holds none of its marks: the host ran something else in its place, or its session
    failed before it ran (the status row read as a healthy host with nothing deployed, exit 0)."""
    said = next((x.strip() for x in (stdout + "\n" + stderr).splitlines() if x.strip()), "")[:160]
    return (f"{what} did not run (exit {exited}, {f'it printed {said!r}' if said else 'no output'}): the host ran "
            "something else in its place or failed the session first (a ForceCommand in sshd_config, a command= in "
            "authorized_keys, a login shell such as nologin, a ChrootDirectory sshd cannot enter); "
            "`ssh USER@HOST true` shows which")
