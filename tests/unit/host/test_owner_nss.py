"""A group whose members NSS cannot list in full is not taken for empty (owner.py's Seen.alone).

With LDAP, SSSD or NIS in /etc/nsswitch.conf, getpwall lists no user of theirs (enumeration is off by default), so
a group whose members are all there read as "no member but the owner": its folder, group-writable, was the owner's
alone and the venv's code ran although those members may change it. The hosts' NSS data here are files of the test's
own (a private mount of /etc/passwd, /etc/group and /etc/nsswitch.conf, as test_owner_rule's hostile passwd); an
`ldap` source no library answers for stands for a directory whose users cannot be listed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fleet.host import programs as hostside

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="runs as other users: needs root (CI runs as root)"),
              pytest.mark.skipif(not Path(hostside.SYSTEM_PYTHON).exists(), reason="no /usr/bin/python3 here"),
              pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare (a private /etc/passwd)")]

UID, OWN, TEAM = 4343, 4343, 4345  # a user, its own group, a group that lists no member in files
FILES = "passwd: files systemd\ngroup: files systemd\n"
LDAP = "passwd: files ldap\ngroup: files [SUCCESS=merge] ldap  # a directory's users\n"


def _venv(top: Path, group: int) -> Path:
    """The user's venv, its lib/ 0775 of `group`."""
    venv = top / "venv"
    (venv / "lib").mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to("/usr/bin/python3")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")  # python3 -m venv's
    for here, dirs, files in os.walk(venv):
        for name in [here, *(os.path.join(here, n) for n in dirs + files)]:
            os.lchown(name, UID, OWN)
    os.chown(venv / "lib", UID, group)
    (venv / "lib").chmod(0o775)
    return venv


def _runs_as(top: Path, venv: Path, nsswitch: str, group: str = "") -> tuple[int, str, str]:
    """(exit, stdout, stderr) of `id -u` run through as_owner where NSS is files of the test's own."""
    files = {"passwd": Path("/etc/passwd").read_text() + f"user:x:{UID}:{OWN}::/:/bin/sh\n",
             "group": group or Path("/etc/group").read_text() + f"user:x:{OWN}:\nteam:x:{TEAM}:\n",
             "nsswitch.conf": nsswitch}
    mounts = []
    for name, text in files.items():
        (top / name).write_text(text)
        mounts.append(f"mount --bind {top / name} /etc/{name}")
    done = subprocess.run(["unshare", "-m", "sh", "-c", " && ".join([*mounts, 'exec sh -c "$1"']), "-",
                           hostside.as_owner(str(venv), "id", "-u")], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout.strip(), done.stderr.strip()


def test_a_folder_of_a_group_ldap_may_hold_members_of_is_refused(top):
    """Fails before: team lists no member in files, so lib/ read as the user's alone and the code ran as that user."""
    venv = _venv(top, TEAM)
    assert _runs_as(top, venv, LDAP) == (77, "", f"fleet runs nothing of {venv} as root: {venv}/lib is writable by "
                                                 "others than its owner")


def test_the_same_folder_where_nss_lists_every_user_is_the_owners(top):
    assert _runs_as(top, _venv(top, TEAM), FILES) == (0, str(UID), "")


def test_a_folder_of_the_owners_own_group_is_the_owners_under_ldap_too(top):
    """umask 002 of a user private group on an LDAP host: a member of the user's own group is the admin's doing."""
    assert _runs_as(top, _venv(top, OWN), LDAP) == (0, str(UID), "")


def test_an_nsswitch_conf_naming_no_passwd_source_is_not_taken_for_whole(top):
    """glibc's defaults differ by release (compat with NIS's `+` lines on older ones): not known, so not whole."""
    venv = _venv(top, TEAM)
    assert _runs_as(top, venv, "# passwd and group unsaid\nhosts: files dns\n")[0] == 77


def test_a_second_group_line_of_the_same_gid_is_read_too(top):
    """/etc/group may hold two names for one gid (groupadd -o): `team:x:4345:` and `team2:x:4345:nobody`.
    grp.getgrgid returns the first line only, so the rule saw no member but the owner and ran the user's venv (lib/
    0775 of gid 4345) as that user, while initgroups (runuser, su, login) gives nobody gid 4345 from the second line:
    nobody may write lib/. Fails before: ran as the user; now refused."""
    venv = _venv(top, TEAM)
    group = Path("/etc/group").read_text() + f"user:x:{OWN}:\nteam:x:{TEAM}:\nteam2:x:{TEAM}:nobody\n"
    assert _runs_as(top, venv, FILES, group) == (77, "", f"fleet runs nothing of {venv} as root: {venv}/lib is "
                                                          "writable by others than its owner")
