"""The v0.5.9 command line: argparse's own acceptance and rejection, exit status 2 on errors."""

from __future__ import annotations

import json

import pytest

MODEL = ("--model-path", "meta-llama/Llama-3.1-8B-Instruct")


@pytest.fixture
def host(make_host):
    return make_host("rtx5090-x2-workstation")


def launch(host, *args):
    return host.run("sglang.launch_server", *args)


def parsed(host, *args) -> dict:
    code = (
        "import json, sys; from sglang.srt.server_args import prepare_server_args; "
        "a = prepare_server_args(sys.argv[1:]); "
        "print(json.dumps({k: v for k, v in vars(a).items() if not k.startswith('_')}))"
    )
    proc = host.run_code(code, *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_an_unknown_flag_is_rejected_as_argparse_does(host):
    proc = launch(host, *MODEL, "--no-such-flag", "1")
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: launch_server.py [-h] --model-path MODEL_PATH")
    assert proc.stderr.rstrip().endswith("launch_server.py: error: unrecognized arguments: --no-such-flag 1")


def test_a_removed_flag_is_unknown(host):
    proc = launch(host, *MODEL, "--enable-ep-moe")
    assert proc.returncode == 2
    assert "error: unrecognized arguments: --enable-ep-moe" in proc.stderr


def test_a_bad_choice_is_rejected_with_the_choices(host):
    proc = launch(host, *MODEL, "--moe-runner-backend", "flashinfer_cutlas")
    assert proc.returncode == 2
    assert ("launch_server.py: error: argument --moe-runner-backend: invalid choice: 'flashinfer_cutlas' (choose "
            "from 'auto', 'deep_gemm', 'triton', 'triton_kernel', 'flashinfer_trtllm', 'flashinfer_cutlass', "
            "'flashinfer_mxfp4', 'flashinfer_cutedsl', 'cutlass')") in proc.stderr


def test_a_bad_type_is_rejected(host):
    proc = launch(host, *MODEL, "--tp-size", "two")
    assert proc.returncode == 2
    assert "error: argument --tensor-parallel-size/--tp-size: invalid int value: 'two'" in proc.stderr


def test_model_path_is_required(host):
    proc = launch(host, "--tp-size", "2")
    assert proc.returncode == 2
    assert "error: the following arguments are required: --model-path/--model" in proc.stderr


def test_unambiguous_prefixes_work_and_ambiguous_ones_fail(host):
    args = parsed(host, *MODEL, "--tp", "2", "--dp", "1", "--ep", "2", "--mem-frac", "0.8")
    assert (args["tp_size"], args["dp_size"], args["ep_size"], args["mem_fraction_static"]) == (2, 1, 2, 0.8)
    proc = launch(host, *MODEL, "--pp", "2")
    assert proc.returncode == 2
    assert ("error: ambiguous option: --pp could match --pp-size, --pp-max-micro-batch-size, "
            "--pp-async-batch-depth") in proc.stderr


def test_help_is_argparses(host):
    proc = launch(host, "--help")
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: launch_server.py [-h] --model-path MODEL_PATH")
    assert "--enable-flashinfer-allreduce-fusion" in proc.stdout
    assert "Enable FlashInfer allreduce fusion with Residual RMSNorm." in " ".join(proc.stdout.split())
    assert "--tensor-parallel-size TP_SIZE, --tp-size TP_SIZE" in proc.stdout


def test_a_deprecated_flag_raises_its_note(host):
    proc = launch(host, *MODEL, "--hybrid-kvcache-ratio")
    assert proc.returncode == 1
    assert "ValueError: NOTE: --hybrid-kvcache-ratio is deprecated." in proc.stderr


def test_defaults_follow_v059_on_a_32_gb_gpu(host):
    args = parsed(host, *MODEL, "--tp", "2")
    assert (args["host"], args["port"], args["chunked_prefill_size"], args["cuda_graph_max_bs"]) == (
        "127.0.0.1", 30000, 2048, 24)
    assert args["attention_backend"] == "flashinfer"
    assert 0.8 < args["mem_fraction_static"] < 0.9
    assert args["enable_flashinfer_allreduce_fusion"] is False


def test_a_yaml_config_file_merges_under_the_command_line(host):
    cfg = host.root / "sglang.yaml"
    cfg.write_text("tp-size: 2\nenable-metrics: true\nmax_running_requests: 64\ncuda-graph-bs: [1, 2, 4]\n")
    args = parsed(host, *MODEL, "--config", str(cfg), "--max-running-requests", "128")
    assert (args["tp_size"], args["enable_metrics"], args["max_running_requests"]) == (2, True, 128)
    assert args["cuda_graph_bs"] == [1, 2, 4]


def test_an_offline_host_cannot_fetch_an_unknown_model(host):
    proc = launch(host, "--model-path", "someone/not-downloaded-7B")
    assert proc.returncode == 1
    assert "OSError: We couldn't connect to 'https://huggingface.co' to load the files" in proc.stderr


def test_flashinfer_cutlass_moe_rejects_other_quantizations(host):
    proc = launch(host, *MODEL, "--moe-runner-backend", "flashinfer_cutlass", "--quantization", "fp8")
    assert proc.returncode == 1
    assert "AssertionError: Invalid quantization 'fp8'." in proc.stderr
