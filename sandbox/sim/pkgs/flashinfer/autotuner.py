"""Autotuner (SIMULATED flashinfer 0.6.3): the log lines real autotuning prints."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sglang_sim_core.logs import flashinfer_logger

logger = flashinfer_logger()


@contextlib.contextmanager
def autotune(tune_mode: bool = True) -> Iterator[None]:
    if tune_mode:
        logger.info("[Autotuner]: Autotuning process starts ...")
    try:
        yield
    finally:
        if tune_mode:
            logger.info("[Autotuner]: Autotuning process ends")


def skip_tactic(runner: str, tactic: int, error: str) -> None:
    logger.warning(f"[Autotuner]: Skipping tactic {runner} {tactic}, due to failure while profiling: {error}")
