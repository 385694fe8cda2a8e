"""The names the real gated statements of a release call (SIMULATED; sandbox/sim/releases.py writes those
statements into the release's files under `from sglang.srt.sim_gates import *`), answered from the simulated
device checks and the server's arguments."""

from __future__ import annotations

import logging

from sglang.srt.layers.dp_attention import is_dp_attention_enabled
from sglang.srt.runtime_context import get_exec, get_parallel, get_platform
from sglang.srt.utils.common import is_cuda, is_flashinfer_available

__all__ = [
    "_is_cuda",
    "_is_flashinfer_available",
    "_is_sm90_supported",
    "_is_sm100_supported",
    "_mnnvl_supported",
    "attn_dp_enabled_of",
    "get_exec",
    "get_parallel",
    "get_platform",
    "is_dp_attention_enabled",
    "is_flashinfer_allreduce_unavailable",
    "logger",
    "uses_cutedsl_ar_fusion",
]

logger = logging.getLogger("sglang.srt.sim_gates")
_is_cuda = is_cuda()
_is_flashinfer_available = is_flashinfer_available()
_is_sm90_supported = _is_cuda and get_platform().is_sm90
_is_sm100_supported = _is_cuda and get_platform().is_sm100


def attn_dp_enabled_of(view) -> bool:
    return bool(getattr(view, "enable_dp_attention", False))


def uses_cutedsl_ar_fusion() -> bool:
    return get_exec().comm.flashinfer_allreduce_fusion_backend == "cutedsl"


def is_flashinfer_allreduce_unavailable() -> bool:
    return False


def _mnnvl_supported(is_multi_node: bool) -> bool:
    return bool(get_platform().is_sm100)
