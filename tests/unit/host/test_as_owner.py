"""as_owner.sh: a command that runs a venv's code runs as root only where root alone may change that venv, as its
one other owner where there is one, and not at all where others may change it too (run here as root, on folders
made here)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from fleet.host import programs as hostside

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="as_owner.py drops privileges: run as root")


def _venv(tmp_path: Path) -> Path:
    tmp_path.chmod(0o755)  # pytest's own folders are root's and 0700: the venv's path is root's alone
    venv = tmp_path / "venv"
    (venv / "lib" / "site-packages").mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to("/usr/bin/python3")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")  # python3 -m venv's
    return venv


def _as_owner(venv: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", hostside.as_owner(str(venv), "id", "-un")], capture_output=True, text=True)


def test_a_venv_root_alone_may_change_runs_as_root(tmp_path):
    done = _as_owner(_venv(tmp_path))
    assert (done.returncode, done.stdout.strip()) == (0, "root"), done


def test_a_venv_a_user_owns_any_part_of_runs_as_that_user(tmp_path):
    venv = _venv(tmp_path)
    nobody = pwd.getpwnam("nobody")
    os.chown(venv / "lib" / "site-packages", nobody.pw_uid, nobody.pw_gid)  # one folder deep in it is enough
    done = _as_owner(venv)
    assert (done.returncode, done.stdout.strip()) == (0, "nobody"), done


def test_a_venv_others_may_change_or_two_users_own_is_refused_in_one_line(tmp_path):
    venv = _venv(tmp_path)
    (venv / "lib").chmod(0o777)
    open_ = _as_owner(venv)
    (venv / "lib").chmod(0o755)
    nobody = pwd.getpwnam("nobody")
    os.chown(venv / "lib", nobody.pw_uid, nobody.pw_gid)
    other = next(p for p in pwd.getpwall() if p.pw_uid not in (0, nobody.pw_uid))
    os.chown(venv / "bin", other.pw_uid, other.pw_gid)
    two = _as_owner(venv)
    assert (open_.returncode, open_.stdout, open_.stderr.strip()) == (
        77, "", f"fleet runs nothing of {venv} as root: {venv}/lib is writable by others than its owner")
    assert two.returncode == 77 and two.stdout == "" and two.stderr.strip() == (
        f"fleet runs nothing of {venv} as root: it is owned by "
        f"{','.join(sorted([other.pw_name, 'nobody']))}, not one user"), two


def test_a_venv_reached_by_a_link_is_judged_by_the_folder_it_leads_to(tmp_path):
    venv = _venv(tmp_path)
    nobody = pwd.getpwnam("nobody")
    os.chown(venv / "lib", nobody.pw_uid, nobody.pw_gid)
    link = tmp_path / "link"
    link.symlink_to(venv)  # root's link, root's folder: only what it leads to is the user's
    done = _as_owner(link)
    assert (done.returncode, done.stdout.strip()) == (0, "nobody"), done


@pytest.mark.parametrize("folder", ["root's alone", "a sticky folder anyone may write", "not root: its own"])
def test_a_command_run_as_root_starts_in_a_folder_root_alone_may_change(folder):
    """Root's run leaves a working folder others may add modules to (python -c puts it first on sys.path): a sticky
    /tmp passed owner.py's rule, sticky folders being excused above a venv. A run that is not root's (a host fleet
    logs into as a user, no become) stays where it is: a benchmark's relative --output-file lands there."""
    top = Path(tempfile.mkdtemp(prefix="fleet-as-owner-"))  # pytest's folders are root's 0700: nobody must reach it
    try:
        venv = _venv(top)
        here = top / "here"
        here.mkdir(mode=0o755)
        if folder == "a sticky folder anyone may write":
            here.chmod(0o1777)
        if folder == "not root: its own":
            nobody = pwd.getpwnam("nobody")
            os.chown(here, nobody.pw_uid, nobody.pw_gid)
        run = ["runuser", "-u", "nobody", "--"] if folder == "not root: its own" else []
        done = subprocess.run([*run, "sh", "-c", hostside.as_owner(str(venv), "pwd")], capture_output=True,
                              text=True, cwd=here)
        assert done.returncode == 0, done
        assert done.stdout.strip() == ("/" if folder == "a sticky folder anyone may write" else str(here)), done
    finally:
        shutil.rmtree(top)
