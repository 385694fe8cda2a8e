"""CUDA graph capture (SIMULATED sglang 0.5.9).

Capturing runs one forward per batch size. The first forward that fuses all-reduce sets up the
FlashInfer workspace (JIT gate, build); failures inside capture are re-raised as
"Capture cuda graph failed: ..." followed by sglang's list of possible solutions.
"""

from __future__ import annotations

import logging
import time

from sglang_sim_core import env

from sglang.srt import sim_release

logger = logging.getLogger(__name__)

CUDA_GRAPH_CAPTURE_FAILED_MSG = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
    "3. disable torch compile by not using --enable-torch-compile\n"
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)

TMA_CAPTURE_ERROR = (
    "[TensorRT-LLM][ERROR] Assertion failed: Failed to initialize cutlass TMA WS grouped gemm. Error: Error "
    "Internal (/workspace/flashinfer/csrc/nv_internal/tensorrt_llm/cutlass_instantiations/120/gemm_grouped/120/"
    "cutlass_kernel_file_gemm_grouped_sm120_M256_BS_group0.generated.cu:60)\n"
    "1       0x7c6dd0a58b16 tensorrt_llm::common::throwRuntimeError(char const*, int, std::__cxx11::"
    "basic_string<char, std::char_traits<char>, std::allocator<char> > const&) + 97\n"
    "2       0x7c6dd11ca0ad tensorrt_llm::kernels::cutlass_kernels::MoeGemmRunner::runGemm(...) + 1453"
)


def get_batch_sizes_to_capture(max_bs: int) -> list[int]:
    sizes = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 513, 16)) + list(range(544, 4097, 32))
    return [bs for bs in sizes if bs <= max_bs] or [1]


class CudaGraphRunner:
    def __init__(self, model_runner) -> None:
        self.model_runner = model_runner
        server_args = model_runner.server_args
        self.max_bs = min(server_args.cuda_graph_max_bs, model_runner.max_running_requests)
        self.capture_bs = get_batch_sizes_to_capture(self.max_bs)
        try:
            self.capture()
        except RuntimeError as e:
            raise Exception(f"Capture cuda graph failed: {e}\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}")  # noqa: B904

    def capture(self) -> None:
        runner = self.model_runner
        runner.first_forward(self.capture_bs)
        env.sleep(0.6 * len(self.capture_bs))


def capture_with_logs(model_runner) -> CudaGraphRunner:
    avail = f"{model_runner.rank.free_gib():.2f}"
    max_bs = min(model_runner.server_args.cuda_graph_max_bs, model_runner.max_running_requests)
    sizes = get_batch_sizes_to_capture(max_bs)
    # 0.5.9: "Capture {cuda graph} begin ..."; 0.5.14+: "Capture {decode} CUDA graph begin. backend=..."
    begin = "Capture {} begin. This can take up to several minutes. avail mem={} GB"
    logger.info(sim_release.line("graph_begin", begin, ("cuda graph", avail), ("decode", "full", max(sizes), avail)))
    start = time.monotonic()
    if (text := sim_release.line("graph_bs", "Capture cuda graph bs {}", (sizes,))) is not None:
        logger.info(text)
    runner = CudaGraphRunner(model_runner)
    graph_gib = model_runner.graph_memory_gib
    model_runner.rank.allocate(graph_gib)
    elapsed, mem, left = f"{time.monotonic() - start:.2f}", f"{graph_gib:.2f}", f"{model_runner.rank.free_gib():.2f}"
    logger.info(sim_release.line("graph_end", "Capture {} end. Time elapsed: {} s. mem usage={} GB. avail mem={} GB.",
                                 ("cuda graph" if sim_release.flags() is None else "decode", elapsed, mem, left)))
    return runner
