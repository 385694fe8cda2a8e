"""Model runner of one TP rank (SIMULATED sglang 0.5.9): the start-up phases and their log lines.

init_torch_distributed -> load_model -> init_memory_pool -> kernel_warmup (autotune) ->
init_device_graphs (CUDA graph capture). Each phase logs v0.5.9's lines (FACTS.md §2) and takes a
modelled time (scaled by SGLANG_SIM_TIME_SCALE). Gates are run, not looked up: the fusion decision is
communicator.apply_flashinfer_allreduce_fusion(), the JIT gate and kernel build are flashinfer's.
What no code can compute (hangs, OOMs, crashes inside CUDA) comes from sglang_sim_core.behaviour.
"""

from __future__ import annotations

import logging
import os
import sys
import time

import torch
from sglang_sim_core import env, gpufault, perfmodel, rendezvous
from sglang_sim_core.rank import RankContext

from sglang.srt import sim_release
from sglang.srt.distributed.device_communicators.custom_all_reduce import CustomAllreduce
from sglang.srt.model_executor.cuda_graph_runner import TMA_CAPTURE_ERROR, capture_with_logs

logger = logging.getLogger(__name__)

CTX_GIB = 0.63  # CUDA context + NCCL buffers of one rank


class ModelRunner:
    def __init__(self, server_args, gpu_id: int, tp_rank: int, tp_size: int, pp_rank: int, pp_size: int,
                 rank: RankContext) -> None:
        self.server_args = server_args
        self.gpu_id = gpu_id
        self.tp_rank, self.tp_size = tp_rank, tp_size
        self.pp_rank, self.pp_size = pp_rank, pp_size
        self.rank = rank
        self.facts = rank.facts
        self.model = server_args._model
        self.max_total_num_tokens = 0
        self.max_running_requests = 0
        self.graph_memory_gib = 0.0
        self.initialize()

    def initialize(self) -> None:
        self.init_torch_distributed()
        self.load_model()
        self.init_memory_pool()
        self.profile_crash("attention")  # init_attention_backend follows the memory pool, as in sglang
        self.kernel_warmup()
        self.init_device_graphs()

    def profile_crash(self, phase: str) -> None:
        """A flag value the profile's perf_model says has no kernels for this SM dies here, in the release's words."""
        import flashinfer

        import sglang

        installed = {"sglang": sglang.__version__, "flashinfer-python": flashinfer.__version__}
        found = perfmodel.crash(perfmodel.load(), phase, self.server_args, self.rank.gpu.major, installed)
        if found is not None:
            kind, message = found
            raise {"AssertionError": AssertionError, "ValueError": ValueError}.get(kind, RuntimeError)(message)

    # ------------------------------------------------------------------ phases
    def init_torch_distributed(self) -> None:
        logger.info(sim_release.line("dist_begin", "Init torch distributed begin.", ()))
        start = time.monotonic()
        torch.cuda.set_device(self.gpu_id)
        self.rank.allocate(CTX_GIB)
        if self.server_args.nnodes > 1:
            self.join_nodes()
        env.sleep(3.0 + 0.25 * self.tp_size * self.pp_size)
        for row in self.rank.decide("init"):
            if "hang" in row["then"]:
                self.rank.hang()
        custom_ar = False
        if self.tp_size > 1 and not self.server_args.disable_custom_all_reduce:
            ca = CustomAllreduce([g.index for g in self.rank.group], self.tp_rank,
                                 spans_nodes=self.facts.get("spans_nodes", False))
            custom_ar = not ca.disabled
        self.facts["custom_ar"] = custom_ar
        self.facts["uses_p2p_kernels"] = custom_ar

        local_gpu_memory = self.rank.free_gib()
        min_per_gpu_memory = min(self.rank.free_gib(g) for g in self.rank.group)
        self.facts["memory_balanced"] = min_per_gpu_memory >= local_gpu_memory * 0.9
        if self.tp_size > 1 and min_per_gpu_memory < local_gpu_memory * 0.9:
            # v0.5.9 model_runner.py 839-847 and environ.py: SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK (default
            # true); the old SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK is copied into it as it is (upstream's own
            # quirk: setting the old one to 1 keeps the check on)
            msg = ("The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
                   f"{min_per_gpu_memory=}, {local_gpu_memory=}, {local_gpu_memory * 0.9=}")
            flag = os.environ.get("SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK",
                                  os.environ.get("SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK", "true"))
            if flag.strip().lower() in ("1", "true", "yes", "y", "on"):
                raise RuntimeError(msg)
            logger.warning(msg)
        elapsed = f"{time.monotonic() - start:.2f}"
        logger.info(sim_release.line("dist_end", "Init torch distributed ends. elapsed={} s, mem usage={} GB",
                                     (elapsed,), (elapsed, f"{CTX_GIB:.2f}")))

    def join_nodes(self) -> None:
        """init_process_group over tcp://--dist-init-addr: global rank 0 hosts the store, the rest join."""
        sa = self.server_args
        host, port = rendezvous.parse_addr(sa.dist_init_addr)
        timeout = float(sa.dist_timeout) if sa.dist_timeout else rendezvous.DEFAULT_TIMEOUT
        world = self.tp_size * self.pp_size
        global_rank = self.pp_rank * self.tp_size + self.tp_rank
        if global_rank == 0:
            link = rendezvous.serve(port, world, timeout)
        else:
            link = rendezvous.join(host, port, global_rank, timeout)
        self._link = link  # kept open: a peer that dies closes it, as NCCL notices a remote rank exiting
        link.watch(self._peer_lost)

    def _peer_lost(self, peer: str) -> None:
        logger.error(f"Scheduler hit an exception: {rendezvous.remote_error(peer)}")
        self.rank.unpublish()
        os._exit(1)

    def load_model(self) -> None:
        self.pre_load_avail = avail = self.rank.free_gib()
        logger.info(f"Load weight begin. avail mem={avail:.2f} GB")
        start = time.monotonic()
        weights = self.model.weights_gb / (self.tp_size * self.pp_size)
        self.facts["weights_fit"] = avail >= weights
        shards = max(1, round(self.model.weights_gb / 5.0))
        show = self.tp_rank == 0 and self.pp_rank == 0
        if show:
            _progress(0, shards, 0.0)
        duration = 20.0 + weights / 1.2
        for row in self.rank.decide("load"):
            if row["then"].get("fail") == "oom_weights":
                # loads shard after shard until the next one does not fit
                env.sleep(duration * max(avail - 1.2, 0.0) / weights)
                self.rank.allocate(max(avail - 1.2, 0.0))
                raise torch.OutOfMemoryError(self.rank.oom_message(1.75))
        env.sleep(duration / 2)
        if (xid := gpufault.planned()) is not None and show:  # the GPU dies half-way through the weights
            raise RuntimeError(gpufault.strike(*xid))
        if show:
            _progress(shards // 2, shards, (time.monotonic() - start))
        env.sleep(duration / 2)
        if show:
            _progress(shards, shards, (time.monotonic() - start))
        self.rank.allocate(weights)
        logger.info(
            f"Load weight end. elapsed={time.monotonic() - start:.2f} s, type={self.model.architecture}, "
            f"dtype={self.model.dtype}, avail mem={self.rank.free_gib():.2f} GB, mem usage={weights:.2f} GB."
        )

    def init_memory_pool(self) -> None:
        sa = self.server_args
        mfs = sa.mem_fraction_static
        rest_memory = self.rank.free_gib() - self.pre_load_avail * (1 - mfs)
        cell = self.model.kv_bytes_per_token / (self.tp_size if self.model.kv_split_by_tp else 1)
        tokens = int(rest_memory * 2**30 // cell) if rest_memory > 0 else 0
        page = sa.page_size or 1
        tokens = tokens // page * page
        if sa.max_total_tokens is not None:
            tokens = min(tokens, sa.max_total_tokens)
        self.facts["kv_tokens"] = tokens
        for row in self.rank.decide("kv"):
            if row["then"].get("fail") == "kv_not_enough":
                raise RuntimeError(
                    "Not enough memory. Please try to increase --mem-fraction-static. "
                    f"Current value: mem_fraction_static={mfs}"
                )
        env.sleep(2.0)
        kv_gib = tokens * cell / 2**30
        self.rank.allocate(kv_gib)
        if self.model.attention in ("mla", "dsa"):
            logger.info(f"KV Cache is allocated. #tokens: {tokens}, KV size: {kv_gib:.2f} GB")
        else:
            logger.info(
                f"KV Cache is allocated. #tokens: {tokens}, K size: {kv_gib / 2:.2f} GB, V size: {kv_gib / 2:.2f} GB"
            )
        logger.info(f"Memory pool end. avail mem={self.rank.free_gib():.2f} GB")
        self.max_total_num_tokens = tokens
        max_num_reqs = min(max(int(tokens / self.model.context_len * 512), 2048), 5120)
        wanted = sa.max_running_requests if sa.max_running_requests is not None else tokens // 2
        self.max_running_requests = max(1, min(wanted, max_num_reqs))
        self.facts["batch_limit"] = (
            sa.max_running_requests if sa.max_running_requests is not None else sa.cuda_graph_max_bs
        )
        graph_bs = 0 if sa.disable_cuda_graph else min(sa.cuda_graph_max_bs, self.max_running_requests)
        reserve_need = 1.0 + 0.006 * graph_bs + 0.4 * max(sa.chunked_prefill_size, 2048) / 1024
        self.facts["reserve_fits"] = self.rank.free_gib() >= reserve_need
        self.graph_memory_gib = 0.3 + 0.004 * graph_bs

    def kernel_warmup(self) -> None:
        sa = self.server_args
        autotune = (
            self.model.is_moe
            and sa.moe_runner_backend == "flashinfer_cutlass"
            and not sa.disable_flashinfer_autotune
        )
        self.facts["autotune"] = autotune
        self.facts["moe_tuned"] = autotune or not self.model.is_moe
        self.profile_crash("moe")  # the MoE runner's JIT module is built at the first MoE warm-up
        if not autotune:
            return
        from flashinfer.autotuner import autotune as flashinfer_autotune
        from flashinfer.autotuner import skip_tactic

        with flashinfer_autotune(True):
            for row in self.rank.decide("autotune"):
                if row["then"].get("warn") == "tma_skip":
                    _tma_tactic_warnings(skip_tactic, self.rank)
            env.sleep(90.0)

    def build_attention_modules(self) -> None:
        """flashinfer's prefill and decode modules: built (silently, as 0.6.3) unless the JIT cache has them."""
        from flashinfer.jit.attention.modules import gen_batch_module

        for kind in ("prefill", "decode"):
            gen_batch_module(kind).build_and_load()

    def init_device_graphs(self) -> None:
        if self.server_args.disable_cuda_graph:
            # no capture: the first forward comes with the warm-up request
            self.first_forward([1, min(8, self.max_running_requests)])
            return
        capture_with_logs(self)

    # ------------------------------------------------------------------ first forward
    def first_forward(self, batch_sizes: list[int]) -> None:
        if self.server_args.attention_backend == "flashinfer":  # the first forward plans: the modules load
            self.build_attention_modules()
        if sim_release.gates_as_released():  # 0.5.2x: the backend is resolved, then add_norm's gate decides
            from sglang.srt.layers.flashinfer_comm_fusion import _resolve_backend
            from sglang.srt.layers.layer_boundary.residual.add_norm import flashinfer_ar_fusion_applies

            backend = self.server_args.flashinfer_allreduce_fusion_backend
            if backend is not None:
                _resolve_backend(backend, self.server_args.nnodes > 1)
            applies = flashinfer_ar_fusion_applies
        else:
            from sglang.srt.layers.communicator import apply_flashinfer_allreduce_fusion as applies
        fusion_applied = self.tp_size > 1 and any(applies(bs) for bs in batch_sizes)
        self.facts["fusion_applied"] = fusion_applied
        self.facts["uses_p2p_kernels"] = self.facts.get("custom_ar", False) or fusion_applied
        if fusion_applied:
            from sglang.srt.layers.flashinfer_comm_fusion import ensure_workspace_initialized

            self.facts["jit_gate"] = "raises"
            self.facts["kernel_build"] = "failed"
            module = ensure_workspace_initialized()
            self.facts["jit_gate"] = "passes"
            self.facts["kernel_build"] = "ok"
            major, minor = torch.cuda.get_device_capability()
            missing = module.missing_kernels(major * 100 + minor * 10)
            self.facts["kernels_complete"] = not missing
            self.facts["kernels_missing"] = missing
        for row in self.rank.decide("capture"):
            then = row["then"]
            if then.get("fail") == "oom_capture":
                raise torch.OutOfMemoryError(self.rank.oom_message(0.5))
            if then.get("fail") == "tma_capture":
                raise RuntimeError(TMA_CAPTURE_ERROR)
            if "hang" in then:
                self.rank.hang()


def _progress(done: int, total: int, elapsed: float) -> None:
    pct = int(100 * done / total)
    rate = f"{done / elapsed:.2f}it/s" if elapsed > 0 and done else "?it/s"
    mins, secs = divmod(int(elapsed), 60)
    print(
        f"Loading safetensors checkpoint shards: {pct:3d}% Completed | {done}/{total} "
        f"[{mins:02d}:{secs:02d}<?, {rate}]",
        file=sys.stderr,
        flush=True,
    )


def _tma_tactic_warnings(skip_tactic, rank: RankContext) -> None:
    base = 0x7C70CCCE8350 + 0x1000 * rank.gpu.index
    runner = f"<flashinfer.fused_moe.core.get_cutlass_fused_moe_module.<locals>.MoERunner object at {hex(base)}>"
    arch = f"{rank.gpu.major}{rank.gpu.minor}"
    import flashinfer  # the installed release names its JIT cache folder

    cache = (f"{os.path.expanduser('~')}/.cache/flashinfer/{flashinfer.__version__}/{arch}a/cached_ops/"
             f"fused_moe_{arch}/fused_moe_{arch}.so")
    for i, tactic in enumerate(range(12, 24)):
        m_tile = 128 if i % 2 else 256
        error = (
            "[TensorRT-LLM][ERROR] Assertion failed: Failed to initialize cutlass TMA WS grouped gemm. Error: Error "
            f"Internal (/workspace/flashinfer/csrc/nv_internal/tensorrt_llm/cutlass_instantiations/{arch}/gemm_grouped/"
            f"{arch}/cutlass_kernel_file_gemm_grouped_sm{arch}_M{m_tile}_BS_group{i % 4}.generated.cu:60)\n"
            "1       0x7c6dd0a58b16 tensorrt_llm::common::throwRuntimeError(char const*, int, std::__cxx11::"
            "basic_string<char, std::char_traits<char>, std::allocator<char> > const&) + 97\n"
            f"2       0x7c6dd11ca0ad {cache}(+0x9080ad) [0x7c6dd11ca0ad]"
        )
        skip_tactic(runner, tactic, error)
