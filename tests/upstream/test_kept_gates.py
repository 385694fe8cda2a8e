"""playbooks/upstream/kept-gates.yaml against the real wheels of the corpus: each gate upstream keeps off an SM on
purpose is where the entry says (file, function, condition) in every release of its range the corpus holds, it
excludes the SMs named there, and the text that says it is meant is in the same wheel. The audit of those releases
shows it as kept and does not count it; the gates fleet's patch sets exist for are never marked kept."""

from __future__ import annotations

import re

import pytest

from fleet.patches import audit as archgate
from fleet.patches import kept as keptgates
from fleet.patches import offline
from fleet.patches import sets as patchsets
from fleet.upstream import corpus as upstream
from fleet.upstream.versions import in_range, version_key

ENTRIES = keptgates.load()


def _releases_in_range(entry: keptgates.KeptGate, matrix: upstream.Matrix) -> list[str]:
    return sorted((v for d, v in matrix.releases() if d == entry.dist and in_range(v, entry.releases)),
                  key=version_key)


def _gates_of(entry: keptgates.KeptGate, version: str, sm: int) -> list[archgate.Gate]:
    rel = upstream.require(entry.dist, version)
    package, rest = entry.file.split("/", 1)
    path = rel.package(package) / rest
    assert path.is_file(), f"{entry.name}: {entry.file} is not in {entry.dist} {version}"
    scan = {entry.file: archgate.scan_text(entry.file, path.read_text(encoding="utf-8", errors="replace"))}
    return [g for g in archgate.evaluate(scan, sm) if g.where == entry.where and g.condition == entry.condition]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_each_kept_gate_is_in_every_release_it_names_and_upstream_says_so_there(entry, matrix):
    versions = _releases_in_range(entry, matrix)
    # a closed range whose ends are releases of the corpus: it says what was read, no more
    bounds = [re.fullmatch(r"\s*(>=|<=)\s*(\S+)\s*", c) for c in entry.releases.split(",")]
    assert all(bounds) and len(bounds) == 2, f"{entry.name}: releases must be '>=FIRST,<=LAST' ({entry.releases})"
    assert sorted((b[2] for b in bounds if b), key=version_key) == [versions[0], versions[-1]], (entry.name, versions)
    for version in versions:
        for major in entry.sm_majors:
            (gate,) = _gates_of(entry, version, major * 10)
            assert gate.excludes, f"{entry.name}: in {entry.dist} {version} the gate does not exclude SM {major}x"
        (reference,) = _gates_of(entry, version, 100)
        assert not reference.excludes  # what the gate is for still builds: it only keeps the named SMs out
        rel = upstream.require(entry.dist, version)
        package, rest = entry.evidence.file.split("/", 1)
        said = (rel.package(package) / rest).read_text(encoding="utf-8", errors="replace")
        assert entry.evidence.text in said, f"{entry.name}: {entry.dist} {version} {entry.evidence.file} no " \
                                            f"longer says {entry.evidence.text!r}"


def test_the_release_before_a_range_does_not_have_the_gate_or_the_evidence(matrix):
    """The lower bounds are where upstream started saying so: the release before each has neither."""
    for entry in ENTRIES:
        older = sorted((v for d, v in matrix.releases() if d == entry.dist
                        and version_key(v) < version_key(_releases_in_range(entry, matrix)[0])), key=version_key)
        if not older:
            continue
        rel = upstream.require(entry.dist, older[-1])
        package, rest = entry.evidence.file.split("/", 1)
        said = rel.package(package) / rest
        gone = not said.is_file() or entry.evidence.text not in said.read_text(encoding="utf-8", errors="replace")
        assert gone or not _gates_of(entry, older[-1], 120), (entry.name, older[-1])


def test_the_audit_of_0_7_4_shows_mnnvl_and_mixed_comm_as_kept_and_counts_only_the_rest(matrix):
    res = offline.audit({"sglang": "0.5.23", "flashinfer-python": "0.7.4"}, 120, fetch=False).result
    assert {(g.where, g.kept.name if g.kept else None) for g in res.excluding if g.file == "flashinfer/jit/comm.py"} \
        == {("gen_trtllm_mnnvl_comm_module", "flashinfer-mnnvl-allreduce"),
            ("gen_mixed_comm_module", "flashinfer-mixed-comm")}
    assert len(res.excluding) == 5 and len(res.kept) == 2 and len(res.remaining) == 3
    assert all(g.file.startswith("sglang/") for g in res.remaining)
    lifted = offline.audit({"sglang": "0.5.23", "flashinfer-python": "0.7.4"}, 120,
                           patchsets.load_sets(["sm120-allreduce-fusion"]), fetch=False).result
    assert lifted.remaining == [] and lifted.verdict() == (
        "sglang 0.5.23, flashinfer-python 0.7.4: 5 of 43 gates exclude SM 120; upstream keeps 2 on purpose; "
        "the sets lift 3, 0 remain")
    # on SM 100, which the gates are for, nothing is excluded, so nothing is kept either
    assert offline.audit({"flashinfer-python": "0.7.4"}, 100, fetch=False).result.kept == []


def test_the_trtllm_comm_gate_the_fusion_set_lifts_is_never_kept(matrix):
    """0.6.16's gen_trtllm_comm_module [9, 10] (the seed's allreduce-fusion crash) sits in the same file with the
    same condition as the kept ones: only the function tells them apart, and it must still count."""
    res = offline.audit({"flashinfer-python": "0.6.16"}, 120, fetch=False).result
    by_where = {g.where: g for g in res.excluding if g.file == "flashinfer/jit/comm.py"}
    assert set(by_where) == {"gen_trtllm_mnnvl_comm_module", "gen_mixed_comm_module", "gen_trtllm_comm_module"}
    assert by_where["gen_trtllm_comm_module"].kept is None and by_where["gen_trtllm_comm_module"] in res.remaining
    assert by_where["gen_mixed_comm_module"].kept is not None
