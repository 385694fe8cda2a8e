"""One privilege drop for the venv's owner (owner.py's drop()), whichever step runs as that owner: the venv's code
(as_owner.py) and the patch engine's writes (patch_host.py) take the same uid, gid and groups, the groups runuser
gives that user (its supplementary ones too: a server's GPU devices are often its `video`/`render` group's).

A user with a supplementary group lives in a private /etc/passwd and /etc/group (a private mount, as
test_owner_rule's hostile passwd); each program's drop is read from its system calls (strace)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fleet.host import kcache
from fleet.host import programs as hostside

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="drops privileges: needs root (CI runs as root)"),
              pytest.mark.skipif(not Path(hostside.SYSTEM_PYTHON).exists(), reason="no /usr/bin/python3 here"),
              pytest.mark.skipif(not (shutil.which("unshare") and shutil.which("strace") and shutil.which("runuser")),
                                 reason="needs unshare (a private /etc/passwd), strace and runuser")]

UID, GID, EXTRA = 4343, 4343, 4344  # a user, its own group, and a group that lists it as a member
ORIGINAL = b"if major not in (9, 10):\n    raise RuntimeError\n"
PATCHED = ORIGINAL.replace(b"(9, 10)", b"(9, 10, 12)")
_DROP = re.compile(r"^\d+ +(set(?:groups|gid|uid)\(.*\)) += 0$")


def _users_venv(top: Path) -> Path:
    """A venv of the user's, one package file to patch; its kernel.py returned."""
    sub = top / "venv" / "lib" / "python3.11" / "site-packages" / "gated"
    sub.mkdir(parents=True)
    (sub / "__init__.py").write_text("")
    (sub / "kernel.py").write_bytes(ORIGINAL)
    (top / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    for here, dirs, files in os.walk(top / "venv"):
        for name in [here, *(os.path.join(here, n) for n in dirs + files)]:
            os.lchown(name, UID, GID)
    return sub / "kernel.py"


def _as_the_user_exists(top: Path, *argv: str, home: str = "/", **run: Any) -> subprocess.CompletedProcess[str]:
    """`argv` where /etc/passwd and /etc/group also hold the user `dropper` (its home `home`) and its groups, traced
    into top/trace; `run`: subprocess.run's cwd, env."""
    passwd, group = top / "passwd", top / "group"
    passwd.write_text(Path("/etc/passwd").read_text() + f"dropper:x:{UID}:{GID}::{home}:/bin/sh\n")
    group.write_text(Path("/etc/group").read_text() + f"dropper:x:{GID}:\nextra:x:{EXTRA}:dropper\n")
    mounts = 'mount --bind "$1" /etc/passwd && mount --bind "$2" /etc/group && shift 2 && exec "$@"'
    return subprocess.run(["unshare", "-m", "sh", "-c", mounts, "-", str(passwd), str(group), "strace", "-f", "-qq",
                           "-e", "trace=setgroups,setgid,setuid", "-o", str(top / "trace"), *argv],
                          capture_output=True, text=True, timeout=60, **run)


def _drop_seen(top: Path) -> list[str]:
    """The successful setgroups, setgid and setuid calls of the last traced run, in order, without their pids."""
    return [m.group(1) for m in map(_DROP.match, (top / "trace").read_text().splitlines()) if m]


def _patch(top: Path, target: Path) -> dict:
    off = ORIGINAL.index(b"(9, 10)")
    step = [off, base64.b64encode(b"(9, 10)").decode(), base64.b64encode(b"(9, 10, 12)").decode()]
    files = [{"path": str(target), "package": "gated", "file": "kernel.py", "dist": None, "version": None,
              "sha_before": hashlib.sha256(ORIGINAL).hexdigest(), "sha_after": hashlib.sha256(PATCHED).hexdigest(),
              "steps": [step]}]
    req = {"root": str(top / "backups"), "files": files, "run": "r1", "sets": ["demo"], "time": "T", "by": "test",
           "modules": [], "bases": [], "venv": str(top / "venv")}
    arg = base64.b64encode(json.dumps(req).encode()).decode()
    done = _as_the_user_exists(top, "sh", "-c", hostside.system_python_command("patch_host.py", "apply", arg))
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("FLEET-JSON:"))
    answer: dict = json.loads(line[len("FLEET-JSON:"):])
    return answer


def test_the_venvs_code_runs_with_the_groups_runuser_gives_its_owner(top):
    _users_venv(top)
    runuser = _as_the_user_exists(top, "runuser", "-u", "dropper", "--", "id")
    ran = _as_the_user_exists(top, "sh", "-c", hostside.as_owner(str(top / "venv"), "id"))
    assert (ran.returncode, ran.stdout) == (0, runuser.stdout) and f"{EXTRA}(extra)" in ran.stdout, (ran, runuser)


def test_the_patch_engine_writes_with_the_same_drop_as_the_venvs_code(top):
    """Fails before: patch_host dropped every supplementary group (setgroups([])), as_owner.py kept them
    (initgroups): two identities for one owner."""
    target = _users_venv(top)
    ran = _as_the_user_exists(top, "sh", "-c", hostside.as_owner(str(top / "venv"), "true"))
    as_owner = _drop_seen(top)
    done = _patch(top, target)
    patch = _drop_seen(top)
    assert done["ok"] and target.read_bytes() == PATCHED and ran.returncode == 0, done
    assert as_owner == [f"setgroups(2, [{GID}, {EXTRA}])", f"setgid({GID})", f"setuid({UID})"]
    assert patch == as_owner * (len(patch) // 3) and patch, patch  # one drop per write: the probe, the write



def test_the_cache_steps_drop_to_the_servers_user_as_the_venvs_code_does(top):
    """kcache.py's --user drop is owner.py's drop(), shipped with it (`#@include owner.py`): the same uid, gid and
    groups as the venv's code. Failed before (the second part): kcache.py kept a _drop of its own that matched
    drop() by its calls only, written twice."""
    _users_venv(top)
    _as_the_user_exists(top, "sh", "-c", hostside.as_owner(str(top / "venv"), "true"))
    as_owner = _drop_seen(top)
    done = _as_the_user_exists(top, "sh", "-c", kcache.command("/unused", "dropper", "collect", "1000000",
                                                                  str(top / "cache" / "ops")))
    assert done.returncode == 0, done.stderr
    assert _drop_seen(top) == as_owner == [f"setgroups(2, [{GID}, {EXTRA}])", f"setgid({GID})", f"setuid({UID})"]
    source = (Path(hostside.__file__).parent / "kcache.py").read_text()
    assert not re.search(r"\bos\.(setuid|setgid|setgroups|initgroups)\(", source)
    assert hostside.text("owner.py") in hostside.text("kcache.py")


ROOTS_SESSION = {"HOME": "/root", "USER": "root", "LOGNAME": "root", "XDG_RUNTIME_DIR": "/run/user/0",
                 "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/0/bus", "XDG_CONFIG_HOME": "/root/.config",
                 "XDG_CACHE_HOME": "/root/.cache", "MAIL": "/var/mail/root", "SSH_AUTH_SOCK": "/tmp/ssh-r/agent.1",
                 "OLDPWD": "/root"}


def test_the_owners_code_gets_none_of_roots_session_and_never_roots_folder(top):
    """What the dropped process sees. Failed before: root's environment but HOME, USER, LOGNAME (XDG_RUNTIME_DIR
    /run/user/0, root's bus, config and cache folders, agent), in root's working folder (0700: the owner's code
    could not even read it), as runuser -u gives. Now: none of root's session, an ordinary variable kept; in the
    owner's home, or in the working folder where that is the owner's (a benchmark's $d/w)."""
    _users_venv(top)
    home, roots, works = top / "home", top / "roots", top / "w"
    for folder in (home, roots, works):
        folder.mkdir()
    roots.chmod(0o700)
    os.chown(home, UID, GID)
    os.chown(works, UID, GID)
    show = hostside.as_owner(str(top / "venv"), "sh", "-c", 'env; echo "cwd $(pwd -P)"')
    seen = {}
    for where in (roots, works):
        env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "CUDA_VISIBLE_DEVICES": "0,1", **ROOTS_SESSION,
               "PWD": str(where)}
        done = _as_the_user_exists(top, "sh", "-c", show, home=str(home), cwd=where, env=env)
        assert done.returncode == 0, done.stderr
        seen[where] = sorted(done.stdout.splitlines())
    owners = {"CUDA_VISIBLE_DEVICES=0,1", f"HOME={home}", "LANG=C.UTF-8", "LOGNAME=dropper", "USER=dropper",
              f"PATH={os.environ['PATH']}"}
    assert seen[roots] == sorted(owners | {f"PWD={home}", f"cwd {home}"})
    assert seen[works] == sorted(owners | {f"PWD={works}", f"cwd {works}"})
