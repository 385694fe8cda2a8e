"""The sandbox's simulated packages against the real releases they stand for (sglang 0.5.9, flashinfer-python
0.6.3): every line a patch set or the audit reads in a look-alike is the real file's line, at the real line
number where the look-alike claims it (sandbox/sim/README.md), so what passes on the sandbox passes on the real
text."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.patches import audit as archgate
from fleet.upstream import corpus as upstream

SIM = Path(__file__).resolve().parents[2] / "sandbox/sim/pkgs"
HEADERS = sorted((SIM / "flashinfer/data/include/flashinfer/comm").glob("*.cuh"))


def _real(dist: str, version: str, rel: str) -> list[str]:
    return (Path(upstream.require(dist, version).root) / rel).read_text().split("\n")


@pytest.mark.parametrize("header", HEADERS, ids=[h.name for h in HEADERS])
def test_every_arch_gate_of_a_simulated_header_is_the_real_line(matrix, header):
    real = _real("flashinfer-python", "0.6.3", str(header.relative_to(SIM)))
    gates = [d for d in archgate.cpp_directives(header.read_text())
             if d.kind in ("if", "elif") and "__CUDA_ARCH__" in d.cond]
    assert gates
    wrong = [(d.line, d.raw) for d in gates if real[d.line - 1] != d.raw]
    assert not wrong, wrong


def test_the_lines_the_edits_anchor_on_are_real(matrix):
    fusion = (SIM / "flashinfer/data/include/flashinfer/comm/trtllm_allreduce_fusion.cuh").read_text().split("\n")
    real = _real("flashinfer-python", "0.6.3", "flashinfer/data/include/flashinfer/comm/trtllm_allreduce_fusion.cuh")
    assert fusion[1397:1403] == real[1397:1403]  # the launcher's cluster size, the clamp edit's find
    assert real[1374].startswith("cudaError_t allreduce_fusion_kernel_launcher(") and \
        fusion[1374].startswith("cudaError_t allreduce_fusion_kernel_launcher(")  # its anchor, on the real line
    comm, real_comm = (SIM / "flashinfer/jit/comm.py").read_text().split("\n"), _real(
        "flashinfer-python", "0.6.3", "flashinfer/jit/comm.py")
    assert [comm[58], comm[60]] == [real_comm[58], real_comm[60]]  # gen_trtllm_comm_module and its JIT gate
    ours, real_sg = (SIM / "sglang/srt/layers/communicator.py").read_text().split("\n"), _real(
        "sglang", "0.5.9", "sglang/srt/layers/communicator.py")
    for n in (73, 91, 95):  # _is_sm100_supported =, apply_flashinfer_allreduce_fusion(, its gate
        assert ours[n - 1] == real_sg[n - 1], n
    args = (SIM / "sglang/srt/server_args.py").read_text().split("\n")
    real_args = _real("sglang", "0.5.9", "sglang/srt/server_args.py")
    for text in ("            and (is_sm90_supported() or is_sm100_supported())",
                 "            self.enable_flashinfer_allreduce_fusion = True"):
        assert text in args and text in real_args  # the auto-enable gate and its anchor, as released
