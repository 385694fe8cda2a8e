"""The patch engine against sandbox hosts over real SSH: check, apply, reapply, audit, revert, refusals,
all-or-nothing, the host lock, and the simulated stack's behaviour changing with the patch.

Every test leaves the host as found: the target files are copied aside first and put back (cp -p)
in `finally`, the lock and fleet's backup folder are removed when the test made them.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.cli.patch import patch_command
from fleet.host import lock as hostlock
from fleet.host.service import sha256
from fleet.patches import audit as archgate
from fleet.patches import plan as patchplan
from fleet.patches import sets as patchsets
from fleet.patches.plan import APPLICABLE, APPLIED, CANNOT, FileInfo, HostState
from fleet.ssh import remote
from fleet.ssh.connect import open_connection

pytestmark = pytest.mark.sandbox

REPO = Path(__file__).resolve().parents[2]
SIM = REPO / "sandbox/sim/pkgs"
SET = "sm120-allreduce-fusion"
SITE = "/root/ml-env/lib/python3.11/site-packages"
FILES = ["flashinfer/jit/comm.py", "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh",
         "flashinfer/data/include/flashinfer/comm/trtllm_allreduce_fusion.cuh",
         "sglang/srt/server_args.py", "sglang/srt/layers/communicator.py"]
SAVE = "/root/.fleet-test-patches-orig"
INV = str(Path(sys.executable).parent / "inv")
BEHAVIOUR = r"""
import json, types
from flashinfer.jit import env
from sglang_sim_core import kernels
from sglang.srt.server_args import set_global_server_args_for_scheduler
import sglang.srt.layers.communicator as c
from flashinfer.jit.comm import gen_trtllm_comm_module
set_global_server_args_for_scheduler(types.SimpleNamespace(enable_flashinfer_allreduce_fusion=True,
                                                           enable_dp_attention=False))
out = {"runtime_gate": bool(c.apply_flashinfer_allreduce_fusion(64))}
try:
    s = gen_trtllm_comm_module()
except RuntimeError as e:
    out["error"] = str(e)
else:
    r = kernels.preprocess(s.sources, env.FLASHINFER_INCLUDE_DIR, s.archs)
    out.update(archs=s.archs, ok=r.ok, missing=r.missing(1200))
print(json.dumps(out))
"""


def sh(conn, host, cmd: str) -> remote.CommandResult:
    return remote.run(conn, host, cmd, timeout=120)


def sha_map(conn, host) -> dict[str, str]:
    res = sh(conn, host, "cd " + SITE + " && sha256sum " + " ".join(FILES))
    assert res.ok, res.stderr
    return {line.split()[1]: line.split()[0] for line in res.stdout.splitlines()}


def expected_after() -> dict[str, str]:
    """The sha256 each file must have after the set, computed here from the simulated sources."""
    ps = patchsets.load_file(REPO / "playbooks/patches" / f"{SET}.yaml")
    st = HostState(sms=[120], dists={"flashinfer-python": "0.6.3", "sglang": "0.5.9"})
    for pkg, rel in ps.files():
        st.packages[pkg] = {"path": pkg}
        if not (SIM / pkg / rel).is_file():  # a file of another upstream layout
            st.files[(pkg, rel)] = FileInfo(pkg, rel, f"{pkg}/{rel}", False)
            continue
        data = (SIM / pkg / rel).read_bytes()
        st.files[(pkg, rel)] = FileInfo(pkg, rel, f"{pkg}/{rel}", True, data, sha256(data))
    return {f"{c.package}/{c.file}": c.sha_after for c in patchplan.plan([ps], st).changes}


def pristine_sha() -> dict[str, str]:
    return {f: sha256((SIM / f).read_bytes()) for f in FILES}


def inv_patch(inventory: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([INV, "patch", "--inventory", str(inventory), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})


def run_json(inventory: Path, *args: str) -> tuple[int, dict]:
    p = inv_patch(inventory, *args, "--json")
    assert p.stdout.strip(), p.stderr
    return p.returncode, json.loads(p.stdout)["hosts"][0]


def behaviour(conn, host) -> dict:
    res = sh(conn, host, "SGLANG_SIM_TIME_SCALE=0 /root/ml-env/bin/python -c " + _q(BEHAVIOUR))
    assert res.ok, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def _q(s: str) -> str:
    return shlex.quote(s)


def runs_on_host(conn, host) -> list[str]:
    res = sh(conn, host, f"ls {patchplan.BACKUP_ROOT}/runs 2>/dev/null")
    return res.stdout.split()


@pytest.fixture
def sbx0(sandbox, sandbox_inventory):
    """sbx0 (8x SM120) with the sim's pristine files; put back byte for byte afterwards."""
    host = sandbox_inventory.hosts["sbx0"]
    conn = open_connection(host)
    had_fleet_dir = sh(conn, host, "test -d /var/lib/fleet").ok
    had_cache = sh(conn, host, "test -d /root/.cache/flashinfer").ok
    if sha_map(conn, host) != pristine_sha():
        pytest.fail("sbx0 does not carry the pristine simulated files (sim not installed, or a test left edits)")
    assert sh(conn, host, f"mkdir -p {SAVE} && cd {SITE} && cp -p --parents {' '.join(FILES)} {SAVE}/").ok
    try:
        yield sandbox, sandbox_inventory, host, conn
    finally:
        for f in FILES:
            upper = sandbox.cfg.host_dir("sbx0") / "upper" / SITE.lstrip("/") / f
            subprocess.run(["chattr", "-i", str(upper)], capture_output=True)
        sh(conn, host, f"cd {SAVE} && for f in {' '.join(FILES)}; do cmp -s $f {SITE}/$f || cp -p $f {SITE}/$f; done;"
                       f" rm -rf {SAVE} {hostlock.LOCK_DIR}")
        if not had_fleet_dir:
            sh(conn, host, "rm -rf /var/lib/fleet")
        if not had_cache:
            sh(conn, host, "rm -rf /root/.cache/flashinfer")
        else:
            sh(conn, host, "rm -rf /root/.cache/flashinfer/0.6.3/120a/cached_ops/other")
        try:
            assert sha_map(conn, host) == pristine_sha(), "sbx0 was not put back"
        finally:
            conn.close()


def test_check_apply_reapply_audit_behaviour_revert(sbx0):
    sandbox, inv, host, conn = sbx0
    path = sandbox.cfg.inventory_path
    sets = patchsets.load_sets([SET])
    runs_before = runs_on_host(conn, host)  # a deploy may have patched and reverted this host earlier

    # before: gates remain and the simulated flashinfer refuses SM12x
    before = archgate.audit_host(conn, host, sets=sets)
    assert before.sm == 120 and len(before.excluding) == 16
    assert all(g.lifted_by == [SET] for g in before.excluding)
    b = behaviour(conn, host)
    assert "No supported CUDA architectures found for major versions [9, 10]" in b["error"]
    assert b["runtime_gate"] is False  # sglang keeps fusion off on SM120 even with the flag

    rc, check = run_json(path, "--host", "sbx0", "--set", SET, "--check")
    assert rc == 0 and check["ok"] and check["sets"][0]["state"] == APPLICABLE
    assert [e["found"] for e in check["sets"][0]["edits"]] == [1, 13, 1, 1, 1, 1]
    assert sha_map(conn, host) == pristine_sha() and runs_on_host(conn, host) == runs_before  # --check wrote nothing

    cache = "/root/.cache/flashinfer/0.6.3/120a/cached_ops"
    assert sh(conn, host, f"mkdir -p {cache}/trtllm_comm {cache}/other && touch {cache}/trtllm_comm/trtllm_comm.so").ok
    modes = sh(conn, host, f"cd {SITE} && stat -c '%a %U' {' '.join(FILES)}").stdout

    rc, applied = run_json(path, "--host", "sbx0", "--set", SET)
    assert rc == 0 and applied["ok"], applied["error"]
    assert sorted(applied["written"]) == sorted(f"{SITE}/{f}" for f in FILES)
    assert applied["cleared"] == [f"{cache}/trtllm_comm"]
    assert sh(conn, host, f"test ! -e {cache}/trtllm_comm && test -d {cache}/other").ok
    # files changed exactly as planned from the sources, mode and owner kept
    assert sha_map(conn, host) == expected_after()
    assert sh(conn, host, f"cd {SITE} && stat -c '%a %U' {' '.join(FILES)}").stdout == modes
    assert not sh(conn, host, f"ls {SITE}/flashinfer/jit/.*.tmp {SITE}/sglang/srt/.*.tmp 2>/dev/null").stdout

    # backups: the manifest with hashes before/after, the originals content-addressed
    man = json.loads(sh(conn, host, f"cat {applied['manifest']}").stdout)
    assert man["status"] == "applied" and man["sets"] == [SET]
    pristine, after = pristine_sha(), expected_after()
    assert {f["path"]: (f["sha_before"], f["sha_after"]) for f in man["files"]} == {
        f"{SITE}/{f}": (pristine[f], after[f]) for f in FILES}
    objs = sh(conn, host, f"cd {patchplan.BACKUP_ROOT}/objects && sha256sum *").stdout.split()
    assert sorted(objs[0::2]) == sorted(pristine.values()) and objs[0::2] == objs[1::2]

    # again: nothing changes, no new run
    runs = runs_on_host(conn, host)
    rc, again = run_json(path, "--host", "sbx0", "--set", SET)
    assert rc == 0 and again["ok"] and again["written"] == [] and again["sets"][0]["state"] == APPLIED
    assert runs_on_host(conn, host) == runs and sha_map(conn, host) == expected_after()
    rc, check = run_json(path, "--host", "sbx0", "--set", SET, "--check")
    assert rc == 0 and check["sets"][0]["state"] == APPLIED

    # after: no gate excludes SM120, and the simulated flashinfer builds trtllm_comm for it with every kernel
    assert archgate.audit_host(conn, host, sets=sets).excluding == []
    b = behaviour(conn, host)
    assert 1200 in b["archs"] and b["ok"] and b["missing"] == [] and b["runtime_gate"] is True

    # human output names every file and edit
    out = inv_patch(path, "--host", "sbx0", "--set", SET, "--check")
    assert out.returncode == 0 and "trtllm kernel gates" in out.stdout and "applied" in out.stdout

    # revert: byte-for-byte originals, then nothing left to revert
    rc, rev = run_json(path, "--host", "sbx0", "--set", SET, "--revert")
    assert rc == 0 and rev["ok"], rev["error"]
    assert sha_map(conn, host) == pristine_sha()
    assert sh(conn, host, f"cd {SAVE} && for f in {' '.join(FILES)}; do cmp $f {SITE}/$f || exit 1; done").ok
    assert json.loads(sh(conn, host, f"cat {applied['manifest']}").stdout)["status"] == "reverted"
    b = behaviour(conn, host)
    assert "No supported CUDA architectures" in b["error"] and b["runtime_gate"] is False
    rc, rev = run_json(path, "--host", "sbx0", "--set", SET, "--revert")
    assert rc == 0 and rev["revert"]["state"] == patchplan.NOTHING


def test_revert_refuses_after_a_hand_edit(sbx0):
    sandbox, inv, host, conn = sbx0
    path = sandbox.cfg.inventory_path
    rc, applied = run_json(path, "--host", "sbx0", "--set", SET)
    assert rc == 0, applied["error"]
    assert sh(conn, host, f"echo '# tuned by hand' >> {SITE}/sglang/srt/server_args.py").ok
    hand = sha_map(conn, host)
    rc, rev = run_json(path, "--host", "sbx0", "--set", SET, "--revert")
    assert rc == 1 and not rev["ok"]
    assert "server_args.py: edited by hand" in rev["error"] and "nothing restored" in rev["error"]
    assert sha_map(conn, host) == hand  # no file restored, not even the untouched ones


def test_partial_match_changes_nothing(sbx0):
    sandbox, inv, host, conn = sbx0
    path = sandbox.cfg.inventory_path
    cuh = f"{SITE}/flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"
    runs_before = runs_on_host(conn, host)
    assert sh(conn, host, f"sed -i '417s/ \\&\\& (__CUDA_ARCH__ < 1200)//' {cuh}").ok
    drifted = sha_map(conn, host)
    rc, check = run_json(path, "--host", "sbx0", "--set", SET, "--check")
    assert rc == 1 and check["sets"][0]["state"] == CANNOT  # drift: exit 1 (the host is not as the set expects)
    assert "found 12 of 13" in check["error"] and "sbx0" in check["error"] and "trtllm_allreduce.cuh" in check["error"]
    assert "\n" not in check["error"] and "trtllm kernel gates" in check["error"]  # one line: host, file, edit
    rc, applied = run_json(path, "--host", "sbx0", "--set", SET)
    assert rc == 1 and applied["written"] == [] and "nothing changed" in applied["error"]
    assert sha_map(conn, host) == drifted and runs_on_host(conn, host) == runs_before


def test_one_unwritable_file_changes_nothing(sbx0):
    sandbox, inv, host, conn = sbx0
    upper = sandbox.cfg.host_dir("sbx0") / "upper" / SITE.lstrip("/") / "sglang/srt/layers/communicator.py"
    subprocess.run(["chattr", "+i", str(upper)], check=True)
    rc, applied = run_json(sandbox.cfg.inventory_path, "--host", "sbx0", "--set", SET)
    assert rc == 1 and "communicator.py" in applied["error"] and "nothing" in applied["error"]
    assert sha_map(conn, host) == pristine_sha()


def test_lock_held_fails_fast_naming_the_owner(sbx0):
    sandbox, inv, host, conn = sbx0
    lock = hostlock.acquire(conn, host, "deploy by a colleague")
    try:
        with pytest.raises(hostlock.HostLockError, match=r"sbx0: host is locked .* for deploy by a colleague"):
            hostlock.acquire(conn, host, "second")
        rc, applied = run_json(sandbox.cfg.inventory_path, "--host", "sbx0", "--set", SET)
        assert rc == 1 and "locked" in applied["error"] and "deploy by a colleague" in applied["error"]
        assert sha_map(conn, host) == pristine_sha()
    finally:
        hostlock.release(conn, host, lock)
    # an old lock from another machine is reported as stale, never broken: its owner may still run
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid is free now: provably not running
    other = {"owner": "x@elsewhere", "machine": "elsewhere", "pid": gone.pid,
             "purpose": "crashed", "time": "2026-01-01T00:00:00Z", "epoch": 0, "token": "0e" * 16}
    assert sh(conn, host, f"mkdir -p {hostlock.LOCK_DIR} && echo {_q(json.dumps(other))} "
                          f"> {hostlock.LOCK_DIR}/owner.json").ok
    with pytest.raises(hostlock.HostLockError, match="STALE") as exc:
        hostlock.acquire(conn, host, "patch")
    assert "h old" in str(exc.value)
    assert sh(conn, host, f"test -d {hostlock.LOCK_DIR}").ok  # not silently broken
    hostlock.break_lock(conn, host, "0e" * 16)
    assert not sh(conn, host, f"test -d {hostlock.LOCK_DIR}").ok
    # one whose owner ran here and is provably gone is recovered, and the new lock says so
    me = hostlock.LockOwner.mine("")
    dead = dict(other, owner="x@" + socket.gethostname(), machine=socket.gethostname(), machine_id=me.machine_id,
                boot_id=me.boot_id)
    assert sh(conn, host, f"mkdir -p {hostlock.LOCK_DIR} && echo {_q(json.dumps(dead))} "
                          f"> {hostlock.LOCK_DIR}/owner.json").ok
    lock = hostlock.acquire(conn, host, "patch")
    assert lock.recovered and "no longer running" in lock.recovered
    hostlock.release(conn, host, lock)


def test_exit_codes_and_other_hosts(sandbox, sandbox_inventory, tmp_path):
    path = sandbox.cfg.inventory_path
    p = inv_patch(path, "--host", "sbx0", "--set", "no-such-set", "--check")
    assert p.returncode == 2 and "no such patch set" in p.stderr
    rc, h100 = run_json(path, "--host", "sbx1", "--set", SET, "--check")
    assert rc == 0 and h100["sets"][0]["state"] == patchplan.NOT_APPLICABLE and "SM90" in h100["sets"][0]["reason"]
    (tmp_path / "broken.yaml").write_text("name: broken\ndescription: x\nedits:\n  - package: p\n    file: f\n")
    from fleet.errors import InputError

    with pytest.raises(InputError, match=r"broken.yaml:4: edits.0.find: required key is missing"):
        patch_command([sandbox_inventory.hosts["sbx0"]], ["broken"], True, False, True, sets_dir=tmp_path)


def test_prebuilt_jit_module_refuses_unless_allowed(sbx0):
    sandbox, inv, host, conn = sbx0
    path = sandbox.cfg.inventory_path
    aot = f"{SITE}/flashinfer/data/aot"
    assert sh(conn, host, f"mkdir -p {aot}/trtllm_comm && echo prebuilt > {aot}/trtllm_comm/trtllm_comm.so").ok
    try:
        rc, check = run_json(path, "--host", "sbx0", "--set", SET, "--check")
        assert rc == 1 and "prebuilt flashinfer JIT modules" in check["error"] and "trtllm_comm.so" in check["error"]
        rc, applied = run_json(path, "--host", "sbx0", "--set", SET)
        assert rc == 1 and applied["written"] == [] and sha_map(conn, host) == pristine_sha()
        rc, check = run_json(path, "--host", "sbx0", "--set", SET, "--check", "--allow-prebuilt-jit")
        assert rc == 0 and check["sets"][0]["state"] == APPLICABLE
    finally:
        sh(conn, host, f"rm -rf {aot}")


def test_inv_audit_lists_the_gates_that_exclude_the_sm(sandbox):
    def audit(*args):
        proc = subprocess.run([str(REPO / ".venv/bin/inv"), "audit", "-i", str(sandbox.cfg.inventory_path),
                               "--host", "sbx0", "--json", *args], cwd=REPO, capture_output=True, text=True)
        return proc.returncode, (json.loads(proc.stdout)["hosts"][0] if proc.stdout else None), proc.stderr

    rc, res, _ = audit("--set", SET)  # every gate lifted by the set: nothing remains, exit 0
    assert rc == 0 and res["sm"] == 120 and len(res["excluding"]) == 16 and res["remaining"] == 0
    assert all(g["lifted_by"] == [SET] for g in res["excluding"])
    assert any(g["file"].endswith("trtllm_allreduce.cuh") and "< 1200" in g["condition"] for g in res["excluding"])
    rc, res, _ = audit()  # without the set, the same 16 remain: exit 1
    assert rc == 1 and res["remaining"] == 16
    rc, res, _ = audit("--sm", "100")  # datacenter Blackwell: every gate lets it through
    assert rc == 0 and res["excluding"] == []
    # Hopper is its own reference: the SM100-only (>= 1000) FP4 paths are not Hopper's to miss
    rc, res, _ = audit("--sm", "90")
    assert rc == 0 and res["excluding"] == []
    rc, res, err = audit("--set", "no-such-set")
    assert rc == 2 and res is None and "no-such-set" in err
