"""sm120-allreduce-fusion on every (sglang, flashinfer-python) pair of the matrix, over the real released files:
plan -> apply (the host program's steps) -> audit shows no fusion-path gate left -> the original comes back
byte for byte; patched Python compiles and defines what it uses; gates off the fusion path stay as they were."""

from __future__ import annotations

import ast
import re

import pytest
import truth

from fleet.patches import audit as archgate
from fleet.patches import offline
from fleet.patches import plan as patchplan
from fleet.patches import sets as patchsets
from fleet.upstream import corpus as upstream
from fleet.upstream.versions import version_key

SETS = patchsets.load_sets(["sm120-allreduce-fusion"])
PAIRS = upstream.load_matrix().pairs()
LABELS = truth.labels()
FIXED = version_key("0.6.17")


def _bound_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def _replayed(change: patchplan.FileChange) -> bytes:
    """The steps applied exactly as fleet/host/programs/patch_host.py applies them."""
    data = change.before
    for off, find, repl in change.steps:
        assert data[off:off + len(find)] == find, f"{change.path}: step at {off} does not find its text"
        data = data[:off] + repl + data[off + len(find):]
    return data


def _labelled(gates: list[archgate.Gate], texts: dict[str, str]) -> list[tuple[archgate.Gate, truth.Label]]:
    out = []
    for g in gates:
        lab = LABELS.get(truth.key(g, texts[g.file]))
        assert lab is not None, f"no label for {truth.key(g, texts[g.file])}: label it in truth/fusion_path.yaml"
        out.append((g, lab))
    return out


def _texts(rels: dict[str, upstream.UpstreamRelease], scan: dict[str, object]) -> dict[str, str]:
    return {name: (rels[name.split("/")[0]].package(name.split("/")[0]) / name.split("/", 1)[1])
            .read_text(encoding="utf-8", errors="replace") for name in scan}


@pytest.mark.parametrize("sglang,flashinfer", PAIRS, ids=[f"sglang{a}-fi{b}" for a, b in PAIRS])
def test_pair(matrix, sglang, flashinfer):
    versions = {"sglang": sglang, "flashinfer-python": flashinfer}
    plan = offline.check(SETS, versions, 120, fetch=False)
    (sp,) = plan.sets
    assert sp.state == patchplan.APPLICABLE, [e.reason for e in sp.edits if e.reason] or sp.reason
    touched = {c.package for c in plan.changes}
    if version_key(flashinfer) >= FIXED:
        assert touched == {"sglang"} and sp.not_needed and "0.6.17" in sp.not_needed[0]
    else:
        assert touched == {"sglang", "flashinfer"}

    rels = offline.releases(versions, fetch=False)
    scan = offline.scan_tree(rels, archgate.FUSION_SCOPE)
    texts = _texts(rels, scan)
    before = _labelled(archgate.evaluate(scan, 120), texts)
    flagged = [(g, lab) for g, lab in before if g.excludes]
    missed = [lab for g, lab in before if lab.excludes and not g.excludes]
    assert not missed, f"recall below 1.0: {missed}"
    assert all(lab.excludes for _, lab in flagged if lab.path != "other") and flagged

    patched = dict(scan)
    for change in plan.changes:
        after = _replayed(change)
        assert after == change.after
        name = f"{change.package}/{change.file}"
        text = after.decode()
        if name.endswith(".py"):
            tree = ast.parse(text, filename=change.path)  # the patched Python still compiles
            compile(tree, change.path, "exec")
            used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and "sm120" in n.id}
            assert used <= _bound_names(tree), f"{name}: uses {used - _bound_names(tree)} it does not define"
        patched[name] = archgate.scan_text(name, text)
        texts[name] = text
        # revert: the host restores the backed-up original; it must be the very bytes read
        assert patchplan.sha256(change.before) == change.info.sha256
    after_gates = [(g, LABELS.get(truth.key(g, texts[g.file]))) for g in archgate.evaluate(patched, 120)]
    left = [(g.file, g.line, g.text) for g, lab in after_gates if g.excludes and (lab is None or lab.path != "other")]
    assert not left, f"gates on the fusion path still exclude SM120: {left}"
    others_before = sorted((g.file, g.text) for g, lab in flagged if lab.path == "other")
    others_after = sorted((g.file, g.text) for g, lab in after_gates if g.excludes and lab and lab.path == "other")
    assert others_before == others_after, "a gate off the fusion path was changed"


def test_precision_and_recall_over_the_matrix(matrix):
    """The fusion path over every release: recall 1.0, precision >= 0.95 (per release in the message)."""
    tp = fp = fn = 0
    per = []
    todo = [{"sglang": v} for v in matrix.sglang] + [{"flashinfer-python": v}
                                                     for v in dict.fromkeys([*matrix.sglang.values(),
                                                                             *matrix.flashinfer_extra])]
    for versions in todo:
        rels = offline.releases(versions, fetch=False)
        scan = offline.scan_tree(rels, archgate.FUSION_SCOPE)
        pairs = _labelled(archgate.evaluate(scan, 120), _texts(rels, scan))
        t = sum(1 for g, lab in pairs if g.excludes and lab.excludes)
        f = sum(1 for g, lab in pairs if g.excludes and not lab.excludes)
        n = sum(1 for g, lab in pairs if not g.excludes and lab.excludes)
        tp, fp, fn = tp + t, fp + f, fn + n
        per.append(f"{versions}: tp {t} fp {f} fn {n}")
    assert fn == 0, per
    assert tp / (tp + fp) >= 0.95, per


FLASHINFERS = list(dict.fromkeys([*upstream.load_matrix().sglang.values(), *upstream.load_matrix().flashinfer_extra]))


@pytest.mark.parametrize("flashinfer", FLASHINFERS)
def test_custom_allreduce_fixes_on_every_flashinfer(matrix, flashinfer):
    """The opt-in set: applies to every flashinfer before 0.6.17, is not needed from 0.6.17 on; on the real
    0.6.16 text the stride lines it writes are the ones 0.6.17 ships."""
    sets = patchsets.load_sets(["trtllm-custom-allreduce-fixes"])
    plan = offline.check(sets, {"flashinfer-python": flashinfer}, 120, fetch=False)
    (sp,) = plan.sets
    if version_key(flashinfer) >= FIXED:
        assert sp.state == patchplan.NOT_NEEDED and plan.changes == []
        return
    assert sp.state == patchplan.APPLICABLE, [e.reason for e in sp.edits if e.reason]
    cu = next(c for c in plan.changes if c.file.endswith("trtllm_allreduce.cu"))
    assert _replayed(cu) == cu.after and b"[i + tp_size" not in cu.after
    fixed = (upstream.require("flashinfer-python", "0.6.17").package() / cu.file).read_bytes()
    index = re.compile(rb"lamport_peer_comm_buffer_ptrs\[i[^\]]*\]")
    assert index.findall(cu.after) == index.findall(fixed) == [
        b"lamport_peer_comm_buffer_ptrs[i]", b"lamport_peer_comm_buffer_ptrs[i + MAX_RANKS_PER_NODE]",
        b"lamport_peer_comm_buffer_ptrs[i + MAX_RANKS_PER_NODE * 2]"]


def test_sm120_clamp_matches_upstream_semantics_on_0_6_16(matrix):
    """The default set's cluster clamp on 0.6.16's launcher: min(8, what the device launches) for SM >= 90,
    the kernel queried the one 0.6.17 queries."""
    plan = offline.check(SETS, {"sglang": "0.5.9", "flashinfer-python": "0.6.16"}, 120, fetch=False)
    cuh = next(c for c in plan.changes if c.file.endswith("trtllm_allreduce_fusion.cuh")).after.decode()
    upstream_fix = (upstream.require("flashinfer-python", "0.6.17").package()
                    / "data/include/flashinfer/comm/trtllm_allreduce_fusion.cuh").read_text()
    assert "allreduce_fusion_kernel_oneshot_lamport<Pattern, T, NRanks, Fp32Acc>" in upstream_fix
    assert "allreduce_fusion_kernel_oneshot_lamport<Pattern, T, NRanks, Fp32Acc>),\n" in cuh
    assert "cluster_size = std::min(8, fleet_max_cluster_size);" in cuh and "cluster_size = 8;" not in cuh
