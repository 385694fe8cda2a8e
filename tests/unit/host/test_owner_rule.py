"""One rule for who owns a venv, whichever step asks (owner.py): the step that runs the venv's code (as_owner.py),
the patch engine's writes (patch_host.py) and the benchmark's temp folder and key copy (benchrun) decide alike.

Each layout below is one on which two of the three copies fleet had decided differently (as_owner.sh, patch_host's
owner_of, benchrun's `stat` of the venv's top folder); each test fails on that code for the copies named in the
layout's note. Run here as root, on folders made here, the programs run as on a host."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pwd
import shutil
import struct
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from fleet.deploy import bench
from fleet.host import benchrun
from fleet.host import programs as hostside

pytestmark = [pytest.mark.skipif(not Path(hostside.SYSTEM_PYTHON).exists(), reason="no /usr/bin/python3 here"),
              pytest.mark.skipif(os.geteuid() != 0, reason="runs as other users: needs root (CI runs as root)")]

NOBODY = pwd.getpwnam("nobody")
OTHER = next(p for p in pwd.getpwall() if p.pw_uid not in (0, NOBODY.pw_uid))
NO_ENTRY = 4242  # a uid with no passwd entry
ORIGINAL = b"if major not in (9, 10):\n    raise RuntimeError\n"
PATCHED = ORIGINAL.replace(b"(9, 10)", b"(9, 10, 12)")
SECRET = "sk-owner-rule"


def _venv(at: Path) -> Path:
    """A root-owned venv at `at`: bin/python a link to the host's, one package file to patch."""
    sub = at / "lib" / "python3.11" / "site-packages" / "gated" / "sub"
    sub.mkdir(parents=True)
    (sub.parent / "__init__.py").write_text("")
    (sub / "__init__.py").write_text("")
    (sub / "kernel.py").write_bytes(ORIGINAL)
    (at / "bin").mkdir()
    (at / "bin" / "python").symlink_to("/usr/bin/python3")
    (at / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    return at


def _users_folder(top: Path, uid: int = NOBODY.pw_uid) -> Path:
    home = top / f"home{uid}"
    home.mkdir()
    os.chown(home, uid, uid)
    return home


def open_folder(top: Path) -> Path:
    """as_owner.sh refused; patch_host wrote as root (it read no mode bits)."""
    venv = _venv(top / "venv")
    (venv / "lib").chmod(0o777)
    return venv


def group_shared_folder(top: Path) -> Path:
    """root:nogroup 0775 (nobody is in nogroup): as_owner.sh refused; patch_host wrote as root."""
    venv = _venv(top / "venv")
    os.chown(venv / "lib", 0, NOBODY.pw_gid)
    (venv / "lib").chmod(0o775)
    return venv


def a_users_folder_off_the_files_path(top: Path) -> Path:
    """bin/ nobody's: as_owner.sh ran as nobody; patch_host wrote lib/ as root; benchrun judged the top folder
    (root's) and handed nobody's benchmark neither temp folder nor key."""
    venv = _venv(top / "venv")
    os.chown(venv / "bin", NOBODY.pw_uid, NOBODY.pw_gid)
    return venv


def its_python_in_a_users_folder(top: Path) -> Path:
    """bin/python's real file lies in nobody's folder: as_owner.sh ran as nobody; patch_host and benchrun as root."""
    venv = _venv(top / "venv")
    real = _users_folder(top) / "python3"
    shutil.copy2(os.path.realpath("/usr/bin/python3"), real)
    (venv / "bin" / "python").unlink()
    (venv / "bin" / "python").symlink_to(real)
    return venv


def its_python_a_link_through_a_users_folder(top: Path) -> Path:
    """bin/python -> nobody's folder/python3 -> /usr/bin/python3: as_owner.sh looked only at the link's end (root's),
    patch_host and benchrun not at all: all ran as root, nobody may point the link elsewhere."""
    venv = _venv(top / "venv")
    (_users_folder(top) / "python3").symlink_to("/usr/bin/python3")
    (venv / "bin" / "python").unlink()
    (venv / "bin" / "python").symlink_to(top / f"home{NOBODY.pw_uid}" / "python3")
    return venv


def its_pyvenv_home_a_users_folder(top: Path) -> Path:
    """A root venv whose python is a copy (venv --copies) and whose pyvenv.cfg's home is nobody's folder: its python
    takes its standard library from there (os.py, encodings), nobody's code at every start. The rule never read
    pyvenv.cfg and ran it as root."""
    venv = _venv(top / "venv")
    home = _users_folder(top)
    (home / "lib" / "python3.11" / "lib-dynload").mkdir(parents=True)  # getpath's search up from home stops here
    (home / "lib" / "python3.11" / "os.py").write_text("")
    (venv / "pyvenv.cfg").write_text(f"home = {home}/bin\ninclude-system-site-packages = false\n")
    return venv


def a_link_into_a_users_folder(top: Path) -> Path:
    """top/venv (root's link) -> nobody's folder/venv: as_owner.sh (readlink -f) ran as nobody; patch_host's lstat
    walk of the path as named and benchrun's lstat of the link saw root alone."""
    _venv(_users_folder(top) / "venv")
    (top / "venv").symlink_to(top / f"home{NOBODY.pw_uid}" / "venv")
    return top / "venv"


def a_links_hop_through_a_users_folder(top: Path) -> Path:
    """top/venv -> nobody's folder/hop -> top/real: the real path and the path as named are root's; nobody may
    change the hop. as_owner.sh, patch_host and benchrun all ran as root."""
    _venv(top / "real")
    (_users_folder(top) / "hop").symlink_to(top / "real")
    (top / "venv").symlink_to(top / f"home{NOBODY.pw_uid}" / "hop")
    return top / "venv"


def a_users_link_in_a_sticky_folder(top: Path) -> Path:
    """A link nobody made in a sticky folder (nobody may swap it): patch_host and benchrun (lstat) saw nobody;
    as_owner.sh never looked at the link and ran as root."""
    _venv(top / "real")
    sticky = top / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    (sticky / "venv").symlink_to(top / "real")
    os.lchown(sticky / "venv", NOBODY.pw_uid, NOBODY.pw_gid)
    return sticky / "venv"


def missing_in_a_users_folder(top: Path) -> Path:
    """No venv yet where nobody may make one: as_owner.sh ran the command as root (`[ -d ] || exec`), a race away
    from root running nobody's python; patch_host's walk saw nobody."""
    return _users_folder(top) / "venv"


def missing_in_a_sticky_folder(top: Path) -> Path:
    """No venv yet in a sticky folder anyone may write (/tmp): the sticky bit keeps others from renaming what is
    there, not from making what is missing. The rule saw root alone and ran the command as root, a race away from
    root running whatever python anyone puts there."""
    sticky = top / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    return sticky / "venv"


def a_uid_with_no_passwd_entry(top: Path) -> Path:
    """Everything of uid 4242, which has no name: patch_host wrote as 4242; as_owner.sh's runuser found no such
    user and nothing ran."""
    venv = _venv(top / "venv")
    for here, dirs, files in os.walk(venv):
        for name in [here, *(os.path.join(here, n) for n in dirs + files)]:
            os.lchown(name, NO_ENTRY, NO_ENTRY)
    return venv


def a_group_of_one_may_write(top: Path) -> Path:
    """lib/ 0775 whose group has no member but its owner (umask 002 of a user private group): not others' to write;
    that user's (the uid with no passwd entry, its gid no group's)."""
    venv = a_uid_with_no_passwd_entry(top)
    (venv / "lib").chmod(0o775)
    return venv


def two_users(top: Path) -> Path:
    """nobody's folder, OTHER's venv: all refused, but benchrun first handed a copy of the key to OTHER."""
    venv = _venv(_users_folder(top) / "venv")
    for here, dirs, files in os.walk(venv):
        for name in [here, *(os.path.join(here, n) for n in dirs + files)]:
            os.lchown(name, OTHER.pw_uid, OTHER.pw_gid)
    return venv


def _site(venv: Path) -> Path:
    return venv / "lib" / "python3.11" / "site-packages"


def _users_module(folder: Path, name: str) -> None:
    folder.mkdir()
    (folder / name).write_text("")
    os.chown(folder / name, NOBODY.pw_uid, NOBODY.pw_gid)


def a_pth_names_a_folder_with_a_users_module(top: Path) -> Path:
    """An editable install: a root venv whose .pth puts root's folder top/src, with nobody's module in it, on
    sys.path: the walk never read the .pth and ran as root what nobody may change."""
    venv = _venv(top / "venv")
    _users_module(top / "src", "editable.py")
    (_site(venv) / "__editable__.editable.pth").write_text(f"# a comment\n{top / 'src'}\n")
    return venv


def a_link_to_a_folder_with_a_users_module(top: Path) -> Path:
    """site-packages/linked -> root's folder top/src with nobody's module: the walk led through the link (root's
    all the way) but never into the folder it names, and ran its code as root."""
    venv = _venv(top / "venv")
    _users_module(top / "src", "__init__.py")
    (_site(venv) / "linked").symlink_to(top / "src")
    return venv


def an_editable_finder_maps_a_package_to_a_users_module(top: Path) -> Path:
    """pip install -e of a setuptools project (PEP 660): the .pth only imports a finder module whose MAPPING names
    root's folder top/src/mapped, with nobody's __init__.py in it: the rule read no MAPPING and ran it as root."""
    venv = _venv(top / "venv")
    (top / "src").mkdir()
    _users_module(top / "src" / "mapped", "__init__.py")
    finder = "__editable___mapped_0_1_finder"
    (_site(venv) / f"{finder}.py").write_text(
        f"import sys\nMAPPING: dict[str, str] = {{'mapped': {str(top / 'src' / 'mapped')!r}}}\n"
        "NAMESPACES: dict[str, list[str]] = {}\n")
    (_site(venv) / "__editable__.mapped-0.1.pth").write_text(f"import {finder}; {finder}.install()\n")
    return venv


def a_pth_import_line_puts_a_users_module_on_the_path(top: Path) -> Path:
    """An editable install of another backend (hatchling's editables, scikit-build-core, meson-python: site exec()s
    their .pth import lines) puts root's top/src, with nobody's module, on sys.path: the rule skipped import lines
    and ran it as root. Refused now: the rule cannot read what code does."""
    venv = _venv(top / "venv")
    _users_module(top / "src", "mapped.py")
    (_site(venv) / "_editable_impl_mapped.pth").write_text(f"import sys; sys.path.append({str(top / 'src')!r})\n")
    return venv


def a_sticky_site_packages_anyone_may_add_to(top: Path) -> Path:
    """site-packages root's, 1777 (as /tmp): sticky stops renaming others' files, not adding one; anyone may drop a
    .pth or sitecustomize.py there that then runs as root. The rule excused every sticky folder and ran it as root."""
    venv = _venv(top / "venv")
    _site(venv).chmod(0o1777)
    return venv


def a_pth_names_a_sticky_folder(top: Path) -> Path:
    """A .pth puts root's 1777 top/src on sys.path: anyone may add a module there. Ran as root before."""
    venv = _venv(top / "venv")
    (top / "src").mkdir()
    (top / "src").chmod(0o1777)
    (_site(venv) / "src.pth").write_text(f"{top / 'src'}\n")
    return venv


def _acl(path: Path, *entries: tuple[int, int, int], default: bool = False) -> None:
    """A POSIX ACL set as its xattr (setfacl is not always there): (tag, perm, id) each."""
    raw = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)
    os.setxattr(path, "system.posix_acl_default" if default else "system.posix_acl_access", raw)


ANY = 0xFFFFFFFF  # an ACL entry's id where it names none


def an_acl_lets_a_user_write_a_module(top: Path) -> Path:
    """kernel.py root's, 0664 root:root, its ACL `user:nobody:rw-`: the group bits are the ACL's mask, root's group
    has root alone, so the rule saw root alone and ran as root what nobody may write."""
    venv = _venv(top / "venv")
    _acl(_site(venv) / "gated" / "sub" / "kernel.py", (1, 6, ANY), (2, 6, NOBODY.pw_uid), (4, 4, ANY), (0x10, 6, ANY),
         (0x20, 4, ANY))
    return venv


def an_acl_lets_a_group_write_a_folder(top: Path) -> Path:
    """gated/ root's, its ACL `group:nogroup:rwx` (nogroup has nobody, a member other than its owner): refused,
    where the rule ran it as root."""
    venv = _venv(top / "venv")
    _acl(_site(venv) / "gated", (1, 7, ANY), (4, 5, ANY), (8, 7, NOBODY.pw_gid), (0x10, 7, ANY), (0x20, 5, ANY))
    return venv


@dataclass(frozen=True)
class Case:
    layout: Callable[[Path], Path]
    runs_as: int | str  # the uid the venv's code runs as, or the refusal's reason (exit 77)
    patch: str  # what the patch engine's write says: "written", or a part of its error


NOT_HIS = "Permission denied"  # written as the venv's owner, who may not write root's folder: nothing written
CASES = [
    Case(open_folder, "/venv/lib is writable by others than its owner", "writable by others than its owner"),
    Case(group_shared_folder, "/venv/lib is writable by others than its owner", "writable by others than its owner"),
    Case(a_users_folder_off_the_files_path, NOBODY.pw_uid, NOT_HIS),
    Case(its_python_in_a_users_folder, NOBODY.pw_uid, NOT_HIS),
    Case(its_python_a_link_through_a_users_folder, NOBODY.pw_uid, NOT_HIS),
    Case(its_pyvenv_home_a_users_folder, NOBODY.pw_uid, NOT_HIS),
    Case(a_link_into_a_users_folder, NOBODY.pw_uid, NOT_HIS),
    Case(a_links_hop_through_a_users_folder, NOBODY.pw_uid, NOT_HIS),
    Case(a_users_link_in_a_sticky_folder, NOBODY.pw_uid, NOT_HIS),
    Case(missing_in_a_users_folder, NOBODY.pw_uid, ""),
    Case(missing_in_a_sticky_folder, "/venv is missing where others than its owner may make it", ""),
    Case(a_sticky_site_packages_anyone_may_add_to, "/venv/lib/python3.11/site-packages is writable by others than "
         "its owner", "writable by others than its owner"),
    Case(a_pth_names_a_sticky_folder, "/src is writable by others than its owner", "writable by others than its owner"),
    Case(a_uid_with_no_passwd_entry, NO_ENTRY, "written"),
    Case(a_group_of_one_may_write, NO_ENTRY, "written"),
    Case(a_pth_names_a_folder_with_a_users_module, NOBODY.pw_uid, NOT_HIS),
    Case(a_pth_import_line_puts_a_users_module_on_the_path, "/venv/lib/python3.11/site-packages/"
         "_editable_impl_mapped.pth runs code whose effect fleet cannot read (an import line)", "fleet cannot read"),
    Case(a_link_to_a_folder_with_a_users_module, NOBODY.pw_uid, NOT_HIS),
    Case(an_editable_finder_maps_a_package_to_a_users_module, NOBODY.pw_uid, NOT_HIS),
    Case(an_acl_lets_a_user_write_a_module, NOBODY.pw_uid, NOT_HIS),
    Case(an_acl_lets_a_group_write_a_folder,
         "/venv/lib/python3.11/site-packages/gated is writable by others than its owner",
         "writable by others than its owner"),
    Case(two_users, f"it is owned by {','.join(sorted([OTHER.pw_name, 'nobody']))}, not one user",
         f"it is owned by {','.join(sorted([OTHER.pw_name, 'nobody']))}, not one user"),
]
IDS = [c.layout.__name__ for c in CASES]


STRACE = pytest.mark.skipif(not shutil.which("strace"), reason="needs strace (what ran, what was looked at)")


def _key(top: Path) -> Path:
    keys = top / "etc"
    keys.mkdir(mode=0o700)
    key = keys / "fleet.key"
    key.write_text(SECRET + "\n")
    key.chmod(0o600)
    return key


def _says(venv: Path, expected: int | str, key: bool = True) -> tuple[int, str, str]:
    """(exit, stdout, stderr): the uid it ran as and the key it read, or the one line of its refusal."""
    if isinstance(expected, int):
        return 0, f"{expected}\n{SECRET}" if key else str(expected), ""
    why = f"{venv.parent}{expected}" if expected.startswith("/") else expected  # a path: below the layout's top
    return 77, "", f"fleet runs nothing of {venv} as root: {why}"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_venvs_code_runs_as_the_rules_owner(top, case):
    venv = case.layout(top)
    done = subprocess.run(["sh", "-c", hostside.as_owner(str(venv), "id", "-u")], capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip(), done.stderr.strip()) == _says(venv, case.runs_as, key=False)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_benchmark_gets_its_folder_and_key_as_the_same_owner(top, case):
    """The benchmark's command reads the key where fleet put it for the owner the rule names, as that owner."""
    venv = case.layout(top)
    key = _key(top)
    cmd = hostside.words("sh", "-c", 'id -u && cat "$CREDENTIALS_DIRECTORY/fleet.key"')
    done = subprocess.run(["sh", "-c", benchrun.script(cmd, 30, interval_s=5, venv=str(venv), key_path=str(key))],
                          capture_output=True, text=True, timeout=60)
    rc, out, err, _ = bench.split_output(done.stdout)
    assert (rc, out.strip(), err.strip()) == _says(venv, case.runs_as), done.stdout[-2000:]


@STRACE
@pytest.mark.parametrize("case", [c for c in CASES if not isinstance(c.runs_as, int)], ids=lambda c: c.layout.__name__)
def test_a_refused_benchmark_gets_no_copy_of_the_key(top, case):
    """Fails before for two_users: the copy went to the venv's top folder's owner before as_owner.sh refused. Now
    the one answer of the rule refuses before any copy (no `cp` runs) and nothing of the venv runs."""
    venv = case.layout(top)
    key = _key(top)
    script = benchrun.script("ls -AR ..", 30, interval_s=5, venv=str(venv), key_path=str(key))
    done = subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve", "-o", str(top / "trace"), "sh", "-c", script],
                          capture_output=True, text=True, timeout=60)
    rc, out, err, _ = bench.split_output(done.stdout)
    ran = [line.split('"')[1] for line in (top / "trace").read_text().splitlines() if "execve(" in line]
    assert (rc, out.strip(), err.strip()) == _says(venv, case.runs_as) and not {"/usr/bin/cp", "/bin/cp"} & set(ran)


@STRACE
def test_a_benchmark_asks_the_owner_rule_once(top):
    """Fails before: owner.py's rule walked the venv three times for one benchmark with its details (--who, the
    benchmark's own as_owner.py, the read of the details), and each answer could differ. Now once: --who's answer
    runs the benchmark and reads its details. Counted: the processes that looked at the venv's lib/."""
    venv = a_users_folder_off_the_files_path(top)
    ran = top / "ran"
    ran.touch()
    ran.chmod(0o666)
    bench_cmd = hostside.words("sh", "-c", 'id -u >> "$1"', "-", str(ran))  # each run of the venv's code, as whom
    script = benchrun.script(bench_cmd, 30, interval_s=5, venv=str(venv), details=True)
    done = subprocess.run(["strace", "-f", "-qq", "-e", "trace=lstat,newfstatat", "-o", str(top / "trace"), "sh", "-c",
                           script], capture_output=True, text=True, timeout=60)
    lib = f'"{venv}/lib"'
    walks = {line.split()[0] for line in (top / "trace").read_text().splitlines() if lib in line}
    assert (bench.split_output(done.stdout)[0], ran.read_text().split(), len(walks)) == (
        0, [str(NOBODY.pw_uid)], 1), done.stdout[-2000:]


def _apply(top: Path, venv: Path) -> dict:
    target = venv / "lib" / "python3.11" / "site-packages" / "gated" / "sub" / "kernel.py"
    off = ORIGINAL.index(b"(9, 10)")
    step = [off, base64.b64encode(b"(9, 10)").decode(), base64.b64encode(b"(9, 10, 12)").decode()]
    files = [{"path": str(target), "package": "gated.sub", "file": "kernel.py", "dist": None, "version": None,
              "sha_before": hashlib.sha256(ORIGINAL).hexdigest(), "sha_after": hashlib.sha256(PATCHED).hexdigest(),
              "steps": [step]}]
    req = {"root": str(top / "backups"), "files": files, "run": "r1", "sets": ["demo"], "time": "T", "by": "test",
           "modules": [], "bases": [], "venv": str(venv)}
    arg = base64.b64encode(json.dumps(req).encode()).decode()
    done = subprocess.run(["sh", "-c", hostside.system_python_command("patch_host.py", "apply", arg)],
                          capture_output=True, text=True, timeout=60)
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("FLEET-JSON:"))
    answer: dict = json.loads(line[len("FLEET-JSON:"):])
    answer["uid"] = target.stat().st_uid
    answer["now"] = target.read_bytes()
    return answer


@pytest.mark.parametrize("case", [c for c in CASES if c.patch], ids=lambda c: c.layout.__name__)
def test_the_patch_engine_writes_as_the_rules_owner_or_not_at_all(top, case):
    venv = case.layout(top)
    done = _apply(top, venv)
    if case.patch == "written":
        assert done["ok"] and done["now"] == PATCHED and done["uid"] == case.runs_as, done
    else:
        assert not done["ok"] and case.patch in done["error"] and done["now"] == ORIGINAL, done


@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare (a private mount of /etc/passwd)")
def test_a_user_named_as_the_owners_uid_gets_no_copy_of_the_key(top):
    """A hostile passwd: a user named "65534" (nobody's uid) whose uid is OTHER's. `chown 65534:65534` takes a
    numeric name first (GNU chown), so the temp folder and the key copy went to OTHER while the benchmark ran as
    nobody and read nothing: the key handed to a user no step runs as."""
    venv = a_users_folder_off_the_files_path(top)
    key = _key(top)
    passwd = top / "passwd"
    passwd.write_text(Path("/etc/passwd").read_text() + f"{NOBODY.pw_uid}:x:{OTHER.pw_uid}:{OTHER.pw_gid}::/:/bin/sh\n")
    cmd = hostside.words("sh", "-c", 'id -u && cat "$CREDENTIALS_DIRECTORY/fleet.key"')
    script = benchrun.script(cmd, 30, interval_s=5, venv=str(venv), key_path=str(key))
    done = subprocess.run(["unshare", "-m", "sh", "-c", 'mount --bind "$1" /etc/passwd && exec sh -c "$2"', "-",
                           str(passwd), script], capture_output=True, text=True, timeout=60)
    rc, out, err, _ = bench.split_output(done.stdout)
    assert (rc, out.strip(), err.strip()) == _says(venv, NOBODY.pw_uid), done.stdout[-2000:] + done.stderr


def test_a_uid_with_no_passwd_entry_gets_no_group_its_files_carry(top):
    """Everything of uid 4242 (no passwd entry: in no group) but of group root, as a venv built elsewhere and
    unpacked keeps: the rule ran its code with gid 0, root's group, which 4242 never had. Now the overflow group."""
    venv = a_uid_with_no_passwd_entry(top)
    for here, dirs, files in os.walk(venv):
        for name in [here, *(os.path.join(here, n) for n in dirs + files)]:
            os.lchown(name, NO_ENTRY, 0)
    done = subprocess.run(["sh", "-c", hostside.as_owner(str(venv), "sh", "-c", "id -u; id -G")], capture_output=True,
                          text=True)
    who = subprocess.run(["sh", "-c", hostside.owner_of_venv(str(venv))], capture_output=True, text=True)
    assert (done.returncode, done.stdout.split(), who.stdout.strip()) == (0, [str(NO_ENTRY), "65534"],
                                                                           f"{NO_ENTRY}:65534"), done


def test_a_link_to_the_root_folder_is_refused_after_a_bounded_walk(top):
    """site-packages/all -> /: the rule walks what a link names, so the whole disk (here 27 s a step, on a host
    with datasets far longer) before refusing on whatever it met. Now it stops past owner.py's LOOKS objects."""
    venv = _venv(top / "venv")
    (_site(venv) / "all").symlink_to("/")
    done = subprocess.run(["sh", "-c", hostside.as_owner(str(venv), "id", "-u")], capture_output=True, text=True,
                          timeout=120)  # the refusal below is the bound: the walk stopped at the limit, not the disk
    assert (done.returncode, done.stderr.strip()) == (
        77, f"fleet runs nothing of {venv} as root: it leads to more than 200000 files to look at"), done


@pytest.mark.parametrize("table", ["{[1]: '/x'}", "{'a': 1 +}", "dict(mapped='/home/someone/src')", "-" * 100000 + "1"],
                         ids=["unhashable", "no-python", "a-call", "deep"])
def test_an_editable_finder_whose_table_is_no_literal_is_refused_in_one_line(top, table):
    """Fails before: a list as a key (TypeError) escaped the catch, a traceback; the others (SyntaxError,
    ValueError, MemoryError or RecursionError) were skipped, so the folders a call names at import were never looked
    at and the venv's code ran as root."""
    venv = _venv(top / "venv")
    finder = _site(venv) / "__editable___mapped_0_1_finder.py"
    finder.write_text(f"MAPPING = {table}\nNAMESPACES = {{}}\n")
    done = subprocess.run(["sh", "-c", hostside.as_owner(str(venv), "id", "-u")], capture_output=True, text=True)
    assert (done.returncode, done.stderr.strip()) == (
        77, f"fleet runs nothing of {venv} as root: {finder} names its packages' folders in no literal fleet can "
            "read"), done


NSPKG = ("import sys, types, os;has_mfs = sys.version_info > (3, 5);p = os.path.join(sys._getframe(1).f_locals["
         "'sitedir'], *('google', 'cloud'));importlib = has_mfs and __import__('importlib.util');has_mfs and "
         "__import__('importlib.machinery');m = has_mfs and sys.modules.setdefault('google.cloud', "
         "importlib.util.module_from_spec(importlib.machinery.PathFinder.find_spec('google.cloud', "
         "[os.path.dirname(p)])));m = m or sys.modules.setdefault('google.cloud', types.ModuleType('google.cloud'));mp "
         "= (m or []) and m.__dict__.setdefault('__path__',[]);(p not in mp) and mp.append(p);m and "
         "setattr(sys.modules['google'], 'cloud', m)\n")  # setuptools' Installer._gen_nspkg_line('google.cloud')


def test_setuptools_own_pth_import_lines_are_read_and_run_as_the_venvs_owner(top):
    """The .pth import lines a normal venv holds (pip's setuptools: distutils-precedence.pth, as `python3 -m venv`
    gives; an editable install's finder; a namespace package's -nspkg.pth) are understood, not refused: a root venv
    runs as root."""
    venv = _venv(top / "venv")
    (_site(venv) / "distutils-precedence.pth").write_text(
        "import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'local') == 'local'; enabled and "
        "__import__('_distutils_hack').add_shim(); \n")
    (_site(venv) / "google_cloud-1.0-py3.11-nspkg.pth").write_text(NSPKG)
    (_site(venv) / "__editable___mapped_0_1_finder.py").write_text("MAPPING = {}\nNAMESPACES = {}\n")
    (_site(venv) / "__editable__.mapped-0.1.pth").write_text(
        "import __editable___mapped_0_1_finder; __editable___mapped_0_1_finder.install()")
    done = subprocess.run(["sh", "-c", hostside.as_owner(str(venv), "id", "-u")], capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "0"), done


def test_virtualenvs_own_pth_line_is_read_where_its_module_is_in_the_walked_folder(top):
    """virtualenv (and uv before 0.4) writes `_virtualenv.pth`: `import _virtualenv`, its module beside it. Refused
    before as a line the rule cannot read (every venv virtualenv made, exit 77); runs now, and a line without its
    module is still refused."""
    venv = _venv(top / "venv")
    (_site(venv) / "_virtualenv.pth").write_text("import _virtualenv")
    (_site(venv) / "_virtualenv.py").write_text("")
    done = subprocess.run(["sh", "-c", hostside.as_owner(str(venv), "id", "-u")], capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "0"), done
    (_site(venv) / "_virtualenv.py").unlink()
    done = subprocess.run(["sh", "-c", hostside.as_owner(str(venv), "id", "-u")], capture_output=True, text=True)
    assert done.returncode == 77 and "_virtualenv.pth runs code" in done.stderr, done


def test_a_pth_line_is_split_where_site_splits_it(top):
    """site reads a .pth by \\n, \\r and \\r\\n only; str.splitlines() also split at a form feed, so the shim
    followed by \\x0c and code read as two lines, the shim and a path, while site exec()s it whole. Refused now."""
    venv = _venv(top / "venv")
    shim = ("import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'local') == 'local'; "
            "enabled and __import__('_distutils_hack').add_shim();")
    (_site(venv) / "distutils-precedence.pth").write_text(shim + "\x0c__import__('os').system('id')\n")
    done = subprocess.run(["sh", "-c", hostside.as_owner(str(venv), "id", "-u")], capture_output=True, text=True)
    assert done.returncode == 77 and "distutils-precedence.pth runs code" in done.stderr, done


def _python38() -> str | None:
    """A python3.8 (Ubuntu 20.04's /usr/bin/python3) where one is installed here: its real file."""
    pyenv = sorted(Path("~/.pyenv/versions").expanduser().glob("3.8*/bin/python3.8"))
    for found in [shutil.which("python3.8"), *pyenv]:
        done = found and subprocess.run([found, "-c", "import sys; print(sys.version_info[:2] == (3, 8))"],
                                        capture_output=True, text=True)
        if done and done.stdout.strip() == "True":
            return str(found)
    return None


@pytest.mark.skipif(_python38() is None, reason="no python3.8 here")
def test_the_patch_engine_and_the_rule_run_on_a_hosts_python38(top, monkeypatch):
    """A root venv, so nothing drops privileges (the interpreter may be in root's home). Fails before: patch_host.py
    merged two dicts with `|` (3.9+): TypeError, no answer, nothing written."""
    monkeypatch.setattr(hostside, "SYSTEM_PYTHON", _python38())
    venv = _venv(top / "venv")
    ran = subprocess.run(["sh", "-c", hostside.as_owner(str(venv), "id", "-u")], capture_output=True, text=True)
    assert (ran.returncode, ran.stdout.strip(), ran.stderr) == (0, "0", ""), ran
    done = _apply(top, venv)
    assert done["ok"] and done["now"] == PATCHED and done["uid"] == 0, done


def _root_only(top: Path, name: str) -> Path:
    """A file of root's the venv's owner may neither read nor write (as /etc/shadow is)."""
    victim = top / name
    victim.write_text(f"root-only {name}\n")
    victim.chmod(0o600)
    return victim


def test_the_benchmarks_owner_cannot_make_root_read_a_file_through_a_link(top):
    """The benchmark (nobody's) swaps the outputs root prints for links to a root-only file. Fails before: $d was
    nobody's, so root's `cat "$d/out"` and `cat "$d/details.jsonl"` printed that file. Now $d is root's (nobody may
    make nothing there) and the details file is read as nobody."""
    venv = a_users_folder_off_the_files_path(top)
    victim = _root_only(top, "victim")
    plant = (f'for t in "$PWD" "${{PWD%/w}}"; do for f in out err smi; do ln -sf {victim} "$t/$f" 2>/dev/null; done; '
             f'done; ln -sf {victim} {benchrun.DETAILS}; echo planted')
    cmd = hostside.words("sh", "-c", plant)
    done = subprocess.run(["sh", "-c", benchrun.script(cmd, 30, interval_s=5, venv=str(venv), details=True)],
                          capture_output=True, text=True, timeout=60)
    assert "planted" in done.stdout and "root-only" not in done.stdout, done.stdout[-2000:]
    wrote = hostside.words("sh", "-c", f"echo '{{\"by\": '$(id -u)'}}' > {benchrun.DETAILS}")
    done = subprocess.run(["sh", "-c", benchrun.script(wrote, 30, interval_s=5, venv=str(venv), details=True)],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split(f"{benchrun.MARK} details\n")[1:] == [f'{{"by": {NOBODY.pw_uid}}}\n'], done.stdout


def test_a_fifo_in_place_of_the_details_file_holds_the_benchmark_no_longer_than_its_read_limit(top, monkeypatch):
    """Fails before: root's `cat` of a fifo the owner made blocked until the whole call's timeout."""
    monkeypatch.setattr(benchrun, "DETAILS_READ_S", 2)
    venv = a_users_folder_off_the_files_path(top)
    cmd = hostside.words("mkfifo", benchrun.DETAILS)
    started = time.monotonic()
    done = subprocess.run(["sh", "-c", benchrun.script(cmd, 30, interval_s=5, venv=str(venv), details=True)],
                          capture_output=True, text=True, timeout=30)
    # bounded by the 2 s read limit, not held to the call's 30 s (a wide margin: a loaded machine is slow)
    assert bench.split_output(done.stdout)[0] == 0 and time.monotonic() - started < 20, done


SPINNER = """import glob, os, sys, time
victim, end = sys.argv[1], time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    for d in glob.glob("/tmp/fleet-bench.*"):
        for name in ("fleet.key", "smi", "out", "err", "c", "c/fleet.key", "w/fleet.key"):
            try:
                os.symlink(victim, os.path.join(d, name))
            except OSError:
                pass
"""


def test_the_benchmarks_owner_cannot_plant_links_where_root_writes_the_key_or_the_outputs(top):
    """nobody (the venv's owner) plants links in the temp folder from the moment it is theirs. Fails before (within a
    few runs): root's `cp` of the key and `chown` wrote the key into the victim and gave it to nobody, or root's
    redirects truncated it. Now $d stays root's and the key's copy is handed over with `chown -h`."""
    venv = a_users_folder_off_the_files_path(top)
    key = _key(top)
    victim = _root_only(top, "victim")
    spinner = subprocess.Popen([hostside.SYSTEM_PYTHON, "-c", SPINNER, str(victim), "60"], user=NOBODY.pw_uid,
                               group=NOBODY.pw_gid, extra_groups=[])
    try:
        cmd = hostside.words("sh", "-c", 'cat "$CREDENTIALS_DIRECTORY/fleet.key"')
        for _ in range(8):
            done = subprocess.run(["sh", "-c", benchrun.script(cmd, 30, interval_s=5, venv=str(venv),
                                                               key_path=str(key))],
                                  capture_output=True, text=True, timeout=60)
            st = victim.stat()
            assert (victim.read_text(), st.st_uid, st.st_size) == ("root-only victim\n", 0, 17), done.stdout[-2000:]
    finally:
        spinner.kill()
        spinner.wait()
