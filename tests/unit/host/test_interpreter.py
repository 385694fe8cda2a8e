"""The host's own python is checked before root runs it (interpreter.sh, in system_python_command's round trip):
owner.py's rule runs on that interpreter, so an interpreter a user may change (a link into their venv, a file of
theirs in its place) ran their code as root before any rule was asked. Run here as root, on folders made here."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from fleet.host import programs as hostside
from fleet.host import serverchecks, venvs
from fleet.inventory import Host
from fleet.multihost import status
from fleet.ssh import remote

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="makes files of other users: needs root (CI runs as root)"),
              pytest.mark.skipif(not Path(hostside.SYSTEM_PYTHON).exists(), reason="no /usr/bin/python3 here")]

NOBODY = pwd.getpwnam("nobody")
REAL = os.path.realpath(hostside.SYSTEM_PYTHON)
HOST = Host(name="h", address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(), source=Path("hosts.yaml"))


def _users_folder(top: Path) -> Path:
    folder = top / "u"
    folder.mkdir()
    os.chown(folder, NOBODY.pw_uid, NOBODY.pw_gid)
    return folder


def a_link_into_a_users_venv(top: Path) -> tuple[Path, str]:
    (_users_folder(top) / "python3").symlink_to(REAL)
    (top / "python3").symlink_to(top / "u" / "python3")
    return top / "python3", f"{top}/u is not root's"


def a_users_file_in_its_place(top: Path) -> tuple[Path, str]:
    shutil.copy2(REAL, top / "python3")
    os.chown(top / "python3", NOBODY.pw_uid, NOBODY.pw_gid)
    return top / "python3", f"{top}/python3 is not root's"


def a_folder_a_group_may_write(top: Path) -> tuple[Path, str]:
    (top / "bin").mkdir()
    os.chown(top / "bin", 0, NOBODY.pw_gid)
    (top / "bin").chmod(0o775)
    (top / "bin" / "python3").symlink_to(REAL)
    return top / "bin" / "python3", f"{top}/bin is writable by others than root"


def a_link_a_user_made(top: Path) -> tuple[Path, str]:
    (top / "python3").symlink_to(REAL)
    os.lchown(top / "python3", NOBODY.pw_uid, NOBODY.pw_gid)
    return top / "python3", f"{top}/python3 is not root's"


def links_that_loop(top: Path) -> tuple[Path, str]:
    (top / "a").symlink_to("b")
    (top / "b").symlink_to("a")
    return top / "a", "its links loop"


def roots_link_through_dot_dot(top: Path) -> tuple[Path, str]:
    (top / "bin").mkdir()
    (top / "bin" / "real").symlink_to(REAL)
    (top / "python3").symlink_to("bin/../bin/./real")
    return top / "python3", ""


def roots_entry_in_a_sticky_folder(top: Path) -> tuple[Path, str]:
    (top / "tmp").mkdir()
    (top / "tmp").chmod(0o1777)
    (top / "tmp" / "python3").symlink_to(REAL)
    return top / "tmp" / "python3", ""


@pytest.mark.parametrize("layout", [a_link_into_a_users_venv, a_users_file_in_its_place, a_folder_a_group_may_write,
                                    a_link_a_user_made, links_that_loop, roots_link_through_dot_dot,
                                    roots_entry_in_a_sticky_folder], ids=lambda f: f.__name__)
def test_an_interpreter_others_may_change_runs_nothing(top: Path, layout: Callable[[Path], tuple[Path, str]]) -> None:
    python, why = layout(top)
    cmd = hostside.sh_command("interpreter.sh", str(python), "-I", "-S", "-c", "import os; print(os.getuid())")
    done = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=60)
    said = (77, "", f"fleet runs nothing on {python} as root: {why}") if why else (0, "0", "")
    assert (done.returncode, done.stdout.strip(), done.stderr.strip()) == said


def test_a_missing_interpreter_is_a_command_not_found(top: Path) -> None:
    """What run_system_python reads as no python3 on the host (NOT_RUN), as when the shell found none."""
    cmd = hostside.sh_command("interpreter.sh", str(top / "none" / "python3"), "-c", "1")
    done = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=60)
    assert done.returncode in hostside.NOT_RUN and done.stdout == "", done


@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare (a private mount over the host's python)")
def test_the_hosts_python_a_user_may_write_runs_no_program_as_root(top: Path) -> None:
    """The host's python3's real file replaced, in a private mount, by a copy a user owns. Fails before: root ran
    as_owner.py on it (the user's interpreter, as root) before its rule looked at anything, then the command."""
    users = _users_folder(top) / "python3"
    shutil.copy2(REAL, users)
    os.chown(users, NOBODY.pw_uid, NOBODY.pw_gid)
    venv = top / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(hostside.SYSTEM_PYTHON)
    cmd = hostside.as_owner(str(venv), "id", "-u")
    done = subprocess.run(["unshare", "-m", "sh", "-c", 'mount --bind "$1" "$2" && exec sh -c "$3"', "-", str(users),
                           REAL, cmd], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr.strip()) == (
        77, "", f"fleet runs nothing on {hostside.SYSTEM_PYTHON} as root: {REAL} is not root's"), done


def _status(top: Path, python: str, path: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """status.sh over a folder that stands in for /var/lib/fleet: a release managing one file, and a router."""
    root = top / "fleet"
    (root / "releases/r1").mkdir(parents=True)
    (root / "router/current").mkdir(parents=True)
    managed = top / "unit.service"
    managed.write_text("[Service]\n")
    sha = hashlib.sha256(b"[Service]\n").hexdigest()
    (root / "releases/r1/manifest.json").write_text(json.dumps({"id": "r1", "files": {str(managed): {"sha256": sha}}}))
    (root / "current").symlink_to("releases/r1")
    (root / "router/current/manifest.json").write_text(json.dumps({"id": "q1", "config": {"port": 9}}))
    cmd = hostside.sh_command("status.sh", "sglang", "1", str(root), python)
    done = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=60, env={"PATH": path})
    return done, str(managed)


def test_status_runs_the_checked_python_never_a_python3_first_on_path(top: Path) -> None:
    """A folder a user may write first on root's PATH, holding a python3. Fails before: status.sh's hashes and
    router ran `python3 -` from PATH (the user's, as root); now the host's own, checked, -I -S."""
    users = _users_folder(top)
    (users / "python3").write_text(f"#!/bin/sh\ntouch {users}/ran\nexec {REAL} \"$@\"\n")
    (users / "python3").chmod(0o755)
    done, managed = _status(top, hostside.SYSTEM_PYTHON, f"{users}:/usr/sbin:/usr/bin:/sbin:/bin")
    st = status.parse(HOST, done.stdout)
    assert not (users / "ran").exists()
    assert (done.returncode, st.release, st.drift) == (0, "r1", [])
    assert st.router is not None and st.router.release == "q1"


def test_status_runs_no_python_the_check_refuses_and_says_the_files_were_not_checked(top: Path) -> None:
    users = _users_folder(top) / "python3"
    shutil.copy2(REAL, users)
    os.chown(users, NOBODY.pw_uid, NOBODY.pw_gid)
    done, _ = _status(top, str(users), "/usr/sbin:/usr/bin:/sbin:/bin")
    st = status.parse(HOST, done.stdout)
    assert (done.returncode, st.release, st.router) == (0, "r1", None)
    assert st.drift == [f"files not checked: fleet runs nothing on {users} as root: {users.parent} is not root's"]


def test_status_on_a_host_without_the_python_says_the_files_were_not_checked(top: Path) -> None:
    """No /usr/bin/python3 (a host whose python3 is in /usr/local/bin alone): every managed file read as missing
    drift, where nothing was hashed (review of the diff)."""
    missing = str(top / "no-python3")
    done, _ = _status(top, missing, "/usr/sbin:/usr/bin:/sbin:/bin")
    st = status.parse(HOST, done.stdout)
    assert st.drift == [f"files not checked: fleet-interpreter: {missing}: not found"], st.drift


class _Here:
    """A connection whose commands run here, as root, under `path` (a host's PATH): the command text fleet sends."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.transport = self

    def run_bytes(self, conn: object, host: Host, command: str, data: bytes, timeout: float,
                  max_output: int) -> remote.BytesResult:
        done = subprocess.run(["sh", "-c", command], input=data, capture_output=True, timeout=timeout,
                              env={"PATH": self.path})
        return remote.BytesResult(done.returncode, done.stdout, done.stderr)


def test_the_hosts_target_and_the_model_check_run_the_checked_python_never_a_python3_first_on_path(top: Path) -> None:
    """Fails before: venvs.host_target and serverchecks.model_check sent `python3 -c` (the PATH's first: a user's,
    as root)."""
    users = _users_folder(top)
    (users / "python3").write_text(f"#!/bin/sh\ntouch {users}/ran\nexec {REAL} \"$@\"\n")
    (users / "python3").chmod(0o755)
    conn = _Here(f"{users}:/usr/sbin:/usr/bin:/sbin:/bin")
    remote.use_runner(conn, conn)  # type: ignore[arg-type]
    (top / "model").mkdir()
    target = venvs.host_target(conn, HOST)
    said = serverchecks.model_check(conn, HOST, str(top / "model"))
    assert not (users / "ran").exists()
    version = subprocess.run([REAL, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                             text=True).stdout.strip()
    assert target.python == version
    assert said == f"no config.json in {top / 'model'}"


def test_a_link_target_ending_in_a_newline_is_checked_whole(top: Path) -> None:
    """`to=$(readlink ...)` dropped the target's trailing newline: root's link bin/python3 -> "real\\n" was checked as
    bin/real (root's file) while the kernel follows "real\\n", here root's link to nobody's program. Fails before:
    root ran it; now the link's real target is looked at and refused."""
    users = _users_folder(top)
    (users / "python3").write_text("#!/bin/sh\nid -u\n")
    (users / "python3").chmod(0o755)
    os.chown(users / "python3", NOBODY.pw_uid, NOBODY.pw_gid)
    (top / "bin").mkdir()
    (top / "bin" / "real").write_text("#!/bin/sh\nexit 0\n")
    (top / "bin" / "real").chmod(0o755)
    (top / "bin" / "real\n").symlink_to(users / "python3")
    (top / "bin" / "python3").symlink_to("real\n")
    cmd = hostside.sh_command("interpreter.sh", str(top / "bin" / "python3"), "-I", "-S", "-c", "pass")
    done = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr.strip()) == (
        77, "", f"fleet runs nothing on {top}/bin/python3 as root: {users} is not root's"), done


STDLIB = subprocess.run([hostside.SYSTEM_PYTHON, "-I", "-S", "-c", "import os; print(os.path.dirname(os.__file__))"],
                        capture_output=True, text=True).stdout.strip() if Path(hostside.SYSTEM_PYTHON).exists() else ""


def _a_users_file(at: Path) -> str:
    os.chown(at / "__init__.py", NOBODY.pw_uid, NOBODY.pw_gid)
    return f"{STDLIB}/encodings/__init__.py is not root's"


def _anyone_may_write(at: Path) -> str:
    (at / "__init__.py").chmod(0o666)
    return f"{STDLIB}/encodings/__init__.py is writable by others than root"


def _a_default_acl_lets_a_user_write(at: Path) -> str:
    """What root makes there (a __pycache__ file) nobody may write: the group bits say nothing of a default ACL."""
    entries = [(1, 7, ANY), (2, 7, NOBODY.pw_uid), (4, 5, ANY), (0x10, 7, ANY), (0x20, 5, ANY)]
    raw = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)
    os.setxattr(at, "system.posix_acl_default", raw)
    return f"{STDLIB} holds a file with an ACL"


ANY = 0xFFFFFFFF  # an ACL entry's id where it names none


@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare (a private mount over the host's stdlib)")
@pytest.mark.parametrize("change", [_a_users_file, _anyone_may_write, _a_default_acl_lets_a_user_write],
                         ids=lambda f: f.__name__.strip("_"))
def test_the_hosts_standard_library_a_user_may_change_runs_nothing(top: Path, change: Callable[[Path], str]) -> None:
    """The python's standard library (encodings, imported at every start, before owner.py's rule runs) is checked
    as its path is: its encodings folder replaced, in a private mount, by a copy a user may change. Fails before:
    root ran it (interpreter.sh looked at the path to the real file only)."""
    copy = top / "encodings"
    shutil.copytree(Path(STDLIB) / "encodings", copy, ignore=shutil.ignore_patterns("__pycache__"))
    copy.chmod(0o755)
    why = change(copy)
    cmd = hostside.sh_command("interpreter.sh", hostside.SYSTEM_PYTHON, "-I", "-S", "-c", "print('ran')")
    done = subprocess.run(["unshare", "-m", "sh", "-c", 'mount --bind "$1" "$2" && exec sh -c "$3"', "-", str(copy),
                           f"{STDLIB}/encodings", cmd], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr.strip()) == (
        77, "", f"fleet runs nothing on {hostside.SYSTEM_PYTHON} as root: {why}"), done
