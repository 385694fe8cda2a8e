"""The programs fleet ships to hosts (fleet/host/programs), linted and run here against temporary folders that
stand in for a host: a venv's site-packages, /var/lib/fleet, a release's managed files."""

from __future__ import annotations

import base64
import hashlib
import json
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.host import programs as hostside
from fleet.host import sysinfo as hostinfo
from fleet.inventory import Host
from fleet.multihost import status
from fleet.patches import audit as archgate
from fleet.patches import plan as patchplan

HERE = Path(hostside.__file__).parent
SCRIPTS = sorted(p.name for p in HERE.iterdir() if p.suffix in (".sh", ".py") and p.name != "__init__.py")


def test_every_host_program_is_listed_and_shipped():
    assert SCRIPTS == sorted(hostside.SCRIPTS)
    for name in SCRIPTS:
        own = (HERE / name).read_text()
        included = {ln.split()[1]: HERE / ln.split()[1] for ln in own.splitlines() if ln.startswith("#@include ")}
        shipped = hostside.text(name)
        for part, path in included.items():  # an #@include line ships the fragment's text in its place
            own = own.replace(f"#@include {part}\n", path.read_text())
        assert shipped == own and "\n#@include" not in shipped
    with pytest.raises(KeyError):
        hostside.text("../tasks.py")


@pytest.mark.parametrize("name", [n for n in SCRIPTS if n.endswith(".sh")])
def test_shell_programs_parse_under_posix_sh(name):
    for shell in ("sh", "dash", "bash"):
        if shutil.which(shell):
            done = subprocess.run([shell, "-n", str(HERE / name)], capture_output=True, text=True)
            assert done.returncode == 0, f"{shell}: {done.stderr}"


@pytest.mark.parametrize("name", [n for n in SCRIPTS if n.endswith(".py")])
def test_python_programs_compile(name, tmp_path):
    py_compile.compile(str(HERE / name), cfile=str(tmp_path / "x.pyc"), doraise=True)


def _b64(obj) -> str:
    return base64.b64encode(json.dumps(obj).encode()).decode()


def _answer(out: str) -> dict:
    line = [x for x in out.splitlines() if x.startswith("FLEET-JSON:")][-1]
    return json.loads(line[len("FLEET-JSON:"):])


@pytest.fixture
def site(tmp_path) -> Path:
    """A site-packages with one package whose comm.py gates on SM90/SM100, as flashinfer's does."""
    pkg = tmp_path / "site" / "fakeinfer"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "comm.py").write_text("def gen():\n    return dict(supported_major_versions=[9, 10])\n")
    return tmp_path / "site"


def _patch_host(site: Path, mode: str, req: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", hostside.text("patch_host.py"), mode, _b64(req)],
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return _answer(done.stdout)


def test_patch_host_reads_applies_and_reverts_a_file_with_its_backup(site, tmp_path):
    root = tmp_path / "backups"
    read = _patch_host(site, "read", {"packages": ["fakeinfer"], "dists": [], "files": [["fakeinfer", "comm.py"]],
                                      "modules": [], "root": str(root), "unit": "sglang"})
    assert read["packages"]["fakeinfer"]["path"] == str(site / "fakeinfer")
    (info,) = read["files"]
    before = base64.b64decode(info["b64"])
    assert info["exists"] and info["sha256"] == hashlib.sha256(before).hexdigest()
    find, replace = b"[9, 10]", b"[9, 10, 12]"
    after = before.replace(find, replace)
    target = str(site / "fakeinfer/comm.py")
    change = {"path": target, "package": "fakeinfer", "file": "comm.py", "dist": None, "version": None,
              "sha_before": info["sha256"], "sha_after": hashlib.sha256(after).hexdigest()}
    applied = _patch_host(site, "apply", {
        "root": str(root), "run": "r1", "time": "t", "by": "test", "sets": ["s"], "modules": [], "bases": [],
        "files": [{**change, "steps": [[before.index(find), base64.b64encode(find).decode(),
                                         base64.b64encode(replace).decode()]]}]})
    assert applied["ok"] and applied["written"] == [target]
    assert Path(target).read_bytes() == after
    assert (root / "objects" / info["sha256"]).read_bytes() == before  # the original, content-addressed
    assert json.loads((root / "runs/r1/manifest.json").read_text())["status"] == "applied"
    again = _patch_host(site, "apply", {
        "root": str(root), "run": "r2", "time": "t", "by": "test", "sets": ["s"], "modules": [], "bases": [],
        "files": [{**change, "steps": []}]})
    assert not again["ok"] and "changed since it was read" in again["error"]  # its sha_before is stale now
    reverted = _patch_host(site, "revert", {"root": str(root), "run": "r1", "time": "t", "by": "test", "bases": [],
                                            "files": [{k: change[k] for k in ("path", "sha_before", "sha_after")}]})
    assert reverted["ok"] and Path(target).read_bytes() == before
    assert json.loads((root / "runs/r1/manifest.json").read_text())["status"] == "reverted"


def test_patch_host_refuses_a_file_that_resolves_outside_its_package(site, tmp_path):
    outside = tmp_path / "passwd"
    outside.write_text("root:x:0:0\n")
    (site / "fakeinfer/evil.py").symlink_to(outside)
    read = _patch_host(site, "read", {"packages": ["fakeinfer"], "dists": [], "files": [["fakeinfer", "evil.py"]],
                                      "modules": [], "root": str(tmp_path / "b"), "unit": "sglang"})
    (info,) = read["files"]
    assert not info["exists"] and "resolves outside the package" in info["error"] and "b64" not in info


def test_scan_reports_directives_and_python_gates_of_a_package(site):
    (site / "fakeinfer/kernel.cuh").write_text("#if __CUDA_ARCH__ >= 900 && \\\n  __CUDA_ARCH__ < 1100\nx\n#endif\n")
    done = subprocess.run([sys.executable, "-c", hostside.text("scan.py"),
                           _b64({"scope": {"fakeinfer": ["**/*.py", "**/*.cuh"], "absent": ["*.py"]}})],
                          env={"PYTHONPATH": str(site), "PATH": "/nowhere"}, capture_output=True, text=True, timeout=60)
    res = _answer(done.stdout)
    # each directive with the code lines after it, as fleet.patches.audit.scan_text gives it locally
    want = [[1, "#if __CUDA_ARCH__ >= 900 &&    __CUDA_ARCH__ < 1100", 1], [4, "#endif", 0]]
    assert res["files"]["fakeinfer/kernel.cuh"]["lines"] == want
    local = archgate.scan_text("fakeinfer/kernel.cuh", (site / "fakeinfer/kernel.cuh").read_text())
    assert local["lines"] == res["files"]["fakeinfer/kernel.cuh"]["lines"]
    # a Python gate with the function it sits in (which names a gate upstream keeps on purpose), as locally
    assert res["files"]["fakeinfer/comm.py"]["lines"] == [[2, "    return dict(supported_major_versions=[9, 10])",
                                                           "gen"]]
    local = archgate.scan_text("fakeinfer/comm.py", (site / "fakeinfer/comm.py").read_text())
    assert local["lines"] == res["files"]["fakeinfer/comm.py"]["lines"]
    assert res["packages"]["fakeinfer"] == {"path": str(site / "fakeinfer")}  # no distribution installed it
    assert "not importable" in res["packages"]["absent"]["error"]
    assert res["sms"] == [] and res["sm_error"].startswith("nvidia-smi")  # no GPU here, said so


def test_scan_says_which_release_each_package_is(site):
    """The distribution and version that installed a package (a kept gate is kept only in the releases named)."""
    info = site / "fakeinfer_python-0.7.4.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeinfer-python\nVersion: 0.7.4\n")
    (info / "top_level.txt").write_text("fakeinfer\n")
    done = subprocess.run([sys.executable, "-c", hostside.text("scan.py"), _b64({"scope": {"fakeinfer": ["*.py"]}})],
                          env={"PYTHONPATH": str(site), "PATH": "/nowhere"}, capture_output=True, text=True, timeout=60)
    assert _answer(done.stdout)["packages"]["fakeinfer"] == {"path": str(site / "fakeinfer"),
                                                             "dist": "fakeinfer-python", "version": "0.7.4"}


def _host() -> Host:
    return Host(name="h", address="10.0.0.1", port=None, user=None, become=False, identity_file=None,
        known_hosts=None, ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(),
        source=Path("hosts.yaml"))


def test_status_script_sees_drift_and_leftovers_in_a_folder_that_mimics_var_lib_fleet(tmp_path):
    root, etc = tmp_path / "fleet", tmp_path / "etc"
    (root / "releases/r1").mkdir(parents=True)
    etc.mkdir()
    unit, env = etc / "sglang.service", etc / "sglang.env"
    unit.write_text("[Service]\n")
    env.write_text("A=1\n")
    manifest = {"id": "r1", "rung": "no-fusion", "playbook": "p", "status": "ok",
                "files": {str(unit): {"sha256": hashlib.sha256(b"[Service]\n").hexdigest()},
                          str(env): {"sha256": hashlib.sha256(b"A=1\n").hexdigest()}}}
    (root / "releases/r1/manifest.json").write_text(json.dumps(manifest))
    (root / "current").symlink_to("releases/r1")
    env.write_text("A=2\n")  # a hand edit
    (root / "releases/r2").mkdir()
    (root / "releases/r2/manifest.json").write_text(json.dumps({"id": "r2", "status": "in-progress"}))
    (root / "releases/r2/events.jsonl").write_text('{"step": "stop", "rung": "x"}\n')
    done = subprocess.run(["sh", "-c", hostside.text("status.sh"), "fleet-status", "sglang", "1", str(root),
                           hostside.SYSTEM_PYTHON],
                          capture_output=True, text=True, timeout=60)
    host = _host()
    st = status.parse(host, done.stdout)
    assert (st.release, st.rung, st.health) == ("r1", "no-fusion", None)
    assert st.drift == [f"{env} (changed)"]
    assert st.interrupted and "release r2 was interrupted after step stop" in st.interrupted


def test_probe_script_lists_the_packages_the_parser_knows():
    script = hostside.text("probe.sh")
    names = {n.replace("-", "_") for n in hostinfo.PACKAGE_DIRS}
    dirs = set(hostinfo.PACKAGE_DIRS.values())
    assert all(f" {n}" in script for n in names) and all(f" {d}" in script for d in dirs)


def test_the_patch_planner_and_the_host_agree_on_the_backup_folder():
    assert patchplan.BACKUP_ROOT == "/var/lib/fleet/backups"
    assert "backups/runs" in hostside.text("status.sh")  # status reads the runs where patch_host writes them


# Stand-ins for the status script's slow calls: each writes when it started and ended, waits a little, answers.
_SLOW = """#!/bin/sh
echo "start $(date +%s%N) __NAME__" >> __LOG__
sleep 0.3
case __NAME__ in
  curl) case "$*" in *metrics*) echo 'sglang:num_running_reqs{m="x"} 2.0';; *) printf 200;; esac;;
  nvidia-smi) echo '250.5, 600.0';;
esac
echo "end $(date +%s%N) __NAME__" >> __LOG__
"""


def _status_run(tmp: Path, concurrent: bool) -> tuple[str, list[tuple[str, int, str]]]:
    """The real status script with curl and nvidia-smi stand-ins (and mktemp only when `concurrent`)."""
    bin_dir, log = tmp / "bin", tmp / "calls.log"
    bin_dir.mkdir(parents=True)
    for name in ("curl", "nvidia-smi"):
        (bin_dir / name).write_text(_SLOW.replace("__NAME__", name).replace("__LOG__", str(log)))
        (bin_dir / name).chmod(0o755)
    for tool in ("cat", "grep", "tail", "date", "sleep", "ls", "readlink", "systemctl", "rm",
                 *(("mktemp",) if concurrent else ())):
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool))
    root = tmp / "fleet"
    (root / "releases/r1").mkdir(parents=True)
    (root / "releases/r1/manifest.json").write_text(json.dumps({"id": "r1", "rung": "x", "status": "ok"}) + "\n")
    (root / "current").symlink_to("releases/r1")
    done = subprocess.run(["/bin/sh", "-c", hostside.text("status.sh"), "fleet-status", "sglang", "1", str(root),
                           hostside.SYSTEM_PYTHON],
                          capture_output=True, text=True, timeout=60, env={"PATH": str(bin_dir), "TMPDIR": str(tmp)})
    assert done.returncode == 0, done.stderr
    calls = [(w, int(t), n) for w, t, n in (line.split() for line in log.read_text().splitlines())]
    return done.stdout, calls


def test_the_status_script_waits_on_its_slow_calls_at_once_and_prints_the_same(tmp_path):
    at_once, calls = _status_run(tmp_path / "a", concurrent=True)
    in_turn, serial = _status_run(tmp_path / "b", concurrent=False)
    assert at_once == in_turn  # every section whole and in its place, however the calls ran
    host = _host()
    st = status.parse(host, at_once)
    assert (st.release, st.health, st.gpus, st.power_w, st.power_limit_w) == ("r1", "200", 1, 250.5, 600.0)
    assert st.metrics.get("sglang:num_running_reqs") == 2.0

    def overlapping(log: list[tuple[str, int, str]]) -> bool:
        starts = [t for w, t, _ in log if w == "start"]
        ends = [t for w, t, _ in log if w == "end"]
        return max(starts) < min(ends)  # every call had started before the first one ended

    assert len(calls) == len(serial) == 8  # /health, nvidia-smi (power, health), /metrics: a start and an end each
    assert overlapping(calls) and not overlapping(serial)


def _applied_two_files(site: Path, root: Path) -> list[dict]:
    """comm.py and a second file of the package patched by one run r1 (as apply leaves them)."""
    (site / "fakeinfer/gate.py").write_text("SUPPORTED = [9, 10]\n")
    changes = []
    for rel in ("comm.py", "gate.py"):
        path = site / "fakeinfer" / rel
        before = path.read_bytes()
        after = before.replace(b"[9, 10]", b"[9, 10, 12]")
        changes.append({"path": str(path), "package": "fakeinfer", "file": rel, "dist": None, "version": None,
                        "sha_before": hashlib.sha256(before).hexdigest(),
                        "sha_after": hashlib.sha256(after).hexdigest(),
                        "steps": [[before.index(b"[9, 10]"), base64.b64encode(b"[9, 10]").decode(),
                                   base64.b64encode(b"[9, 10, 12]").decode()]]})
    applied = _patch_host(site, "apply", {"root": str(root), "run": "r1", "time": "t", "by": "test", "sets": ["s"],
                                          "modules": [], "bases": [], "files": changes})
    assert applied["ok"]
    return changes


def test_a_revert_whose_second_write_fails_patches_the_first_again_and_stays_applied(site, tmp_path):
    root = tmp_path / "backups"
    changes = _applied_two_files(site, root)
    files = [{k: c[k] for k in ("path", "sha_before", "sha_after")} for c in changes]
    patched = {c["path"]: Path(c["path"]).read_bytes() for c in changes}
    req = {"root": str(root), "run": "r1", "time": "t", "by": "test", "bases": [], "files": files}
    failed = _patch_host(site, "revert", {**req, "fail_at": 2})
    assert not failed["ok"]
    assert failed["error"].startswith(f"restoring {changes[1]['path']} failed (No space left on device)")
    assert "patched again the 1 file(s) already restored: still applied" in failed["error"]
    assert {p: Path(p).read_bytes() for p in patched} == patched  # all or nothing: still fully applied
    man = json.loads((root / "runs/r1/manifest.json").read_text())
    assert man["status"] == "applied" and "No space left" in man["revert_error"]
    assert not list(site.rglob(".*.fleet-*"))  # no temp file left
    done = _patch_host(site, "revert", req)  # and it reverts whole once the disk has room
    assert done["ok"] and done["restored"] == [c["path"] for c in changes]
    assert all(hashlib.sha256(Path(c["path"]).read_bytes()).hexdigest() == c["sha_before"] for c in changes)
    assert json.loads((root / "runs/r1/manifest.json").read_text())["status"] == "reverted"


def _script(name: str, *args: str, data: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["sh", "-c", hostside.text(name), f"fleet-{name}", *args], input=data,
                          capture_output=True, timeout=60)


def test_write_with_keep_leaves_the_old_file_beside_it_as_a_hardlink_named_by_its_sha256(tmp_path):
    unit = tmp_path / "sglang.service"
    unit.write_bytes(b"served\n")
    inode = unit.stat().st_ino
    assert _script("write.sh", str(unit), "0644", "keep", data=b"new\n").returncode == 0
    kept = tmp_path / (".sglang.service.kept-by-fleet." + hashlib.sha256(b"served\n").hexdigest())
    assert unit.read_bytes() == b"new\n" and kept.read_bytes() == b"served\n"
    assert kept.stat().st_ino == inode  # the same file, not a copy: keeping it took no data blocks
    assert _script("write.sh", str(unit), "0644", data=b"newer\n").returncode == 0  # without keep: nothing kept
    assert sorted(p.name for p in tmp_path.iterdir()) == [kept.name, "sglang.service"]


def test_putback_puts_the_kept_file_back_by_rename_and_keeps_it_for_another_time(tmp_path):
    env = tmp_path / "sglang.env"
    env.write_bytes(b"A=served\n")
    env.chmod(0o600)
    want = hashlib.sha256(b"A=served\n").hexdigest()
    assert _script("write.sh", str(env), "0644", "keep", data=b"A=new\n").returncode == 0
    kept = tmp_path / f".sglang.env.kept-by-fleet.{want}"
    done = _script("putback.sh", str(env), want)
    assert done.returncode == 0, done.stderr
    assert env.read_bytes() == b"A=served\n" and env.stat().st_ino == kept.stat().st_ino  # renamed: no data written
    assert oct(env.stat().st_mode & 0o777) == "0o600"  # the mode it served with, not the new file's
    assert sorted(p.name for p in tmp_path.iterdir()) == [kept.name, "sglang.env"]  # no temp file left


def test_putback_refuses_a_missing_or_changed_kept_file_a_symlink_and_a_bad_sha(tmp_path):
    env = tmp_path / "sglang.env"
    env.write_bytes(b"A=now\n")
    want = hashlib.sha256(b"A=served\n").hexdigest()
    assert _script("putback.sh", str(env), want).returncode == 3  # nothing kept: the caller writes instead
    kept = tmp_path / f".sglang.env.kept-by-fleet.{want}"
    kept.write_bytes(b"A=edited since\n")
    assert _script("putback.sh", str(env), want).returncode == 3  # no longer what its name says
    assert env.read_bytes() == b"A=now\n"
    kept.write_bytes(b"A=served\n")
    env.unlink()
    env.symlink_to(tmp_path / "elsewhere")
    assert _script("putback.sh", str(env), want).returncode == 65
    assert _script("putback.sh", str(env), "../../x").returncode == 64
    assert not (tmp_path / "elsewhere").exists()


def test_a_directory_where_the_kept_copy_would_go_is_not_written_into(tmp_path):
    unit = tmp_path / "sglang.service"
    unit.write_bytes(b"served\n")
    trap = tmp_path / (".sglang.service.kept-by-fleet." + hashlib.sha256(b"served\n").hexdigest())
    trap.mkdir()  # a host's hostile (or unlucky) leftover
    assert _script("write.sh", str(unit), "0644", "keep", data=b"new\n").returncode == 0
    assert unit.read_bytes() == b"new\n" and list(trap.iterdir()) == []
    assert _script("putback.sh", str(unit), trap.name.rsplit(".", 1)[1]).returncode == 3
