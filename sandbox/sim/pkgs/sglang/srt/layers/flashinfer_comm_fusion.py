"""FlashInfer all-reduce fusion workspace (SIMULATED sglang 0.5.9).

Created lazily by the first forward that fuses (CUDA graph capture, else the warm-up request):
loading flashinfer's trtllm_comm module runs its JIT gate and, when the module is not cached, its
build (the C preprocessor over the kernel headers).
"""

from __future__ import annotations

import logging

from sglang.srt.distributed import get_tensor_model_parallel_rank, get_tensor_model_parallel_world_size

logger = logging.getLogger(__name__)

_workspace: dict[str, object] = {}


def ensure_workspace_initialized(max_token_num: int = 2048, hidden_dim: int = 6144, use_fp32_lamport: bool = False):
    if "module" in _workspace:
        return _workspace["module"]
    from flashinfer import comm

    rank = get_tensor_model_parallel_rank()
    world_size = get_tensor_model_parallel_world_size()
    ipc_handles, module = comm.trtllm_create_ipc_workspace_for_all_reduce_fusion(
        rank, world_size, max_token_num, hidden_dim, use_fp32_lamport=use_fp32_lamport
    )
    _workspace["ipc_handles"] = ipc_handles
    _workspace["module"] = module
    logger.info(f"FlashInfer workspace initialized for rank {rank}, world_size {world_size}")
    return module
