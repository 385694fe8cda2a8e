"""The HTTP API, bench_serving's result block and the live state the stand-in nvidia-smi reports."""

from __future__ import annotations

import json
import subprocess
import time

from sim_helpers import DENSE_MODEL, bench, parse_result_block
from simhost import free_port

LABELS = [
    "Backend", "Traffic request rate", "Max request concurrency", "Successful requests", "Benchmark duration (s)",
    "Total input tokens", "Total input text tokens", "Total generated tokens",
    "Total generated tokens (retokenized)", "Request throughput (req/s)", "Input token throughput (tok/s)",
    "Output token throughput (tok/s)", "Peak output token throughput (tok/s)", "Peak concurrent requests",
    "Total token throughput (tok/s)", "Concurrency", "Mean E2E Latency (ms)", "Median E2E Latency (ms)",
    "P90 E2E Latency (ms)", "P99 E2E Latency (ms)", "Mean TTFT (ms)", "Median TTFT (ms)", "P99 TTFT (ms)",
    "Mean TPOT (ms)", "Median TPOT (ms)", "P99 TPOT (ms)", "Mean ITL (ms)", "Median ITL (ms)", "P95 ITL (ms)",
    "P99 ITL (ms)", "Max ITL (ms)",
]


def smi(host, *args) -> str:
    proc = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, env=host.env())
    assert proc.returncode == 0, proc.stdout
    return proc.stdout


def test_health_is_refused_then_503_during_warmup_then_200(make_host):
    host = make_host("rtx5090-x2-workstation")
    # slow tokens make the warm-up generation (8 tokens) last about a second
    server = host.start("--model-path", DENSE_MODEL, "--tp", "2", env={"SGLANG_SIM_TOKEN_TIME_SCALE": "20"})
    seen = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status = server.health()
        if not seen or seen[-1] != status:
            seen.append(status)
        if status == 200:
            break
        time.sleep(0.02)
    assert seen == [None, 503, 200]
    log = server.log()
    assert log.index("Uvicorn running on http://127.0.0.1:") < log.index("The server is fired up and ready to roll!")
    server.stop()


def test_api_endpoints_metrics_and_api_key(make_host):
    host = make_host("rtx5090-x2-workstation")
    server = host.start("--model-path", DENSE_MODEL, "--api-key", "s3cret", "--enable-metrics",
                        env={"CUDA_VISIBLE_DEVICES": "1"})
    server.wait_ready()
    auth = {"authorization": "Bearer s3cret"}
    assert server.request("GET", "/v1/models")[0] == 401
    assert server.request("POST", "/generate", {"text": "2+2="})[0] == 401
    status, body = server.request("GET", "/v1/models", headers=auth)
    assert status == 200 and json.loads(body)["data"][0]["id"] == DENSE_MODEL
    status, body = server.request("POST", "/v1/completions", {"model": DENSE_MODEL, "prompt": "2+2=",
                                                               "max_tokens": 4}, headers=auth)
    assert status == 200
    completion = json.loads(body)
    assert completion["choices"][0]["text"] == "4" and completion["usage"]["completion_tokens"] == 1
    status, body = server.request("POST", "/v1/chat/completions", {
        "model": DENSE_MODEL, "messages": [{"role": "user", "content": "2+2="}]}, headers=auth)
    assert json.loads(body)["choices"][0]["message"]["content"] == "4"
    status, body = server.request("POST", "/generate", {"text": "Tell me", "sampling_params": {
        "max_new_tokens": 5, "ignore_eos": True}, "stream": True}, headers=auth)
    events = [ln[6:] for ln in body.decode().splitlines() if ln.startswith("data: ")]
    assert events[-1] == "[DONE]" and json.loads(events[-2])["meta_info"]["completion_tokens"] == 5
    status, body = server.request("GET", "/metrics")  # no key needed, as in sglang
    text = body.decode()
    assert status == 200
    for name in ("sglang:generation_tokens_total", "sglang:num_running_reqs", "sglang:gen_throughput",
                 "sglang:time_to_first_token_seconds_bucket", "sglang:token_usage"):
        assert name in text
    assert server.request("GET", "/health")[0] == 200
    assert json.loads(server.request("GET", "/get_server_info", headers=auth)[1])["version"] == "0.5.9"
    # nvidia-smi (physical GPU 1 only: CUDA_VISIBLE_DEVICES=1)
    apps = smi(host, "--query-compute-apps=pid,process_name,used_gpu_memory", "--format=csv,noheader,nounits")
    (line,) = apps.strip().splitlines()
    pid, name, used = (c.strip() for c in line.split(","))
    assert name == "sglang::scheduler_TP0" and int(used) > 20000
    assert host.apps()[int(pid)][0] == 1
    with open(f"/proc/{pid}/comm") as f:
        assert f.read().strip() == "sglang::schedul"
    used_per_gpu = smi(host, "--query-gpu=index,memory.used", "--format=csv,noheader,nounits").split("\n")
    assert used_per_gpu[0] == "0, 0" and used_per_gpu[1] == f"1, {used}"
    server.stop()
    assert host.apps() == {}
    assert not (host.run_dir / "load").exists()
    assert smi(host, "--query-compute-apps=pid,process_name,used_gpu_memory", "--format=csv") == (
        "pid, process_name, used_gpu_memory [MiB]\n")


def test_a_busy_port_fails_like_uvicorn(make_host):
    host = make_host("rtx5090-x2-workstation")
    first = host.start("--model-path", DENSE_MODEL, env={"CUDA_VISIBLE_DEVICES": "0"})
    first.wait_ready()
    second = host.start("--model-path", DENSE_MODEL, port=first.port, env={"CUDA_VISIBLE_DEVICES": "1"})
    assert second.wait_exit() == 1
    assert (f"ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', {first.port}): "
            "address already in use") in second.log()
    assert all(gpu == 0 for gpu, _, _ in host.apps().values())  # the failed server's worker is gone


def test_bench_serving_prints_the_v059_result_block_and_its_json_agrees(make_host):
    host = make_host("rtx5090-x2-workstation")
    server = host.start("--model-path", DENSE_MODEL, "--tp", "2")
    server.wait_ready()
    block, record, stdout = bench(server, prompts=12, concurrency=4, out_len=6, warmup=1)
    assert "============ Serving Benchmark Result ============" in stdout
    assert "#Input tokens: 384" in stdout and "#Output tokens: 72" in stdout
    assert "Starting warmup with 1 sequences..." in stdout
    assert list(block) == LABELS
    assert block["Backend"] == "sglang" and block["Traffic request rate"] == "inf"
    assert int(block["Successful requests"]) == record["completed"] == 12
    assert int(block["Total generated tokens"]) == record["total_output_tokens"] == 72
    for label, key in [("Output token throughput (tok/s)", "output_throughput"),
                       ("Median TTFT (ms)", "median_ttft_ms"), ("P99 ITL (ms)", "p99_itl_ms"),
                       ("Mean TPOT (ms)", "mean_tpot_ms"), ("Concurrency", "concurrency")]:
        assert float(block[label]) == round(record[key], 2)
    assert record["server_info"]["version"] == "0.5.9"
    assert 1.0 < record["concurrency"] <= 4.01  # at most --max-concurrency streams at any time
    assert 2 <= int(block["Peak concurrent requests"]) <= 4


def test_bench_serving_fails_loudly_without_a_server_or_offline_data(make_host):
    host = make_host("rtx5090-x2-workstation")
    port = str(free_port())
    proc = host.run("sglang.bench_serving", "--backend", "sglang", "--port", port, "--dataset-name", "random-ids",
                    "--num-prompts", "2", "--host", "127.0.0.1")
    assert proc.returncode == 1
    assert "requests.exceptions.ConnectionError" in proc.stderr
    proc = host.run("sglang.bench_serving", "--backend", "sglang", "--port", port, "--model", "m",
                    "--dataset-name", "random-ids", "--num-prompts", "2", "--host", "127.0.0.1")
    assert proc.returncode == 1
    assert "ValueError: Warmup failed - Please make sure benchmark arguments are correctly specified." \
        in proc.stderr
    proc = host.run("sglang.bench_serving", "--backend", "sglang", "--port", port, "--model", "m",
                    "--dataset-name", "sharegpt", "--num-prompts", "2")
    assert proc.returncode == 1
    assert "Downloading from https://huggingface.co/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered" in proc.stdout
    assert "Failed to resolve 'huggingface.co'" in proc.stderr
    bad = host.run("sglang.bench_serving", "--dataset-name", "nope")
    assert bad.returncode == 2 and "invalid choice: 'nope'" in bad.stderr


def test_parse_result_block_tolerates_an_older_layout():
    v053 = "\n".join([
        "============ Serving Benchmark Result ============",
        "Backend:                                 sglang    ",
        "Successful requests:                     100       ",
        "Output token throughput (tok/s):         3740.12   ",
        "---------------Time to First Token----------------",
        "Median TTFT (ms):                        80.10     ",
        "==================================================",
    ])
    assert parse_result_block(v053) == {"Backend": "sglang", "Successful requests": "100",
                                        "Output token throughput (tok/s)": "3740.12", "Median TTFT (ms)": "80.10"}


def test_the_sandbox_stand_in_nvidia_smi_reports_the_simulators_live_state(tmp_path, sim_site):
    from simhost import STANDIN_SMI, SimHost

    host = SimHost(tmp_path / "standin-host", sim_site, "rtx5090-x2-workstation", STANDIN_SMI)
    try:
        server = host.start("--model-path", DENSE_MODEL, "--tp", "2")
        server.wait_ready()
        apps = smi(host, "--query-compute-apps=pid,process_name,used_gpu_memory", "--format=csv,noheader,nounits")
        names = sorted(line.split(", ")[1] for line in apps.strip().splitlines())
        assert names == ["sglang::scheduler_TP0", "sglang::scheduler_TP1"]
        used = smi(host, "--query-gpu=memory.used", "--format=csv,noheader,nounits").split()
        assert all(int(u) > 20000 for u in used)
        server.stop()
        assert smi(host, "--query-compute-apps=pid,process_name,used_gpu_memory", "--format=csv,noheader") == ""
    finally:
        host.cleanup()
