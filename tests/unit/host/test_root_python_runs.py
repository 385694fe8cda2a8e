"""Root's python runs (a step of fleet's, as root on a host) run no code a user may write: not a python3 a user put
first on PATH, not a module in the login user's folder that sudo kept as the working folder. Found by an adversarial
review; each case failed before its fix. Run here as root, on folders made here.

A marker file (0666) records the uid of every process that ran the user's code: root's uid there is the failure."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from uidmark import NOBODY, REAL, chown_tree, code, marker, venv_at

from fleet.host import programs as hostside
from fleet.host import serverchecks, service, venvs
from fleet.host.service import ServiceError
from fleet.inventory import Host
from fleet.multihost import router_api
from fleet.ssh import remote

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="runs as other users: needs root (CI runs as root)"),
              pytest.mark.skipif(not Path(hostside.SYSTEM_PYTHON).exists(), reason="no /usr/bin/python3 here")]
UNSHARE = pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare (a private mount)")

# bare `python3` as root in a deploy's steps

ROOTS_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class _Transport:
    pass


class _Conn:
    """A connection whose commands run here (fleet.ssh.remote's Runner seam, as fleet.ssh.faulty's), each in a
    private mount where the host's python3's real file is nobody's program."""

    def __init__(self, users_python: Path | None = None, cwd: Path | None = None) -> None:
        self.transport = _Transport()
        self.users_python, self.cwd = users_python, cwd

    def run_bytes(self, conn, host, command, data, timeout, max_output):  # fleet.ssh.remote.Runner
        mount = ["unshare", "-m", "sh", "-c", 'mount --bind "$1" "$2" && exec sh -c "$3"', "-", str(self.users_python),
                 REAL] if self.users_python else ["sh", "-c", 'exec sh -c "$1"', "-"]
        done = subprocess.run([*mount, command], input=data, capture_output=True, timeout=60, cwd=self.cwd,
                              env={"PATH": ROOTS_PATH, "HOME": "/root"})  # what sshd gives root, not pytest's
        return remote.BytesResult(exited=done.returncode, stdout=done.stdout, stderr=done.stderr)


def _host(top: Path, become: bool = False) -> Host:
    return Host(name="h1", address="127.0.0.1", port=22, user="deploy" if become else "root", become=become,
                identity_file=None, known_hosts=None, ssh_config=None, proxy_jump=None, venv=str(top / "venv"),
                unit="sglang", groups=(), source=top / "inv.yaml")


@UNSHARE
@pytest.mark.parametrize("step", ["preflight model_check", "venvs host_target"])
def test_a_deploys_python_steps_run_the_hosts_checked_python_never_a_users_first_on_path(top, step):
    """serverchecks.model_check (preflight's model folder check, every deploy) sends `python3 -c ...` and
    venvs.host_target (every `packages:` venv build, inv wheels) `python3 -c 'import platform...'`: the first
    python3 on root's PATH, unchecked, with site (no -I -S). Here the host's python3's real file is nobody's
    program (the layout test_interpreter's interpreter.sh refuses): root ran it. Invariant (a). Severity: MEDIUM
    (same class as status.sh/venv_build.sh's bare python3, two more call sites). Fix: both through
    hostside.system_python_command (a program file each, or a `-c` text behind interpreter.sh), or plain sh for the
    model check (test -f config.json; the shard list read by the controller from the index file)."""
    ran = marker(top)
    users = top / "python3"
    users.write_text(f"#!/bin/sh\nid -u >> {ran}\n")
    users.chmod(0o755)
    os.chown(users, NOBODY.pw_uid, NOBODY.pw_gid)
    conn = _Conn(users)
    remote.use_runner(conn, conn)  # type: ignore[arg-type]
    host = _host(top)
    try:
        if step == "preflight model_check":
            serverchecks.model_check(conn, host, str(top))  # type: ignore[arg-type]
        else:
            venvs.host_target(conn, host)  # type: ignore[arg-type]
    except (ServiceError, venvs.VenvError):
        pass  # what fleet makes of the answer does not matter: what ran, as whom
    assert "0" not in ran.read_text().split(), f"root ran {NOBODY.pw_name}'s python3: {ran.read_text()!r}"


# a root venv's python never starts in the login user's folder (python -c puts it first on sys.path)

@pytest.mark.parametrize("how", ["can_import", "python_says"])
def test_a_root_venvs_python_imports_nothing_from_the_login_users_working_folder(top, how):
    """On a become host fleet logs in as a user (here `deploy`, nobody's uid) and sudo keeps the working folder: the
    login user's home. as_owner.py runs the command (the venv's python, without -I or -P) there, and python -c / -m
    put that folder first on sys.path. A root venv's `python -c "import sglang_router"` (can_import, router
    checks) or `python -c "import importlib.metadata..."` (python_says: router_api.VERSION_COMMAND) imported the
    login user's sglang_router.py / csv.py as root. The login user may sudo only with a password (become's PASSWORD
    mode), so code running as that user gets root without it. Invariant (a). Severity: MEDIUM. Fix: as_owner.py
    chdir("/") before it execs the command as root (the owner's home where it drops), or the venv's python run
    with -P (3.11+) / -I; benchrun already cds into its own folder."""
    ran = marker(top)
    venv = venv_at(top / "venv")
    home = top / "home"
    home.mkdir()
    for name in ("sglang_router", "csv", "email", "zipfile"):
        (home / f"{name}.py").write_text(code(ran))
    chown_tree(home, NOBODY.pw_uid, NOBODY.pw_gid)
    conn = _Conn(cwd=home)
    remote.use_runner(conn, conn)  # type: ignore[arg-type]
    python = str(venv / "bin" / "python")
    if how == "can_import":
        service.can_import(conn, _host(top, become=True), python, "sglang_router")  # type: ignore[arg-type]
    else:
        service.python_says(conn, _host(top, become=True), python, router_api.VERSION_COMMAND)  # type: ignore[arg-type]
    assert "0" not in ran.read_text().split(), f"root ran the login user's module: {ran.read_text()!r}"
