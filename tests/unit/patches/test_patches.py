"""Patch sets: schema errors with file:line, version ranges, and pure planning (apply and revert)."""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path

import pytest

from fleet.errors import InputError
from fleet.host import programs as hostside
from fleet.host.service import sha256
from fleet.patches import plan as patchplan
from fleet.patches import sets as patchsets
from fleet.patches.plan import APPLICABLE, APPLIED, CANNOT, NOT_APPLICABLE, FileInfo, HostState
from fleet.upstream import versions

REPO = Path(__file__).resolve().parents[3]
SIM = REPO / "sandbox/sim/pkgs"
SHIPPED = REPO / "playbooks/patches"


def write(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / f"{name}.yaml"
    p.write_text(textwrap.dedent(body))
    return p


GOOD = """\
name: demo
description: test set
applies_to:
  sm: [120]
  packages: {pkg-dist: "<2.0"}
edits:
  - package: pkg
    file: a.py
    find: "gate=[9, 10]"
    replace: "gate=[9, 10, 12]"
    count: 2
post:
  clear_jit_cache: [trtllm_comm]
"""


# --- schema -----------------------------------------------------------------------------------------


def test_good_set_loads(tmp_path):
    ps = patchsets.load_file(write(tmp_path, "demo", GOOD))
    assert ps.name == "demo" and ps.edits[0].count == 2 and ps.post.clear_jit_cache == ["trtllm_comm"]


@pytest.mark.parametrize("old,new,where", [
    ("    count: 2\n", "    count: 2\n    colour: red\n", ":12: edits.0.colour: unknown key"),
    ("    count: 2\n", "    count: 0\n", ":11: edits.0.count:"),
    ("    file: a.py\n", "    file: ../../etc/passwd\n", ":8: edits.0.file:"),
    ("    file: a.py\n", "    file: /etc/passwd\n", ":8: edits.0.file:"),
    ("  - package: pkg\n", "  - package: 'not a name'\n", ":7: edits.0.package:"),
    ('    replace: "gate=[9, 10, 12]"\n', '    replace: "x gate=[9, 10] y"\n',
     r":7: edits.0: (Value error, )?replace contains find"),
    ('  packages: {pkg-dist: "<2.0"}\n', '  packages: {pkg-dist: "about 2"}\n', ":5: applies_to.packages:"),
    ("  clear_jit_cache: [trtllm_comm]\n", "  clear_jit_cache: [../x]\n", ":13: post.clear_jit_cache:"),
    ("name: demo\n", "name: other\n", ":1: name: must match the file name"),
    ("description: test set\n", "", ":1: description: required key is missing"),
])
def test_schema_errors_name_file_line_key(tmp_path, old, new, where):
    assert old in GOOD
    path = write(tmp_path, "demo", GOOD.replace(old, new))
    with pytest.raises(InputError) as exc:
        patchsets.load_file(path)
    msg = str(exc.value)
    assert msg.startswith(str(path)) and (where in msg or re.search(where, msg)), msg
    assert "\n" not in msg


def test_bad_yaml_and_duplicate_find(tmp_path):
    with pytest.raises(InputError, match=r"demo.yaml:\d+: invalid YAML"):
        patchsets.load_file(write(tmp_path, "demo", "name: [unclosed\n"))
    dup = GOOD.replace("post:\n  clear_jit_cache: [trtllm_comm]\n", "") + """\
  - package: pkg
    file: a.py
    find: "gate=[9, 10]"
    replace: "gate=[12]"
    count: 1
"""
    with pytest.raises(InputError, match=r"demo.yaml:\d+: edits.1.find: same find text"):
        patchsets.load_file(write(tmp_path, "demo", dup))


def test_unknown_set_is_input_error(tmp_path):
    write(tmp_path, "demo", GOOD)
    with pytest.raises(InputError, match=r"--set nope: no such patch set .* \(known: demo\)"):
        patchsets.load_sets(["nope"], tmp_path)
    with pytest.raises(InputError):
        patchsets.load_sets([], tmp_path)


def test_version_ranges():
    assert versions.in_range("0.6.3", "<0.6.17")
    assert not versions.in_range("0.6.17", "<0.6.17")
    assert versions.in_range("0.6.17rc1", "<0.6.17")
    assert versions.in_range("0.5.9", ">=0.5.8,<0.6")
    assert not versions.in_range("0.5.7", ">=0.5.8")
    assert versions.in_range("2.9.1+cu130", "==2.9.1")
    assert versions.in_range("1.0", "==1.0.0")
    with pytest.raises(ValueError):
        versions.parse_range("=<1.0")


# --- the shipped set against the simulated packages -------------------------------------------------


def sim_state(sm: int = 120, versions: dict | None = None, overrides: dict | None = None) -> HostState:
    ps = patchsets.load_file(SHIPPED / "sm120-allreduce-fusion.yaml")
    st = HostState(sms=[sm] * 2, dists=versions or {"flashinfer-python": "0.6.3", "sglang": "0.5.9"})
    for pkg, rel in ps.files():
        st.packages[pkg] = {"path": f"/venv/site-packages/{pkg}", "dist": pkg, "version": "x"}
        path = SIM / pkg / rel
        if rel not in (overrides or {}) and not path.is_file():  # a file of another sglang layout
            st.files[(pkg, rel)] = FileInfo(pkg, rel, f"/venv/site-packages/{pkg}/{rel}", False)
            continue
        data = (overrides or {}).get(rel) or path.read_bytes()
        st.files[(pkg, rel)] = FileInfo(pkg, rel, f"/venv/site-packages/{pkg}/{rel}", True, data,
                                        sha256(data), 0o644, 0, 0)
    return st


def shipped() -> list:
    return [patchsets.load_file(SHIPPED / "sm120-allreduce-fusion.yaml")]


def test_shipped_set_is_applicable_on_the_simulated_packages():
    p = patchplan.plan(shipped(), sim_state())
    assert p.ok and p.sets[0].state == APPLICABLE
    assert [e.found for e in p.sets[0].edits] == [1, 13, 1, 1, 1, 1]
    assert {c.file for c in p.changes} == {"jit/comm.py", "data/include/flashinfer/comm/trtllm_allreduce.cuh",
                                           "data/include/flashinfer/comm/trtllm_allreduce_fusion.cuh",
                                           "srt/server_args.py", "srt/layers/communicator.py"}
    assert p.clear_jit_cache == ["trtllm_comm"]
    cuh = next(c for c in p.changes if c.file.endswith(".cuh"))
    assert b"__CUDA_ARCH__ < 1200" not in cuh.after and cuh.after.count(b"(__CUDA_ARCH__ >= 900))") == 13
    comm = next(c for c in p.changes if c.file == "srt/layers/communicator.py")
    compile(comm.after, "communicator.py", "exec")  # the edited module is still Python


def test_planning_is_idempotent_and_detects_applied():
    first = patchplan.plan(shipped(), sim_state())
    after = {c.file: c.after for c in first.changes}
    again = patchplan.plan(shipped(), sim_state(overrides=after))
    assert again.ok and again.sets[0].state == APPLIED and again.changes == []
    assert all(e.state == APPLIED for e in again.sets[0].edits)


def test_partial_match_cannot_apply_and_nothing_planned():
    rel = "data/include/flashinfer/comm/trtllm_allreduce.cuh"
    data = (SIM / "flashinfer" / rel).read_bytes()
    one = b"#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"
    drifted = data.replace(one, b"#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))", 1)
    p = patchplan.plan(shipped(), sim_state(overrides={rel: drifted}))
    assert not p.ok and p.sets[0].state == CANNOT
    bad = [e for e in p.sets[0].edits if e.state == CANNOT]
    assert len(bad) == 1 and bad[0].found == 12 and "found 12 of 13" in bad[0].reason
    assert "partly edited" in bad[0].reason
    assert p.changes == []  # nothing of the set is written, not even the files that would apply


def test_drifted_upstream_and_missing_file_or_package():
    rel = "jit/comm.py"
    drifted = b"def gen_trtllm_comm_module():\n    return dict(supported_major_versions=[9, 10, 11])\n"
    p = patchplan.plan(shipped(), sim_state(overrides={rel: drifted}))
    e = p.sets[0].edits[0]
    assert e.state == CANNOT and "found 0 of 1" in e.reason and "drifted" in e.reason
    assert "near 'def gen_trtllm_comm_module('" in e.reason
    # the anchor gone (the function renamed upstream): named as such
    p = patchplan.plan(shipped(), sim_state(overrides={rel: b"supported_major_versions=[9, 10]\n"}))
    assert "anchor 'def gen_trtllm_comm_module(' found 0 times" in p.sets[0].edits[0].reason
    st = sim_state()
    st.files[("flashinfer", rel)] = FileInfo("flashinfer", rel, "/x/flashinfer/jit/comm.py", False,
                                             error="file missing")
    st.packages["sglang"] = {"error": "not importable by /venv/bin/python"}
    p = patchplan.plan(shipped(), st)
    reasons = [e.reason for e in p.sets[0].edits if e.state == CANNOT]
    assert any("file missing" in r for r in reasons) and any("not importable" in r for r in reasons)
    assert p.changes == []


def test_applies_to_sm_and_versions():
    assert patchplan.plan(shipped(), sim_state(sm=90)).sets[0].state == NOT_APPLICABLE
    # flashinfer 0.6.17 has upstream's fix: only the sglang edits remain, and the plan says why
    p = patchplan.plan(shipped(), sim_state(versions={"flashinfer-python": "0.6.17", "sglang": "0.5.9"}))
    assert p.sets[0].state == APPLICABLE and {c.package for c in p.changes} == {"sglang"}
    assert "flashinfer-python 0.6.17: flashinfer 0.6.17 ships upstream's fix" in p.sets[0].not_needed[0]
    # a version no variant covers: cannot apply, named
    p = patchplan.plan(shipped(), sim_state(versions={"flashinfer-python": "0.6.3", "sglang": "0.5.7"}))
    assert p.sets[0].state == CANNOT and "no variant for sglang 0.5.7" in p.sets[0].reason
    st = sim_state()
    st.sms, st.sm_error = [], "nvidia-smi: not found"
    p = patchplan.plan(shipped(), st)
    assert p.sets[0].state == CANNOT and not p.ok


def test_prebuilt_jit_cache_refuses_unless_allowed():
    st = sim_state()
    st.prebuilt = ["flashinfer-jit-cache package at /x"]
    assert not patchplan.plan(shipped(), st).ok
    assert "prebuilt" in patchplan.plan(shipped(), st).errors[0]
    assert patchplan.plan(shipped(), st, allow_prebuilt=True).ok


def test_sets_apply_in_order_on_the_same_file(tmp_path):
    a = write(tmp_path, "a", """\
        name: a
        description: x
        edits: [{package: pkg, file: f.py, find: "A=1", replace: "A=2", count: 1}]
    """)
    b = write(tmp_path, "b", """\
        name: b
        description: y
        edits: [{package: pkg, file: f.py, find: "A=2", replace: "A=3", count: 1}]
    """)
    sets = [patchsets.load_file(a), patchsets.load_file(b)]
    st = HostState(packages={"pkg": {"path": "/p"}},
                   files={("pkg", "f.py"): FileInfo("pkg", "f.py", "/p/f.py", True, b"A=1\n", "h")})
    p = patchplan.plan(sets, st)
    assert p.ok and len(p.changes) == 1 and p.changes[0].after == b"A=3\n" and len(p.changes[0].steps) == 2


# --- revert planning --------------------------------------------------------------------------------


def _run(run_id: str, sets: list[str], path: str, before: str, after: str, status: str = "applied") -> dict:
    return {"run": run_id, "sets": sets, "status": status, "clear_jit_cache": ["trtllm_comm"],
            "files": [{"path": path, "sha_before": before, "sha_after": after, "dist": "flashinfer-python",
                       "version": "0.6.3"}]}


def _revert_state(now: str | None, runs: list[dict], version: str = "0.6.3", record: str | None = None) -> HostState:
    info = FileInfo("flashinfer", "jit/comm.py", "/p/comm.py", now is not None, b"", now, 0o644, 0, 0,
                    "flashinfer-python", version, record)
    return HostState(files={("flashinfer", "jit/comm.py"): info}, runs=runs)


def test_revert_plans():
    sets = shipped()
    name = sets[0].name
    runs = [_run("20260101T000000Z-a", [name], "/p/comm.py", "B" * 64, "A" * 64)]
    assert patchplan.plan_revert(sets, _revert_state("A" * 64, runs)).state == patchplan.REVERTIBLE
    assert patchplan.plan_revert(sets, _revert_state("A" * 64, [])).state == patchplan.NOTHING
    hand = patchplan.plan_revert(sets, _revert_state("C" * 64, runs))
    assert hand.state == CANNOT and "edited by hand" in hand.reason
    pip = patchplan.plan_revert(sets, _revert_state("C" * 64, runs, record="C" * 64))
    assert pip.state == CANNOT and "package reinstall" in pip.reason
    upgraded = patchplan.plan_revert(sets, _revert_state("C" * 64, runs, version="0.6.4"))
    assert "package upgrade" in upgraded.reason and "0.6.3 -> 0.6.4" in upgraded.reason
    later = runs + [_run("20260102T000000Z-b", ["other"], "/p/comm.py", "A" * 64, "D" * 64)]
    assert "revert that first" in patchplan.plan_revert(sets, _revert_state("D" * 64, later)).reason
    together = [_run("20260101T000000Z-a", [name, "other"], "/p/comm.py", "B" * 64, "A" * 64)]
    assert "revert them together" in patchplan.plan_revert(sets, _revert_state("A" * 64, together)).reason
    reverted = [_run("20260101T000000Z-a", [name], "/p/comm.py", "B" * 64, "A" * 64, status="reverted")]
    assert patchplan.plan_revert(sets, _revert_state("B" * 64, reverted)).state == patchplan.NOTHING


def test_host_script_is_valid_python():
    import ast

    ast.parse(hostside.text("patch_host.py"))


def test_lock_owner_descriptions():
    import socket

    from fleet.host import lock as hostlock

    fresh = hostlock.LockOwner(owner="ann@ctl", machine="elsewhere", pid=1, purpose="deploy", time="T", epoch=100,
                               token="abc")
    assert hostlock.describe(fresh, now=200) == "held by ann@ctl pid 1 for deploy since T"
    old = hostlock.describe(fresh, now=100 + hostlock.STALE_AFTER_S + 3600)
    assert "STALE" in old and "h old" in old and "--token abc" in old
    # the fifth newcomer was told to run `inv unlock --host <host> --token ...`, the host a placeholder
    assert "`inv unlock --host gpu-1 --token abc`" in hostlock.describe(fresh, now=100 + hostlock.STALE_AFTER_S + 1,
                                                                        host="gpu-1")
    me = hostlock.LockOwner.mine("")
    gone = dataclasses.replace(fresh, machine=socket.gethostname(), pid=2 ** 22 + 7, machine_id=me.machine_id,
                               boot_id=me.boot_id)
    assert "no longer running" in hostlock.describe(gone, now=200)
    assert "no longer running" not in hostlock.describe(dataclasses.replace(gone, machine_id=None), now=200)
    assert "unknown owner" in hostlock.describe(None)


VARIANTS = """\
name: demo
description: variants per layout
variants:
  - dist: pkg-dist
    versions: "<2.0"
    edits:
      - package: pkg
        file: a.py
        within: {anchor: "def gate(", after: 1}
        find: "[9, 10]"
        replace: "[9, 10, 12]"
        count: 1
  - dist: pkg-dist
    versions: ">=2.0"
    not_needed: "2.0 has the fix"
"""


def test_variants_pick_by_version_and_anchor_on_the_gate(tmp_path):
    ps = patchsets.load_file(write(tmp_path, "demo", VARIANTS))
    text = b"def other():\n    return [9, 10]\ndef gate():\n    return [9, 10]\n"
    st = HostState(packages={"pkg": {"path": "/p"}}, dists={"pkg-dist": "1.5"},
                   files={("pkg", "a.py"): FileInfo("pkg", "a.py", "/p/a.py", True, text, sha256(text))})
    p = patchplan.plan([ps], st)
    want = text.replace(b"gate():\n    return [9, 10]", b"gate():\n    return [9, 10, 12]")
    assert p.ok and p.changes[0].after == want
    assert p.changes[0].steps == [(text.rindex(b"[9, 10]"), b"[9, 10]", b"[9, 10, 12]")]  # the other gate untouched
    st.dists["pkg-dist"] = "2.1"
    p = patchplan.plan([ps], st)
    assert p.sets[0].state == patchplan.NOT_NEEDED and p.sets[0].reason == "pkg-dist 2.1: 2.0 has the fix"
    st.dists["pkg-dist"] = None
    assert "pkg-dist is not installed" in patchplan.plan([ps], st).sets[0].reason
    # the anchor twice: ambiguous, named
    st.dists["pkg-dist"] = "1.0"
    st.files[("pkg", "a.py")].content = text + b"def gate():\n    pass\n"
    (e,) = patchplan.plan([ps], st).sets[0].edits
    assert e.state == CANNOT and "anchor 'def gate(' found 2 times, expected once (ambiguous)" in e.reason


@pytest.mark.parametrize("old,new,where", [
    ('    not_needed: "2.0 has the fix"\n', "", r":13: variants.1: a variant has either edits or not_needed"),
    ('    versions: "<2.0"\n', '    versions: "before 2"\n', r":5: variants.0.versions:"),
    ('        within: {anchor: "def gate(", after: 1}\n', '        within: {anchor: "", after: 1}\n',
     r":9: variants.0.edits.0.within.anchor:"),
])
def test_variant_schema_errors_name_file_line_key(tmp_path, old, new, where):
    assert old in VARIANTS
    with pytest.raises(InputError) as exc:
        patchsets.load_file(write(tmp_path, "demo", VARIANTS.replace(old, new)))
    assert re.search(where, str(exc.value)), str(exc.value)


def test_overlapping_variants_cannot_apply(tmp_path):
    ps = patchsets.load_file(write(tmp_path, "demo", VARIANTS.replace('versions: ">=2.0"', 'versions: ">=1.0"')))
    sel = ps.select({"pkg-dist": "1.5"})
    assert sel.missing == ["pkg-dist 1.5 matches 2 variants (<2.0, >=1.0)"]


def test_drift_is_told_apart_from_other_refusals():
    """Text that moved, or a version no variant covers, is drift (inv patch exits 2); a missing file, a package
    that does not import or a prebuilt JIT cache is not."""
    rel = "jit/comm.py"
    moved = patchplan.plan(shipped(), sim_state(overrides={rel: b"def gen_trtllm_comm_module():\n    pass\n"}))
    assert not moved.ok and moved.drifted and moved.sets[0].drift
    assert patchplan.plan(shipped(), sim_state(versions={"flashinfer-python": "0.6.3", "sglang": "0.5.7"})).drifted
    st = sim_state()
    st.files[("flashinfer", rel)] = FileInfo("flashinfer", rel, "/x/flashinfer/jit/comm.py", False, error="missing")
    gone = patchplan.plan(shipped(), st)
    assert not gone.ok and not gone.drifted
    st = sim_state(versions={"flashinfer-python": "0.6.3"})  # sglang not installed
    assert not patchplan.plan(shipped(), st).drifted
    st = sim_state()
    st.prebuilt = ["trtllm_comm.so"]
    refused = patchplan.plan(shipped(), st)
    assert not refused.ok and refused.errors and not refused.drifted
