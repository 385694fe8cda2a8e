"""One test per row of the behaviour table (sandbox/sim/pkgs/sglang_sim_core/behaviour.py).

Each test starts the simulated server the way a unit would (`python -m sglang.launch_server ...`),
with the patches the row names applied to the installed files, and checks what the row says happens:
log lines, exit status, answers, and throughput / power measured by bench_serving.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import pytest
from sim_helpers import (
    AUTO_FUSION_MODEL,
    DENSE_MODEL,
    SEED_MODEL,
    bench,
    load_behaviour,
    load_rows,
    patch_all,
    patch_jit_gate,
    patch_sglang_gates,
)
from simhost import REPO

behaviour = load_behaviour()
COVERED: set[str] = {"kernel-build-broken"}  # needs a hand-written patch: test_patches.py


def covers(*row_ids: str):
    """Mark a test as the check of table rows (collected at import, so selection does not matter)."""
    for row_id in row_ids:
        behaviour.row(row_id)  # the row must exist
        COVERED.add(row_id)
    return lambda f: f


SEED_ARGS = ("--model-path", SEED_MODEL, "--tp", "8")
TUNED = ("--moe-runner-backend", "flashinfer_cutlass", "--max-running-requests", "1024")
FAST_TOKENS = {"SGLANG_SIM_TOKEN_TIME_SCALE": "0.25"}
# a JIT build of trtllm_comm, as `ninja -v` shows it under FLASHINFER_JIT_VERBOSE=1 (its link step)
JIT_BUILT = "c++ -shared -o trtllm_comm.so"
DENSE_SPEED = 4.0  # the dense 8B model runs 4x the seed model's speed (models.CATALOGUE)


def slow_tokens(modelled_rate: float, saturation: int) -> tuple[float, dict]:
    """A token time scale that slows a fast rung to ~10 tok/s per stream on the wall clock: light on a busy
    2-core test machine, and long enough steps that scheduling hiccups barely move the median TPOT."""
    scale = max(1.0, round(modelled_rate / saturation / 10.0, 1))
    return scale, {"SGLANG_SIM_TOKEN_TIME_SCALE": str(scale)}


def assert_near(measured: float, expected: float, tol: float = 0.15) -> None:
    assert abs(measured - expected) <= tol * expected, f"measured {measured:.1f}, expected ~{expected:.1f}"


def output_rate(record: dict, token_scale: float = 1.0) -> float:
    """Output tok/s measured by bench_serving, in modelled (unscaled) units."""
    return record["output_throughput"] * token_scale


def decode_rate(record: dict, concurrency: int, token_scale: float = 1.0) -> float:
    """Aggregate decode tok/s implied by the measured median TPOT with `concurrency` streams (no prefill,
    ramp-up or scheduling hiccups of a busy test machine in it, so short runs measure rungs accurately)."""
    return concurrency * 1000.0 / record["median_tpot_ms"] * token_scale


# ---------------------------------------------------------------------------------- init
@covers("tp-pp-exceed-gpus")
def test_tp_times_pp_beyond_the_gpus_fails_with_cudas_error(make_host):
    host = make_host("rtx5090-x2-workstation")
    server = host.start("--model-path", DENSE_MODEL, "--tp", "2", "--pp-size", "2")
    assert server.wait_exit() == 1
    log = server.log()
    assert "RuntimeError: CUDA error: invalid device ordinal" in log
    assert re.search(r"Rank \d scheduler is dead\. Please check if there are relevant logs\.", log)
    assert "Exit code: 1" in log


@covers("memory-unbalanced")
def test_a_gpu_taken_by_another_process_makes_memory_unbalanced(make_host):
    host = make_host("rtx5090-x2-workstation")
    first = host.start("--model-path", DENSE_MODEL, env={"CUDA_VISIBLE_DEVICES": "0"})
    first.wait_ready()
    # slower phases, so that rank 0 is still loading when rank 1's check fails (as on real hosts)
    second = host.start("--model-path", DENSE_MODEL, "--tp", "2", env={"SGLANG_SIM_TIME_SCALE": "0.02"})
    assert second.wait_exit() == 1
    assert "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes." in (
        second.log()
    )
    assert first.health() == 200


@covers("p2p-refused-custom-allreduce-off")
def test_p2p_refused_turns_custom_allreduce_off_and_serves_on_nccl(make_host):
    host = make_host("rtx5090-x2-workstation")  # topo -p2p r: GNS
    server = host.start("--model-path", DENSE_MODEL, "--tp", "2")
    server.wait_ready()
    log = server.log()
    assert log.count("Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test "
                     "failed. To silence this warning, specify disable_custom_all_reduce=True explicitly.") == 2
    assert server.generate("2+2=")["text"] == "4"
    cache = host.home / ".cache/sglang/gpu_p2p_access_cache_for_0,1.json"
    assert cache.exists()


@covers("p2p-refused-custom-allreduce-off")
def test_eight_pcie_gpus_disable_custom_allreduce_before_the_p2p_test(make_host):
    host = make_host()  # 8x RTX PRO 6000, CNS
    server = host.start(*SEED_ARGS, "--disable-cuda-graph")
    server.wait_ready()
    assert server.log().count("Custom allreduce is disabled because it's not supported on more than two PCIe-only "
                              "GPUs.") == 8
    assert server.stop() == 0
    quiet = host.start(*SEED_ARGS, "--disable-cuda-graph", "--disable-custom-all-reduce")
    quiet.wait_ready()
    assert "Custom allreduce is disabled" not in quiet.log()


def _observe_no_progress(server, marker: str, window: float = 0.6) -> None:
    """The server printed `marker` on every rank and then nothing more happens for `window` s."""
    deadline = time.monotonic() + window
    size = len(server.log())
    while time.monotonic() < deadline:
        assert server.proc.poll() is None, server.log()
        assert server.health() is None
        time.sleep(0.1)
    assert len(server.log()) == size, server.log()[size:]
    assert server.log().rstrip().splitlines()[-1].endswith(marker)


@covers("p2p-broken-hang-nccl")
def test_broken_p2p_hangs_at_the_first_nccl_allreduce_without_output(make_host):
    host = make_host("h100-sxm-x8", p2p_broken=True)
    server = host.start("--model-path", DENSE_MODEL, "--tp", "8")
    for _ in range(8):
        server.wait_log("Init torch distributed begin.")
    deadline = time.monotonic() + 10
    while server.log().count("Init torch distributed begin.") < 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    _observe_no_progress(server, "Init torch distributed begin.")
    assert "Init torch distributed ends" not in server.log()
    assert server.stop() == 0
    assert host.apps() == {}


@covers("p2p-broken-hang-custom-allreduce")
def test_broken_p2p_hangs_in_custom_allreduce_when_only_nccl_p2p_is_disabled(make_host):
    host = make_host("h100-sxm-x8", p2p_broken=True)
    server = host.start("--model-path", DENSE_MODEL, "--tp", "8", env={"NCCL_P2P_DISABLE": "1"})
    server.wait_log("Capture cuda graph bs")
    deadline = time.monotonic() + 10
    while server.log().count("Capture cuda graph bs") < 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    _observe_no_progress(server, "]")
    assert "Capture cuda graph end" not in server.log()
    server.stop()
    # the fix that works on such hosts: no P2P anywhere
    fixed = host.start("--model-path", DENSE_MODEL, "--tp", "8", "--disable-custom-all-reduce",
                       env={"NCCL_P2P_DISABLE": "1"})
    fixed.wait_ready()
    assert fixed.generate("2+2=")["text"] == "4"


# ---------------------------------------------------------------------------------- memory
@covers("mem-fraction-too-low")
def test_mem_fraction_too_low_leaves_no_kv_cache(make_host):
    host = make_host()
    server = host.start(*SEED_ARGS, "--mem-fraction-static", "0.3")
    assert server.wait_exit() == 1
    log = server.log()
    assert "Scheduler hit an exception: Traceback (most recent call last):" in log
    assert ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: mem_fraction_static=0.3") in log


@covers("mem-fraction-too-high")
def test_mem_fraction_too_high_runs_out_of_memory_in_graph_capture(make_host):
    host = make_host()
    server = host.start(*SEED_ARGS, "--mem-fraction-static", "0.97")
    assert server.wait_exit() == 1
    log = server.log()
    assert "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 512.00 MiB." in log
    assert "torch.OutOfMemoryError: CUDA out of memory." in log
    assert "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)" in log


# ---------------------------------------------------------------------------------- fusion on SM 12.x
@covers("fusion-asked-sglang-gates-unpatched")
def test_fusion_asked_with_sglang_gates_unpatched_stays_off_silently(make_host):
    host = make_host()
    server = host.start(*SEED_ARGS, "--enable-flashinfer-allreduce-fusion", "--disable-cuda-graph")
    server.wait_ready()
    log = server.log()
    assert "FlashInfer workspace initialized" not in log
    assert JIT_BUILT not in log
    assert not (host.home / ".cache/flashinfer").exists()
    assert server.generate("2+2=")["text"] == "4"


@covers("jit-gate-unpatched")
def test_sglang_gates_patched_but_jit_gate_not_fails_in_graph_capture(make_host):
    host = make_host()
    patch_sglang_gates(host)
    server = host.start(*SEED_ARGS, "--enable-flashinfer-allreduce-fusion")
    assert server.wait_exit() == 1
    log = server.log()
    assert "RuntimeError: No supported CUDA architectures found for major versions [9, 10]." in log
    assert "Exception: Capture cuda graph failed: No supported CUDA architectures found for major versions " \
           "[9, 10]." in log
    assert 'flashinfer/jit/comm.py", line 60, in gen_trtllm_comm_module' in log


@covers("jit-gate-unpatched")
def test_without_cuda_graphs_the_traceback_ends_in_the_jit_gates_runtime_error(make_host):
    host = make_host()
    patch_sglang_gates(host)
    server = host.start(*SEED_ARGS, "--enable-flashinfer-allreduce-fusion", "--disable-cuda-graph")
    assert server.wait_exit() == 1
    tracebacks = server.log().split("Scheduler hit an exception: ")[1:]
    assert tracebacks
    first = tracebacks[0].split("\n[")[0].rstrip().splitlines()
    assert first[-1] == "RuntimeError: No supported CUDA architectures found for major versions [9, 10]."


@covers("fusion-kernels-compiled-out")
def test_jit_gate_patched_but_kernel_gates_not_serves_garbage(make_host):
    host = make_host()
    patch_sglang_gates(host)
    patch_jit_gate(host)
    server = host.start(*SEED_ARGS, "--enable-flashinfer-allreduce-fusion", env=FAST_TOKENS)
    server.wait_ready()
    log = server.log()
    assert JIT_BUILT in log
    assert log.count("FlashInfer workspace initialized for rank") == 8
    answer = server.generate("2+2=")["text"]
    assert answer and not answer.startswith("4")
    assert "error" not in answer.lower()
    so = host.home / ".cache/flashinfer/0.6.3/120a/cached_ops/trtllm_comm/trtllm_comm.so"
    assert so.exists()


@covers("fusion-sm12x-slow", "sm12x-tma-tactics-skipped")
def test_all_patched_fusion_serves_slowly_with_tma_autotuner_warnings(make_host):
    host = make_host()
    patch_all(host)
    server = host.start(*SEED_ARGS, "--enable-flashinfer-allreduce-fusion", "--moe-runner-backend",
                        "flashinfer_cutlass", "--max-running-requests", "512", env=FAST_TOKENS)
    server.wait_ready()
    log = server.log()
    assert "[Autotuner]: Autotuning process starts ..." in log
    assert re.search(r"WARNING - autotuner\.py:\d+ - flashinfer\.jit: \[Autotuner\]: Skipping tactic <flashinfer\."
                     r"fused_moe\.core\.get_cutlass_fused_moe_module\.<locals>\.MoERunner object at 0x[0-9a-f]+> \d+, "
                     r"due to failure while profiling: \[TensorRT-LLM\]\[ERROR\] Assertion failed: Failed to "
                     r"initialize cutlass TMA WS grouped gemm\. Error: Error Internal", log)
    assert server.generate("2+2=")["text"] == "4"
    block, record, _ = bench(server, prompts=8, concurrency=8, out_len=64)
    assert_near(output_rate(record, 0.25), 78.6, tol=0.2)
    assert_near(decode_rate(record, 8, 0.25), 78.6, tol=0.08)
    assert int(block["Successful requests"]) == 8


@covers("fusion-sm12x-batch-over-512")
def test_fusion_on_sm12x_with_more_than_512_running_requests_crashes_in_capture(make_host):
    host = make_host()
    patch_all(host)
    server = host.start(*SEED_ARGS, "--enable-flashinfer-allreduce-fusion", *TUNED)
    assert server.wait_exit() == 1
    log = server.log()
    assert "Exception: Capture cuda graph failed: [TensorRT-LLM][ERROR] Assertion failed: Failed to initialize " \
           "cutlass TMA WS grouped gemm." in log


# ---------------------------------------------------------------------------------- throughput without fusion
@covers("sm12x-autotuned-1024")
def test_seed_tuned_rung_serves_about_3740_tokens_at_250_watts(make_host):
    host = make_host()
    server = host.start(*SEED_ARGS, *TUNED, env={"SGLANG_SIM_TOKEN_TIME_SCALE": "1"})
    server.wait_ready()
    assert "Skipping tactic" in server.log()  # the MoE GEMM tactics fail on SM 12.x with or without fusion
    idle = load_rows(host)
    assert idle and max(p for p, _ in idle.values()) < 40
    seen: list[float] = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            rows = load_rows(host)
            if rows:
                seen.append(max(p for p, _ in rows.values()))
            stop.wait(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        block, record, _ = bench(server, prompts=64, concurrency=64, out_len=64)
    finally:
        stop.set()
        sampler.join()
    assert_near(output_rate(record), 3740, tol=0.25)  # what bench reports, ramp-up included
    assert_near(decode_rate(record, 64), 3740, tol=0.08)
    assert float(block["Output token throughput (tok/s)"]) == pytest.approx(record["output_throughput"], abs=0.01)
    assert max(seen) == pytest.approx(250, abs=25)  # of 600 W
    deadline = time.monotonic() + 10
    while max(p for p, _ in load_rows(host).values()) > 40 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert max(p for p, _ in load_rows(host).values()) < 40  # back to idle


@covers("sm12x-untuned")
def test_seed_untuned_rung_serves_about_880_tokens(make_host):
    host = make_host()
    server = host.start(*SEED_ARGS, env={"SGLANG_SIM_TOKEN_TIME_SCALE": "0.5"})
    server.wait_ready()
    assert "Skipping tactic" not in server.log()
    _, record, _ = bench(server, prompts=24, concurrency=24, out_len=48)
    assert_near(output_rate(record, 0.5), 880, tol=0.25)
    assert_near(decode_rate(record, 24, 0.5), 880, tol=0.08)


@covers("sm90-tuned", "sm100-tuned")
@pytest.mark.parametrize(("profile", "row_id"), [("h100-sxm-x8", "sm90-tuned"), ("b200-x8", "sm100-tuned")])
def test_datacenter_tuned_rungs_serve_at_their_modelled_rate(make_host, profile, row_id):
    then = behaviour.row(row_id)["then"]
    rate, sat = then["rate"] * DENSE_SPEED, then["saturation"]
    scale, env = slow_tokens(rate, sat)
    host = make_host(profile)
    server = host.start("--model-path", DENSE_MODEL, "--tp", "8", "--max-running-requests", "1024", env=env)
    server.wait_ready()
    _, record, _ = bench(server, prompts=sat, concurrency=sat, out_len=8)
    assert_near(decode_rate(record, sat, scale), rate, tol=0.1)


@covers("other-gpu")
def test_an_sm_the_seed_did_not_cover_falls_back_to_the_catch_all_row(make_host):
    host = make_host("rtx5090-x2-workstation")
    csv = host.profile / "nvidia-smi/query-gpu.csv"
    csv.write_text(csv.read_text().replace(", 12.0, ", ", 8.9, "))
    scale, env = slow_tokens(600 * DENSE_SPEED, 16)
    server = host.start("--model-path", DENSE_MODEL, "--tp", "2", env=env)
    server.wait_ready()
    _, record, _ = bench(server, prompts=16, concurrency=16, out_len=8)
    assert_near(decode_rate(record, 16, scale), 600 * DENSE_SPEED, tol=0.1)


# ---------------------------------------------------------------------------------- SM 9.0 / 10.0
@covers("fusion-sm90-native", "fusion-sm100-native", "sm90-untuned", "sm100-untuned")
@pytest.mark.parametrize(("profile", "untuned"), [("h100-sxm-x8", "sm90-untuned"), ("b200-x8", "sm100-untuned")])
def test_fusion_works_natively_on_sm90_and_sm100_and_is_faster(make_host, profile, untuned):
    plain_rate = behaviour.row(untuned)["then"]["rate"] * DENSE_SPEED
    scale, env = slow_tokens(plain_rate, 32)
    host = make_host(profile)
    fused = host.start("--model-path", DENSE_MODEL, "--tp", "8", "--enable-flashinfer-allreduce-fusion", env=env)
    fused.wait_ready()
    assert JIT_BUILT in fused.log()
    assert fused.log().count("FlashInfer workspace initialized for rank") == 8
    assert fused.generate("2+2=")["text"] == "4"
    _, with_fusion, _ = bench(fused, prompts=32, concurrency=32, out_len=8)
    fused.stop()
    plain = host.start("--model-path", DENSE_MODEL, "--tp", "8", env=env)
    plain.wait_ready()
    assert "FlashInfer workspace" not in plain.log()
    _, without, _ = bench(plain, prompts=32, concurrency=32, out_len=8)
    assert_near(decode_rate(without, 32, scale), plain_rate, tol=0.1)
    assert decode_rate(with_fusion, 32) > 1.07 * decode_rate(without, 32)  # modelled: 1.15


@covers("fusion-sm90-native")
def test_allow_listed_models_get_fusion_automatically_on_sm90(make_host):
    host = make_host("h100-sxm-x8")
    server = host.start("--model-path", AUTO_FUSION_MODEL, "--tp", "8")
    server.wait_ready()
    assert "enable_flashinfer_allreduce_fusion=True" in server.log()
    assert "FlashInfer workspace initialized for rank 0, world_size 8" in server.log()


# ---------------------------------------------------------------------------------- leftover workers
@covers("gpu-memory-taken-oom")
def test_a_worker_left_behind_holds_its_memory_and_the_next_start_runs_out_of_memory(make_host):
    host = make_host()
    first = host.start(*SEED_ARGS, "--disable-cuda-graph")
    first.wait_ready()
    workers = host.apps()
    assert sorted(name for _, _, name in workers.values()) == [f"sglang::scheduler_TP{i}" for i in range(8)]
    os.kill(first.proc.pid, signal.SIGKILL)  # careless stop: the launcher only
    first.proc.wait()
    assert set(host.apps()) == set(workers)  # still listed by nvidia-smi, memory held
    second = host.start(*SEED_ARGS, "--disable-cuda-graph")
    assert second.wait_exit() == 1
    log = second.log()
    oom = re.search(r"torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate 1\.75 GiB\. GPU (\d) has a "
                    r"total capacity of 95\.59 GiB of which [\d.]+ GiB is free\. Process (\d+) has [\d.]+ GiB memory "
                    r"in use\.", log)
    assert oom, second.tail()
    assert workers[int(oom.group(2))][0] == int(oom.group(1))  # the worker left behind on that GPU
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while host.apps() and time.monotonic() < deadline:
        time.sleep(0.05)
    third = host.start(*SEED_ARGS, "--disable-cuda-graph")
    third.wait_ready()


def test_every_row_of_the_table_has_a_test():
    assert {r["id"] for r in behaviour.ROWS} == COVERED


def test_the_readme_shows_every_row():
    readme = (REPO / "sandbox/sim/README.md").read_text()
    for r in behaviour.ROWS:
        assert f"`{r['id']}`" in readme, r["id"]


def test_every_row_names_its_source_and_mechanism():
    for r in behaviour.ROWS:
        assert r["source"] and r["mechanism"] in ("code", "table") and r["phase"], r["id"]


# ---------------------------------------------------------------------------------- multi-node
def _two_nodes(make_host, *extra: str):
    """Two simulated 2-GPU hosts on loopback forming one TP4 server (--nnodes 2), rank 0's store on a free port."""
    from simhost import free_port

    nodes = [make_host("rtx5090-x2-workstation"), make_host("rtx5090-x2-workstation")]
    addr = f"127.0.0.1:{free_port()}"
    args = ("--model-path", DENSE_MODEL, "--tp", "4", "--nnodes", "2", "--dist-init-addr", addr, *extra)
    return nodes, args, addr


@covers("multinode-rendezvous", "multinode-peer-lost")
def test_two_nodes_serve_through_rank_0_and_a_lost_peer_fails_rank_0(make_host):
    (host0, host1), args, _ = _two_nodes(make_host, "--dist-timeout", "100000")
    worker = host1.start(*args, "--node-rank", "1")
    head = host0.start(*args, "--node-rank", "0")
    head.wait_ready(timeout=40)
    assert head.generate("2+2=")["text"] == "4"
    worker.wait_log("Dummy health check server started in background thread at 127.0.0.1:")
    assert worker.health() == 200
    assert worker.request("POST", "/generate", {"text": "2+2="})[0] == 404  # no API on rank >= 1
    assert "The server is fired up" not in worker.log()
    for server in (head, worker):
        assert server.log().count("Custom allreduce is disabled because this process group spans across nodes.") == 2
    assert sorted(gpu for gpu, _, _ in host1.apps().values()) == [0, 1]  # TP2 and TP3 on node 1's GPUs
    assert re.search(r"\bTP3\]", worker.log()) and not re.search(r"\bTP3\]", head.log())
    os.kill(worker.proc.pid, signal.SIGKILL)  # a node gone (power cut): its ranks go with the process tree
    for pid in host1.apps():
        os.kill(pid, signal.SIGKILL)
    assert head.wait_exit(timeout=30) == 1
    log = head.log()
    assert "remote process exited or there was a network error" in log, head.tail()
    assert re.search(r"Rank \d scheduler is dead", log)


@covers("multinode-rank-missing")
def test_a_node_that_never_joins_times_out_with_torchs_store_error(make_host):
    (host0, _), args, addr = _two_nodes(make_host, "--dist-timeout", "600")
    head = host0.start(*args, "--node-rank", "0")
    assert head.wait_exit(timeout=40) == 1
    log = head.log()
    assert ("torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 2/4 clients "
            "joined.") in log, head.tail()
    assert "The server is fired up" not in log


@covers("multinode-rank-missing")
def test_a_node_that_cannot_reach_rank_0_times_out_connecting(make_host):
    (_, host1), args, addr = _two_nodes(make_host, "--dist-timeout", "600")
    worker = host1.start(*args, "--node-rank", "1")
    assert worker.wait_exit(timeout=40) == 1
    host, port = addr.split(":")
    message = f"The client socket has timed out after 600000ms while trying to connect to ({host}, {port})."
    log = worker.log()
    assert f"[c10d] {message}" in log and f"torch.distributed.DistNetworkError: {message}" in log, worker.tail()
    assert "Dummy health check server started in background thread at" not in log
