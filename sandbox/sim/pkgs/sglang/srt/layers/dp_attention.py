"""DP attention state (SIMULATED sglang 0.5.9)."""

from __future__ import annotations


def is_dp_attention_enabled() -> bool:
    from sglang.srt.server_args import get_global_server_args

    return bool(get_global_server_args().enable_dp_attention)
