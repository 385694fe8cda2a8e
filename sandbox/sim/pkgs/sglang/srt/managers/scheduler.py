"""Scheduler process of one TP rank (SIMULATED sglang 0.5.9).

Runs as a child of the launcher, named like sglang's (`sglang::scheduler_TP0`), listed by the
stand-in nvidia-smi through its live-state file. It initialises its model runner, reports ready (or
logs `Scheduler hit an exception: <traceback>` and exits 1) and then holds its GPU memory until it
is stopped. SIGTERM removes its live-state file; SIGKILL leaves it (and, as far as the simulated
GPU is concerned, its memory) behind until the process is really gone.
"""

from __future__ import annotations

import logging
import os
import signal
import time

from sglang_sim_core import behaviour
from sglang_sim_core.rank import RankContext

from sglang.srt.distributed import set_parallel_state
from sglang.srt.model_executor.model_runner import ModelRunner
from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler
from sglang.srt.utils import configure_logger, get_exception_traceback

logger = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, server_args: ServerArgs, gpu_id: int, tp_rank: int, pp_rank: int, dp_rank: int,
                 rank: RankContext) -> None:
        set_global_server_args_for_scheduler(server_args)
        set_parallel_state(tp_rank, server_args.tp_size, pp_rank, server_args.pp_size)
        self.server_args = server_args
        self.tp_rank = tp_rank
        self.rank = rank
        self.model_runner = ModelRunner(
            server_args, gpu_id, tp_rank, server_args.tp_size, pp_rank, server_args.pp_size, rank
        )
        mr = self.model_runner
        logger.info(
            f"max_total_num_tokens={mr.max_total_num_tokens}, chunked_prefill_size={server_args.chunked_prefill_size}, "
            f"max_prefill_tokens={server_args.max_prefill_tokens}, max_running_requests={mr.max_running_requests}, "
            f"context_len={server_args._model.context_len}, available_gpu_mem={rank.free_gib():.2f} GB"
        )

    def ready_info(self) -> dict:
        mr = self.model_runner
        facts = self.rank.facts
        profile = behaviour.serve_profile(facts, self.rank.gpu.power_limit_w, self.server_args._model.speed)
        return {
            "status": "ready",
            "tp_rank": self.tp_rank,
            "gpu_index": self.rank.gpu.index,
            "idle_power_w": self.rank.gpu.idle_power_w,
            "power_limit_w": self.rank.gpu.power_limit_w,
            "max_total_num_tokens": mr.max_total_num_tokens,
            "max_running_requests": mr.max_running_requests,
            "context_len": self.server_args._model.context_len,
            "cuda_graph": not self.server_args.disable_cuda_graph,
            "profile": profile,
            "facts": {k: v for k, v in facts.items() if isinstance(v, (bool, int, float, str, list, type(None)))},
        }


def run_scheduler_process(server_args: ServerArgs, gpu_id: int, tp_rank: int, pp_rank: int, dp_rank: int,
                          rank: RankContext, pipe_writer) -> None:
    prefix = ""
    if server_args.dp_size > 1:
        prefix += f" DP{dp_rank}"
    if server_args.pp_size > 1:
        prefix += f" PP{pp_rank}"
    prefix += f" TP{tp_rank}"
    rank.pid = os.getpid()
    rank.set_process_name()
    configure_logger(server_args, prefix=prefix)

    def _stop(signum, frame):
        rank.unpublish()
        os._exit(0)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)

    try:
        scheduler = Scheduler(server_args, gpu_id, tp_rank, pp_rank, dp_rank, rank)
        pipe_writer.send(scheduler.ready_info())
    except Exception:
        traceback = get_exception_traceback()
        logger.error(f"Scheduler hit an exception: {traceback}")
        rank.unpublish()
        os._exit(1)
    # serve: the launcher paces the tokens; this process holds its GPU memory until stopped
    while True:
        time.sleep(3600)
