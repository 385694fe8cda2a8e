"""Custom all-reduce (SIMULATED sglang 0.5.9): when it turns itself off, and why.

The checks and warnings are v0.5.9's (FACTS.md §2, lines 109/145-158): unsupported world size,
more than two GPUs without a full NVLink mesh, no P2P. NVLink and P2P come from `nvidia-smi topo`
of the host (the sandbox stand-in), as NVML would report them.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from sglang_sim_core import device

logger = logging.getLogger(__name__)


def _p2p_cache_file() -> Path:
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES") or ",".join(str(g.index) for g in device.visible_gpus())
    return Path.home() / ".cache" / "sglang" / f"gpu_p2p_access_cache_for_{cvd}.json"


def gpu_p2p_access_check(src: int, tgt: int) -> bool:
    """P2P between two GPUs (physical indices), cached as sglang caches its P2P test."""
    path = _p2p_cache_file()
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
        gpus = [g.index for g in device.visible_gpus()]
        for i, a in enumerate(gpus):
            for j, b in enumerate(gpus):
                cache[f"{i}->{j}"] = a == b or device.p2p_ok([a, b])
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(cache, indent=4))
        except OSError:
            pass
    ordinals = {g.index: i for i, g in enumerate(device.visible_gpus())}
    return bool(cache.get(f"{ordinals.get(src)}->{ordinals.get(tgt)}", False))


class CustomAllreduce:
    _SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]

    def __init__(self, physical_device_ids: list[int], rank: int, spans_nodes: bool = False) -> None:
        self.disabled = True
        if spans_nodes:  # v0.5.9 checks in_the_same_node_as(group) first (log as in sglang#4978)
            logger.warning("Custom allreduce is disabled because this process group spans across nodes.")
            return
        world_size = len(physical_device_ids)
        if world_size == 1:
            return
        if world_size not in CustomAllreduce._SUPPORTED_WORLD_SIZES:
            logger.warning(
                "Custom allreduce is disabled due to an unsupported world size: %d. Supported world sizes: %s. "
                "To silence this warning, specify disable_custom_all_reduce=True explicitly.",
                world_size,
                str(CustomAllreduce._SUPPORTED_WORLD_SIZES),
            )
            return
        full_nvlink = device.full_nvlink(physical_device_ids)
        if world_size > 2 and not full_nvlink:
            logger.warning(
                "Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs. "
                "To silence this warning, specify disable_custom_all_reduce=True explicitly."
            )
            return
        me = physical_device_ids[rank]
        if not all(gpu_p2p_access_check(me, other) for other in physical_device_ids if other != me):
            logger.warning(
                "Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test failed. "
                "To silence this warning, specify disable_custom_all_reduce=True explicitly."
            )
            return
        self.disabled = False
        self.full_nvlink = full_nvlink
