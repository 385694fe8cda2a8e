"""The attention modules sglang's flashinfer backend builds at start (SIMULATED flashinfer 0.6.3).

Names as upstream's get_batch_prefill_uri / get_batch_decode_uri (0.6.3 jit/attention/modules.py l.371-395,
l.65); built for the device's archs from data/csrc/batch_attention.cu, into the JIT cache like every module.
How long a build takes is the host's (its profile's `jit_attention_seconds`, modelled; absent: 0). A cached
module whose sources and flags match is loaded without a build, as ninja leaves an up-to-date target alone.
"""

from __future__ import annotations

from sglang_sim_core import env as sim_env

from flashinfer.compilation_context import CompilationContext

from .. import env as jit_env
from ..core import JitSpec, gen_jit_spec


def _seconds() -> float:
    value = sim_env.profile_switches().get("jit_attention_seconds", 0)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _uri(kind: str, head_dim: int) -> str:
    if kind == "decode":
        return (f"batch_decode_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_"
                f"head_dim_qk_{head_dim}_head_dim_vo_{head_dim}_posenc_0_use_swa_False_use_logits_cap_False")
    return (f"batch_prefill_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_"
            f"head_dim_qk_{head_dim}_head_dim_vo_{head_dim}_posenc_0_use_swa_False_use_logits_cap_False_"
            f"f16qk_False")


def gen_batch_module(kind: str, head_dim: int = 128) -> JitSpec:
    """The prefill or decode module (half the modelled build time each)."""
    return gen_jit_spec(
        _uri(kind, head_dim),
        [jit_env.FLASHINFER_CSRC_DIR / "batch_attention.cu"],
        extra_cuda_cflags=CompilationContext().get_nvcc_flags_list() + [f"-DHEAD_DIM={head_dim}"],
        compile_seconds=_seconds() / 2,
    )
