"""Communication ops (SIMULATED flashinfer 0.6.3)."""

from .trtllm_ar import (
    get_trtllm_comm_module,
    trtllm_create_ipc_workspace_for_all_reduce_fusion,
    trtllm_destroy_ipc_workspace_for_all_reduce_fusion,
)

__all__ = [
    "get_trtllm_comm_module",
    "trtllm_create_ipc_workspace_for_all_reduce_fusion",
    "trtllm_destroy_ipc_workspace_for_all_reduce_fusion",
]
