"""Patches, benchmark runs and the behaviour table, for tests/sim."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from simhost import REPO, SimHost, SimServer

COMMUNICATOR = "sglang/srt/layers/communicator.py"
SERVER_ARGS = "sglang/srt/server_args.py"
JIT_COMM = "flashinfer/jit/comm.py"
ALLREDUCE_CUH = "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"
UPPER_GATE = "(__CUDA_ARCH__ < 1200)"

SEED_MODEL = "zai-org/GLM-5-NVFP4"  # the seed's model (catalogue of the simulated hosts)
DENSE_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
AUTO_FUSION_MODEL = "Qwen/Qwen3-30B-A3B"


def load_behaviour():
    path = REPO / "sandbox/sim/pkgs/sglang_sim_core/behaviour.py"
    spec = importlib.util.spec_from_file_location("sim_behaviour", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------- patches
def patch_sglang_gates(host: SimHost) -> None:
    """The seed's sglang edit: let SM 12.x through the SM90/SM100 gates on allreduce fusion."""
    host.patch(COMMUNICATOR, "    is_sm100_supported,\n)", "    is_sm100_supported,\n    is_sm120_supported,\n)", 1)
    host.patch(
        COMMUNICATOR,
        "_is_sm100_supported = _is_cuda and is_sm100_supported()",
        "_is_sm100_supported = _is_cuda and is_sm100_supported()\n"
        "_is_sm120_supported = _is_cuda and is_sm120_supported()",
        1,
    )
    host.patch(COMMUNICATOR, "(_is_sm90_supported or _is_sm100_supported)",
               "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)", 1)
    host.patch(SERVER_ARGS, "and (is_sm90_supported() or is_sm100_supported())",
               "and (is_sm90_supported() or is_sm100_supported() or is_sm120_supported())", 1)


def patch_jit_gate(host: SimHost) -> None:
    host.patch(JIT_COMM, "supported_major_versions=[9, 10]", "supported_major_versions=[9, 10, 12]", 1)


def patch_kernel_gates(host: SimHost) -> None:
    host.patch(ALLREDUCE_CUH, "(__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))", "(__CUDA_ARCH__ >= 900))", 13)


def patch_all(host: SimHost) -> None:
    patch_sglang_gates(host)
    patch_jit_gate(host)
    patch_kernel_gates(host)


# ---------------------------------------------------------------------------------- bench
RESULT_LINE = re.compile(r"^(?P<label>[A-Za-z][^:]*\S):\s+(?P<value>\S.*?)\s*$")


def parse_result_block(stdout: str) -> dict[str, str]:
    """Tolerant parser of bench_serving's result block: label -> value text."""
    start = stdout.index(" Serving Benchmark Result ")
    block = stdout[start:].splitlines()[1:]
    out = {}
    for line in block:
        if line.startswith("=" * 10):
            break
        m = RESULT_LINE.match(line)
        if m:
            out[m.group("label")] = m.group("value")
    return out


def bench(server: SimServer, *, prompts: int, concurrency: int, out_len: int, in_len: int = 32,
          warmup: int = 0, env: dict | None = None, extra: tuple[str, ...] = ()) -> tuple[dict[str, str], dict, str]:
    """Run `python -m sglang.bench_serving` against the server; returns (block, json record, stdout)."""
    out_file = server.host.root / f"bench-{server.port}-{prompts}-{concurrency}.jsonl"
    proc = server.host.run(
        "sglang.bench_serving",
        "--backend", "sglang", "--host", "127.0.0.1", "--port", str(server.port),
        "--dataset-name", "random-ids", "--random-input-len", str(in_len), "--random-output-len", str(out_len),
        "--random-range-ratio", "1.0", "--num-prompts", str(prompts), "--max-concurrency", str(concurrency),
        "--output-file", str(out_file), "--disable-tqdm", "--warmup-requests", str(warmup), *extra,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(Path(out_file).read_text().splitlines()[-1])
    return parse_result_block(proc.stdout), record, proc.stdout


def load_rows(host: SimHost) -> dict[int, tuple[float, float]]:
    """gpu -> (power W, utilization %) from the live-state load file, when it names a live pid."""
    try:
        lines = (host.run_dir / "load").read_text().splitlines()
    except OSError:
        return {}
    rows = {}
    for line in lines[1:]:
        gpu, power, util = line.split()
        rows[int(gpu)] = (float(power), float(util))
    return rows
