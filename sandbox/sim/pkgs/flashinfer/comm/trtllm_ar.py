"""TRT-LLM all-reduce (+ fusion) workspace and module loading (SIMULATED flashinfer 0.6.3)."""

from __future__ import annotations

import functools
import hashlib

import torch

from ..jit.comm import gen_trtllm_comm_module
from ..jit.core import SimModule

_NO_KERNEL_IMAGE = (
    "CUDA error: no kernel image is available for execution on the device\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
    "below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)


@functools.cache
def get_trtllm_comm_module() -> SimModule:
    return gen_trtllm_comm_module().build_and_load()


def _fake_ptr(*parts: object) -> int:
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return 0x7F0000000000 | (int.from_bytes(digest[:4], "big") << 8)


def trtllm_create_ipc_workspace_for_all_reduce_fusion(
    tp_rank: int,
    tp_size: int,
    max_token_num: int,
    hidden_dim: int,
    use_fp32_lamport: bool = False,
    group: object = None,
) -> tuple[list[list[int]], SimModule]:
    module = get_trtllm_comm_module()
    major, minor = torch.cuda.get_device_capability()
    arch = major * 100 + minor * 10
    if not module.has_kernel_image(arch):
        raise RuntimeError(_NO_KERNEL_IMAGE)
    ipc_handles = [[_fake_ptr(tp_rank, buf, peer) for peer in range(tp_size)] for buf in range(3)]
    print(f"rank {tp_rank} allocated ipc_handles: {[[hex(h) for h in row] for row in ipc_handles]}", flush=True)
    lamport_comm_size = max_token_num * hidden_dim * (4 if use_fp32_lamport else 2) * tp_size
    print(f"set flag_ptr[3] = lamport_comm_size: {lamport_comm_size}", flush=True)
    for i, row in enumerate(ipc_handles):
        print(f"Rank {tp_rank} workspace[{i}] {hex(row[tp_rank])}", flush=True)
    return ipc_handles, module


def trtllm_destroy_ipc_workspace_for_all_reduce_fusion(ipc_handles: object, group: object = None) -> None:
    return None
