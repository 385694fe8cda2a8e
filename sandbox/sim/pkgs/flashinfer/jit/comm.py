"""JIT specs of the communication modules (SIMULATED flashinfer 0.6.3).

As upstream from v0.4.0 on, gen_trtllm_comm_module sits at line 59 of this file and asks the
compilation context for its architectures at line 61 (majors 9 and 10 only). On an SM 12.x GPU
that raises "No supported CUDA architectures found for major versions [9, 10]." The simulated
sglang calls this function when allreduce fusion is applied, so an edit here is what runs.
"""

from flashinfer.compilation_context import CompilationContext

from . import env as jit_env
from .core import JitSpec, gen_jit_spec

current_compilation_context = CompilationContext()


def gen_comm_alltoall_module() -> JitSpec:
    return gen_jit_spec(
        "comm",
        [
            jit_env.FLASHINFER_CSRC_DIR / "trtllm_alltoall.cu",
            jit_env.FLASHINFER_CSRC_DIR / "trtllm_alltoall_prepare.cu",
        ],
        compile_seconds=60.0,
    )


def gen_trtllm_mnnvl_comm_module() -> JitSpec:
    return gen_jit_spec(
        "trtllm_mnnvl_comm",
        [jit_env.FLASHINFER_CSRC_DIR / "trtllm_mnnvl_allreduce.cu"],
        compile_seconds=60.0,
    )


# The trtllm comm module: one-shot / two-shot / lamport all-reduce and the all-reduce +
# residual + RMSNorm (+ quant) fusion kernels sglang uses for --enable-flashinfer-allreduce-fusion.
# Upstream builds it only for the majors below; the kernels themselves carry further
# arch gates (include/flashinfer/comm/trtllm_allreduce.cuh).
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#
#


def gen_trtllm_comm_module() -> JitSpec:
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[9, 10]
    )
    return gen_jit_spec(
        "trtllm_comm",
        [
            jit_env.FLASHINFER_CSRC_DIR / "trtllm_allreduce.cu",
            jit_env.FLASHINFER_CSRC_DIR / "trtllm_allreduce_fusion.cu",
            jit_env.FLASHINFER_CSRC_DIR / "trtllm_moe_allreduce_fusion.cu",
        ],
        extra_cuda_cflags=nvcc_flags,
        compile_seconds=150.0,
    )


def gen_vllm_comm_module() -> JitSpec:
    return gen_jit_spec(
        "vllm_comm",
        [jit_env.FLASHINFER_CSRC_DIR / "vllm_custom_all_reduce.cu"],
        compile_seconds=60.0,
    )
