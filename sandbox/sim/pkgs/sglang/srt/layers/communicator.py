# SIMULATED sglang 0.5.9 (fleet sandbox): python/sglang/srt/layers/communicator.py
#
# Where sglang decides, per forward batch, whether the all-reduce after attention / MoE is fused
# with residual add + RMSNorm by FlashInfer (--enable-flashinfer-allreduce-fusion). As in v0.5.9
# (FACTS.md §1) the decision is gated on SM90 / SM100 (lines 72-73) and applies even when the flag
# is passed explicitly: on any other SM, fusion stays off without a log line. The simulated model
# runner imports apply_flashinfer_allreduce_fusion from this file and calls it, so an edit here is
# what runs. The rest of upstream's layer communicator is left out; the line numbers of the gate
# are kept (lines holding only # are padding).

import logging

from sglang.srt.layers.dp_attention import is_dp_attention_enabled
from sglang.srt.server_args import get_global_server_args
from sglang.srt.utils import (
    is_cuda,
    is_flashinfer_available,
    is_sm90_supported,
    is_sm100_supported,
)

logger = logging.getLogger(__name__)

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
_is_cuda = is_cuda()
_is_flashinfer_available = is_flashinfer_available()
_is_sm90_supported = _is_cuda and is_sm90_supported()
_is_sm100_supported = _is_cuda and is_sm100_supported()
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


# TODO: According to the discussion in https://github.com/flashinfer-ai/flashinfer/issues/1223
# We set the max token num to 128 for allreduce fusion with min-latency case(use_oneshot=True).
FUSE_ALLREDUCE_MAX_BATCH_SIZE = 2048


def apply_flashinfer_allreduce_fusion(batch_size: int):
    return (
        # NOTE: flashinfer 0.6.1 caused performance regression on sm100 for allreduce fusion
        # Ref: https://github.com/sgl-project/sglang/issues/17237
        (_is_sm90_supported or _is_sm100_supported)
        and _is_flashinfer_available
        and batch_size > 0
        and batch_size <= FUSE_ALLREDUCE_MAX_BATCH_SIZE
        and not is_dp_attention_enabled()
        and get_global_server_args().enable_flashinfer_allreduce_fusion
    )
