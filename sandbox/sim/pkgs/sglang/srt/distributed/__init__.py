"""Parallel state of this process (SIMULATED sglang 0.5.9)."""

from __future__ import annotations

_state = {"tp_rank": 0, "tp_size": 1, "pp_rank": 0, "pp_size": 1}


def set_parallel_state(tp_rank: int, tp_size: int, pp_rank: int, pp_size: int) -> None:
    _state.update(tp_rank=tp_rank, tp_size=tp_size, pp_rank=pp_rank, pp_size=pp_size)


def get_tensor_model_parallel_rank() -> int:
    return _state["tp_rank"]


def get_tensor_model_parallel_world_size() -> int:
    return _state["tp_size"]
