"""patch_host.py writes a user's venv as that user (issue 49's rule carried to the patch engine's writes).

fleet runs as root on the host; a venv in a user's home is the user's. Between the engine's read and its apply
(two round trips) the user may swap a folder of the venv for a link to one of root's holding a copy of the file
read: written as root, the patch then lands in root's folder. Written as the one user who may change the path
(lstat of each folder up to /: a link is its maker's), it lands nowhere that user could not write anyway. A
root-owned venv is written as root, as before."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from fleet.host import programs as hostside

pytestmark = [pytest.mark.skipif(not Path(hostside.SYSTEM_PYTHON).exists(), reason="no /usr/bin/python3 here"),
              pytest.mark.skipif(os.geteuid() != 0, reason="writes as another user: needs root (CI runs as root)")]

USER = 4242  # a uid with no passwd entry: the folder's own group is used
ORIGINAL = b"if major not in (9, 10):\n    raise RuntimeError\n"
PATCHED = ORIGINAL.replace(b"(9, 10)", b"(9, 10, 12)")


@pytest.fixture
def home(top: Path) -> Path:
    """A folder the user may reach, as a home is (conftest's `top`)."""
    return top


def _run(mode: str, req: dict) -> dict:
    arg = base64.b64encode(json.dumps(req).encode()).decode()
    done = subprocess.run(["sh", "-c", hostside.system_python_command("patch_host.py", mode, arg)],
                          capture_output=True, text=True, timeout=60)
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("FLEET-JSON:"))
    return json.loads(line[len("FLEET-JSON:"):])


def _chown_tree(top: Path, uid: int) -> None:
    for here, dirs, files in os.walk(top):
        for name in [here, *(os.path.join(here, n) for n in dirs + files)]:
            os.lchown(name, uid, uid)


def _venv(home: Path, owner: int) -> Path:
    site = home / "venv" / "lib" / "python3.11" / "site-packages" / "gated" / "sub"
    site.mkdir(parents=True)
    (site.parent / "__init__.py").write_text("")
    (site / "__init__.py").write_text("")
    (site / "kernel.py").write_bytes(ORIGINAL)
    (home / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    _chown_tree(home / "venv", owner)
    return site / "kernel.py"


def _apply(home: Path, target: Path) -> dict:
    return _run("apply", {"root": str(home / "backups"), "files": _apply_files(target), "run": "r1", "sets": ["demo"],
                          "time": "T", "by": "test", "modules": [], "bases": [], "venv": str(home / "venv")})


def test_a_users_venv_is_patched_as_that_user(home):
    target = _venv(home, USER)
    done = _apply(home, target)
    assert done["ok"], done
    assert target.read_bytes() == PATCHED and target.stat().st_uid == USER
    assert (home / "backups").stat().st_uid == 0  # fleet's backups stay root's


def test_a_folder_swapped_for_a_link_to_roots_after_the_read_gets_nothing_written_there(home):
    """Fails before: root followed the link and patched root's own copy."""
    target = _venv(home, USER)
    roots = home / "roots"  # a folder of root's holding a copy of the file read
    roots.mkdir()
    (roots / "kernel.py").write_bytes(ORIGINAL)
    sub = target.parent
    os.rename(sub, home / "moved")  # what the user may do: the folder above is theirs
    os.symlink(roots, sub)
    os.lchown(sub, USER, USER)
    done = _apply(home, target)
    assert not done["ok"] and "nothing written" in done["error"], done
    assert (roots / "kernel.py").read_bytes() == ORIGINAL
    assert not [p for p in roots.iterdir() if p.name != "kernel.py"], "no temporary file left in root's folder"


def test_a_root_owned_venv_is_patched_as_root(home):
    target = _venv(home, 0)
    done = _apply(home, target)
    assert done["ok"] and target.read_bytes() == PATCHED and target.stat().st_uid == 0, done


def test_a_venv_two_users_may_change_is_written_by_neither(home):
    target = _venv(home, USER)
    os.chown(target.parent, USER + 1, USER + 1)
    done = _apply(home, target)
    assert not done["ok"] and "it is owned by 4242,4243, not one user" in done["error"], done
    assert target.read_bytes() == ORIGINAL


def test_a_users_venv_is_reverted_as_that_user(home):
    target = _venv(home, USER)
    assert _apply(home, target)["ok"]
    files = [{"path": str(target), "sha_before": hashlib.sha256(ORIGINAL).hexdigest(),
              "sha_after": hashlib.sha256(PATCHED).hexdigest()}]
    done = _run("revert", {"root": str(home / "backups"), "run": "r1", "files": files, "time": "T2", "by": "test",
                           "bases": [], "venv": str(home / "venv")})
    assert done["ok"] and target.read_bytes() == ORIGINAL and target.stat().st_uid == USER, done


def _apply_files(target: Path) -> list:
    off = ORIGINAL.index(b"(9, 10)")
    step = [off, base64.b64encode(b"(9, 10)").decode(), base64.b64encode(b"(9, 10, 12)").decode()]
    return [{"path": str(target), "package": "gated.sub", "file": "kernel.py", "dist": None, "version": None,
             "sha_before": hashlib.sha256(ORIGINAL).hexdigest(), "sha_after": hashlib.sha256(PATCHED).hexdigest(),
             "steps": [step]}]


def _revert(home: Path, target: Path, venv: Path) -> dict:
    files = [{"path": str(target), "sha_before": hashlib.sha256(ORIGINAL).hexdigest(),
              "sha_after": hashlib.sha256(PATCHED).hexdigest()}]
    return _run("revert", {"root": str(home / "backups"), "run": "r1", "files": files, "time": "T2", "by": "test",
                           "bases": [], "venv": str(venv)})


def _packages_venv(home: Path, inventory_owner: int) -> tuple[Path, Path]:
    """A `packages:` release's own venv (root's, at home/pkgs/venv) patched, and the inventory's venv beside it
    (home/venv, of `inventory_owner`): recovery's put-back names the inventory's venv (engine._call: host.venv)."""
    _venv(home, inventory_owner)
    (home / "pkgs").mkdir()
    target = _venv(home / "pkgs", 0)
    assert _run("apply", {"root": str(home / "backups"), "files": _apply_files(target), "run": "r1", "sets": ["demo"],
                          "time": "T", "by": "test", "modules": [], "bases": [],
                          "venv": str(home / "pkgs" / "venv")})["ok"]
    return target, home / "venv"


def test_a_put_back_in_a_packages_venv_is_decided_by_that_venv_not_the_inventorys(home):
    """Fails before: the inventory's venv is the user's, so the put-back of root's release venv ran as that user
    (`Permission denied`, the patch left in place)."""
    target, inventory = _packages_venv(home, USER)
    done = _revert(home, target, inventory)
    assert done["ok"] and target.read_bytes() == ORIGINAL and target.stat().st_uid == 0, done


def test_a_put_back_where_the_packages_venv_imports_a_users_module_is_not_written_as_root(home):
    """Fails before: the release's venv gained a .pth naming a user's folder after the apply; the inventory's venv
    (root's, clean) decided, so root wrote into a venv whose code that user may change."""
    target, inventory = _packages_venv(home, 0)
    src = home / "src"
    src.mkdir()
    os.chown(src, USER, USER)
    (target.parents[2] / "users.pth").write_text(f"{src}\n")
    done = _revert(home, target, inventory)
    assert not done["ok"] and "Permission denied" in done["error"] and target.read_bytes() == PATCHED, done
