"""sglang.srt.runtime_context (SIMULATED; in the wheels of sglang releases that have it, 0.5.19 on).

The names the real gated lines of those releases call (`get_platform().is_sm100`, `get_exec().comm...`,
`get_parallel().nnodes`), answered from the simulated device checks and the server's arguments, so that
the real lines sandbox/sim/releases.py copies from the release's wheel run here as they run there.
"""

from __future__ import annotations

from types import SimpleNamespace

from sglang.srt.utils.common import (
    is_blackwell_supported,
    is_sm90_supported,
    is_sm100_supported,
    is_sm120_supported,
)


def get_platform() -> SimpleNamespace:
    return SimpleNamespace(is_sm90=is_sm90_supported(), is_sm100=is_sm100_supported(),
                           is_sm120=is_sm120_supported(), is_blackwell=is_blackwell_supported())


def _args():
    from sglang.srt.server_args import get_global_server_args

    return get_global_server_args()


def get_exec() -> SimpleNamespace:
    args = _args()
    comm = SimpleNamespace(flashinfer_allreduce_fusion_backend=getattr(args, "flashinfer_allreduce_fusion_backend",
                                                                       None))
    return SimpleNamespace(comm=comm)


def get_parallel() -> SimpleNamespace:
    args = _args()
    return SimpleNamespace(nnodes=args.nnodes, tp_size=args.tp_size)
