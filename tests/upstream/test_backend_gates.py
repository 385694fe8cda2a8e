"""playbooks/upstream/backend-gates.yaml against the real wheels of the corpus: in every release of an entry's range
that the corpus holds, its text is in its file (inside its function when it names one), and the range's ends are
releases of the corpus, so it says what was read and no more."""

from __future__ import annotations

import ast

import pytest

from fleet.deploy import searchspace
from fleet.upstream import corpus as upstream
from fleet.upstream.versions import in_range, version_key

GATES = searchspace.backend_gates()


def _function_source(text: str, name: str) -> str | None:
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment(text, node)
    return None


@pytest.mark.parametrize("gate", GATES, ids=[f"{g.flag}={g.value}" for g in GATES])
def test_each_gate_is_in_every_release_of_its_range(gate, matrix):
    versions = sorted((v for d, v in matrix.releases() if d == gate.dist and in_range(v, gate.releases)),
                      key=version_key)
    assert versions, f"{gate.flag}={gate.value}: no {gate.dist} release of {gate.releases} in the corpus"
    ends = [c.strip().lstrip("<>=") for c in gate.releases.split(",")]
    assert ends == [versions[0], versions[-1]], f"the range's ends should be corpus releases: {versions}"
    for version in versions:
        package, rest = gate.file.split("/", 1)
        text = (upstream.require(gate.dist, version).package(package) / rest).read_text(encoding="utf-8")
        where = _function_source(text, gate.where) if gate.where else text
        assert where is not None, f"{gate.dist} {version}: no def {gate.where} in {gate.file}"
        assert gate.text in where, f"{gate.dist} {version} {gate.file}: {gate.text!r} not found"


def test_the_release_after_a_closed_range_no_longer_has_the_gate(matrix):
    """flashinfer 0.6.7.post3 lists SM12x for the trtllm-gen MoE: the gate's range stops where the corpus says."""
    gate = next(g for g in GATES if g.value == "flashinfer_trtllm")
    text = (upstream.require("flashinfer-python", "0.6.7.post3").package("flashinfer") / "jit/fused_moe.py").read_text()
    body = _function_source(text, gate.where or "")
    assert body is not None and gate.text not in body and "supported_major_versions=[10, 12]" in body
