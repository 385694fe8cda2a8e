"""What a venv's python may run code from, and what root runs while reading a venv: owner.py's venv_reach (pyvenv.cfg
read as getpath and site.venv read it, the standard library getpath finds, the base's site folders a venv includes,
a bin/python that is no ELF program) and venv_site.py (patch_host.py and scan.py never put a venv on sys.path). Found
by an adversarial review; each test failed before its fix. Run here as root, on folders made here, with private
mounts (unshare -m) where the layout needs a system folder changed.

A marker file (0666) records the uid of every process that ran the user's code: root's uid there is the failure."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from uidmark import NOBODY, REAL, STDLIB, SYSTEM_SITE, VERSION, chown_tree, code, marker, site_of, venv_at

from fleet.host import programs as hostside

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="runs as other users: needs root (CI runs as root)"),
              pytest.mark.skipif(not Path(hostside.SYSTEM_PYTHON).exists(), reason="no /usr/bin/python3 here")]
UNSHARE = pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare (a private mount)")

_SITES = (subprocess.run([hostside.SYSTEM_PYTHON, "-I", "-S", "-c", "import site; print(*site.getsitepackages())"],
                         capture_output=True, text=True).stdout.split()
          if os.path.exists(hostside.SYSTEM_PYTHON) else [])  # the base's site folders, SYSTEM_SITE first


def _sh(cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=120)



@pytest.mark.parametrize("program", ["patch_host read", "patch_host apply", "scan"])
def test_the_host_programs_import_no_module_of_a_venvs_owner_as_root(top, program):
    """patch_host.py and scan.py run as root on the host's python -I -S and put the venv's site-packages FIRST on
    sys.path (venv_site.use_venv), then import standard modules not yet imported: importlib.metadata (its csv,
    email, zipfile, textwrap, pathlib...: do_read's dist_of, scan.py's dist_of) and `ast` (owner.finder_paths, in
    apply's rule walk when the venv has an editable finder). A venv owner's csv.py / email.py / ast.py in their
    site-packages runs as root: invariant (a), no drop, no rule asked (read and scan never ask it). Severity: HIGH
    (any user whose venv fleet patches or audits gets root; files of that name need no privilege).
    Fix: import everything the program needs (importlib.metadata, ast) BEFORE use_venv touches sys.path, and append
    the venv's folders (sys.path += ...) instead of prepending them, or better pass them as `path=` to PathFinder and
    importlib.metadata.distributions(path=[...]) and leave sys.path alone."""
    ran = marker(top)
    venv = venv_at(top / "venv")
    for name in ("csv", "email", "zipfile", "textwrap", "pathlib", "typing", "ast"):
        (site_of(venv) / f"{name}.py").write_text(code(ran))
    if program == "patch_host apply":  # an editable install's finder: the rule reads its tables with `ast`
        (site_of(venv) / "__editable___gated_0_1_finder.py").write_text("MAPPING = {}\nNAMESPACES = {}\n")
    chown_tree(venv, NOBODY.pw_uid, NOBODY.pw_gid)
    target = site_of(venv) / "gated" / "__init__.py"
    if program == "scan":
        cmd = hostside.system_python_command("scan.py", base64.b64encode(json.dumps(
            {"scope": {"gated": ["*.py"]}, "venv": str(venv)}).encode()).decode())
    else:
        mode = program.split()[1]
        req = {"packages": ["gated"], "dists": ["gated"], "files": [["gated", "__init__.py"]], "modules": [],
               "root": str(top / "backups"), "venv": str(venv), "run": "r1", "sets": ["x"], "time": "T", "by": "t",
               "bases": []}
        if mode == "apply":
            req["files"] = [{"path": str(target), "package": "gated", "file": "__init__.py", "dist": None,
                             "version": None, "sha_before": hashlib.sha256(b"").hexdigest(),
                             "sha_after": hashlib.sha256(b"").hexdigest(), "steps": []}]
        cmd = hostside.system_python_command("patch_host.py", mode, base64.b64encode(json.dumps(req).encode()).decode())
    _sh(cmd)
    assert "0" not in ran.read_text().split(), f"root ran {NOBODY.pw_name}'s module: {ran.read_text()!r}"



def _users_stdlib(top: Path, ran: Path) -> Path:
    """nobody's copy of the standard library's top (enough to start), its encodings package (imported at every
    start, not frozen) recording who ran it; the `home` (bin folder) a pyvenv.cfg would name returned."""
    home = top / "nobody"
    lib = home / "lib" / VERSION
    lib.mkdir(parents=True)
    (home / "bin").mkdir()
    for f in STDLIB.glob("*.py"):
        shutil.copy2(f, lib / f.name)
    for pkg in ("encodings", "importlib", "collections", "re"):
        shutil.copytree(STDLIB / pkg, lib / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    init = lib / "encodings" / "__init__.py"
    init.write_text(code(ran) + init.read_text())
    chown_tree(home, NOBODY.pw_uid, NOBODY.pw_gid)
    return home / "bin"


def _copiedvenv_at(top: Path) -> Path:
    """A root venv made with --copies: bin/python root's own copy of the host's interpreter."""
    venv = top / "venv"
    (site_of(venv)).mkdir(parents=True)
    (venv / "bin").mkdir()
    shutil.copy2(REAL, venv / "bin" / "python")
    return venv


@pytest.mark.parametrize("where", ["home", "Home", "bin/pyvenv.cfg"], ids=["control-home-passes", "capital-Home",
                                                                          "bin-pyvenv-cfg"])
def test_pyvenv_cfg_is_read_as_the_interpreter_reads_it(top, where):
    """CPython reads pyvenv.cfg's key case-insensitively (getpath: key.strip().lower() == 'home') and reads
    bin/pyvenv.cfg (beside the executable) where VENV/pyvenv.cfg is missing; owner.stdlib_of reads only
    VENV/pyvenv.cfg and only `home` in lower case. A root venv (--copies) whose `Home = ` (or bin/pyvenv.cfg's home)
    is nobody's folder takes its standard library (encodings, at every start) from nobody: the rule saw root alone
    and as_owner ran it as root. Invariant (a)/(b). Severity: MEDIUM (needs a root venv whose cfg names a user's
    folder: a copied or hand-made venv). Fix: stdlib_of reads the file as getpath does: VENV/bin/pyvenv.cfg too
    (the executable's folder: both, to be safe), keys lowered and stripped; better, ask the venv's interpreter
    nothing and walk sys.base_prefix as getpath computes it (landmark search up from home's folder included)."""
    ran = marker(top)
    home = _users_stdlib(top, ran)
    venv = _copiedvenv_at(top)
    if where == "bin/pyvenv.cfg":
        (venv / "bin" / "pyvenv.cfg").write_text(f"home = {home}\ninclude-system-site-packages = false\n")
    else:
        (venv / "pyvenv.cfg").write_text(f"{where} = {home}\ninclude-system-site-packages = false\n")
    done = _sh(hostside.as_owner(str(venv), str(venv / "bin" / "python"), "-c", "import sys; print(sys.base_prefix)"))
    assert (done.returncode, ran.read_text().split()) in [(0, [str(NOBODY.pw_uid)]), (77, [])], (done, ran.read_text())



@UNSHARE
@pytest.mark.parametrize("cfg", ["home = /usr/bin\ninclude-system-site-packages = true\n", "home = /usr/bin\n"],
                         ids=["true", "key-absent-site-py-defaults-to-true"])
def test_the_system_site_packages_a_venv_includes_are_walked(top, cfg):
    """A root venv with include-system-site-packages = true (or without the key: site.venv() defaults it to "true")
    puts /usr/local/lib/python3.X/dist-packages and /usr/lib/python3/dist-packages on sys.path and runs their .pth
    files. The rule walks the venv, its python and its stdlib, never these: here the first one is nobody's (a
    private bind mount of nobody's folder, as a Debian /usr/local of group staff, or a user's `pip install --target`
    there) with a .pth: root ran it. Invariant (a)/(b). Severity: MEDIUM. Fix: venv_owner also walks (as trees)
    site.getsitepackages() of the base interpreter when pyvenv.cfg's include-system-site-packages is not "false"
    (read as site.py does: lowered, default true), and the user site (~/.local/lib/pythonX.Y/site-packages of the
    user it runs as) in that case too."""
    ran = marker(top)
    venv = venv_at(top / "venv", cfg)
    users = top / "syssite"
    users.mkdir()
    (users / "adv13.pth").write_text(code(ran))
    chown_tree(users, NOBODY.pw_uid, NOBODY.pw_gid)
    cmd = hostside.as_owner(str(venv), str(venv / "bin" / "python"), "-c", "pass")
    done = subprocess.run(["unshare", "-m", "sh", "-c", 'mkdir -p "$2" && mount --bind "$1" "$2" && exec sh -c "$3"',
                           "-", str(users), SYSTEM_SITE, cmd], capture_output=True, text=True, timeout=60)
    assert (done.returncode, ran.read_text().split()) in [(0, [str(NOBODY.pw_uid)]), (77, [])], (done, ran.read_text())



def test_a_venv_python_that_is_a_script_is_refused(top):
    """owner.venv_owner walks bin/python to its real file and stops there. Where that file is a script (a wrapper a
    tool or an admin put in place: `#!/path/python3`), the kernel runs the interpreter the #! line names, here
    nobody's program: the rule saw root alone and as_owner ran it as root. Invariant (a)/(b). Severity: LOW (root's
    own venv must hold such a wrapper). Fix: where bin/python's real file starts with `#!`, lead the interpreter it
    names too (a path in `paths`); or refuse a bin/python that is no ELF file."""
    ran = marker(top)
    users = top / "nobody"
    users.mkdir()
    (users / "python3").write_text(f"#!/bin/sh\nid -u >> {ran}\n")
    (users / "python3").chmod(0o755)
    chown_tree(users, NOBODY.pw_uid, NOBODY.pw_gid)
    venv = venv_at(top / "venv")
    (venv / "bin" / "python").unlink()
    (venv / "bin" / "python").write_text(f"#!{users / 'python3'}\n")
    (venv / "bin" / "python").chmod(0o755)
    done = _sh(hostside.as_owner(str(venv), str(venv / "bin" / "python"), "-c", "pass"))
    assert (done.returncode, ran.read_text().split()) in [(0, [str(NOBODY.pw_uid)]), (77, [])], (done, ran.read_text())


@UNSHARE
@pytest.mark.parametrize("where", ["system site", "user site"])
def test_a_users_module_in_the_site_folders_a_venv_includes_runs_as_that_user(top, where):
    """The base's site folders a venv includes (include-system-site-packages = true) and the user site of HOME
    (site.py enables it then) are walked as its own: nobody's module there (a private bind mount of nobody's folder
    over the first base site, the others made empty, root's; or HOME's ~/.local) makes nobody the owner, and the
    venv's python runs as nobody. Fails before: it ran as root."""
    venv = venv_at(top / "venv", "home = /usr/bin\ninclude-system-site-packages = true\n")
    users = top / "home" / ".local" / "lib" / VERSION / "site-packages" if where == "user site" else top / "syssite"
    users.mkdir(parents=True)
    (users / "mapped.py").write_text("")
    chown_tree(top / "home" if where == "user site" else users, NOBODY.pw_uid, NOBODY.pw_gid)
    (top / "empty").mkdir()
    first = str(users) if where == "system site" else str(top / "empty")
    others = [d for d in _SITES[1:] if os.path.isdir(d)]
    mounts = " && ".join(['mount --bind "$1" "$2"', *(f"mount --bind {top / 'empty'} {d}" for d in others)])
    cmd = hostside.as_owner(str(venv), "id", "-u")
    done = subprocess.run(["unshare", "-m", "sh", "-c", f'mkdir -p "$2" && {mounts} && exec sh -c "$3"', "-",
                           first, SYSTEM_SITE, cmd], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "HOME": str(top / "home")})
    assert (done.returncode, done.stdout.strip()) == (0, str(NOBODY.pw_uid)), done
