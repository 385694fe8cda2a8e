"""Hand-written patches of the installed files: the simulator runs whatever they say.

A wrong patch fails the way it would on a real host; a correct one works whatever its wording.
"""

from __future__ import annotations

from sim_helpers import (
    ALLREDUCE_CUH,
    COMMUNICATOR,
    JIT_COMM,
    SEED_MODEL,
    SERVER_ARGS,
    UPPER_GATE,
    patch_all,
    patch_jit_gate,
    patch_kernel_gates,
    patch_sglang_gates,
)

SEED = ("--model-path", SEED_MODEL, "--tp", "8", "--enable-flashinfer-allreduce-fusion")
SO = ".cache/flashinfer/0.6.3/120a/cached_ops/trtllm_comm/trtllm_comm.so"
# a JIT build of trtllm_comm, as `ninja -v` shows it under FLASHINFER_JIT_VERBOSE=1 (its link step)
JIT_BUILT = "c++ -shared -o trtllm_comm.so"


def test_widening_only_some_of_the_13_kernel_gates_still_serves_garbage(make_host):
    host = make_host()
    patch_sglang_gates(host)
    patch_jit_gate(host)
    path = host.file(ALLREDUCE_CUH)
    text = path.read_text()
    assert text.count(UPPER_GATE) == 13
    # a hand edit that stops after the first six occurrences (the seven later ones still exclude 1200)
    path.write_text(text.replace(UPPER_GATE, "(__CUDA_ARCH__ < 1300)", 6))
    server = host.start(*SEED)
    server.wait_ready()
    answer = server.generate("2+2=", max_new_tokens=4)["text"]
    assert not answer.startswith("4")
    assert "Traceback" not in server.log() and "Error" not in server.tail(400)  # no error: just wrong


def test_a_correct_patch_in_other_words_works(make_host):
    host = make_host()
    # sglang: recognise SM 12.x by its capability instead of adding a helper
    host.patch(COMMUNICATOR, "import logging\n", "import logging\n\nimport torch\n", 1)
    host.patch(
        COMMUNICATOR,
        "_is_sm100_supported = _is_cuda and is_sm100_supported()",
        "_is_sm100_supported = _is_cuda and (is_sm100_supported() or torch.cuda.get_device_capability()[0] == 12)",
        1,
    )
    # flashinfer: a longer list and a different bound on every kernel gate
    host.patch(JIT_COMM, "supported_major_versions=[9, 10]", "supported_major_versions=[9, 10, 11, 12]", 1)
    host.patch(ALLREDUCE_CUH, UPPER_GATE, "(__CUDA_ARCH__ < 1300)", 13)
    server = host.start(*SEED)
    server.wait_ready()
    assert server.log().count("FlashInfer workspace initialized for rank") == 8
    assert server.generate("2+2=")["text"] == "4"


def test_the_jit_cache_is_built_once_rebuilt_after_header_edits_and_cleared_by_the_cli(make_host):
    host = make_host()
    patch_sglang_gates(host)
    patch_jit_gate(host)
    first = host.start(*SEED)
    first.wait_ready()
    assert JIT_BUILT in first.log()
    assert (host.home / SO).exists()
    assert not first.generate("2+2=", max_new_tokens=4)["text"].startswith("4")  # < 1200 gates still there
    first.stop()

    patch_kernel_gates(host)  # ninja sees the changed header through its depfile: rebuild
    second = host.start(*SEED)
    second.wait_ready()
    assert second.log().count(JIT_BUILT) == 1
    assert second.generate("2+2=")["text"] == "4"
    second.stop()

    third = host.start(*SEED)  # nothing changed: the cached module loads without a build
    third.wait_ready()
    assert JIT_BUILT not in third.log()
    third.stop()

    cleared = host.run("flashinfer", "clear-cache")
    assert cleared.returncode == 0, cleared.stderr
    assert not (host.home / SO).exists()
    fourth = host.start(*SEED)
    fourth.wait_ready()
    assert JIT_BUILT in fourth.log()


def test_a_preprocessor_error_in_a_patched_header_fails_the_jit_build(make_host):
    host = make_host()
    patch_sglang_gates(host)
    patch_jit_gate(host)
    host.patch(ALLREDUCE_CUH, "(__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))",
               "(__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1300)", 13)  # one ')' short each
    server = host.start(*SEED)
    assert server.wait_exit() == 1
    log = server.log()
    assert "RuntimeError: Ninja build failed. Ninja output:" in log
    assert "FAILED: trtllm_allreduce.cuda.o" in log
    assert "error: missing ')' in expression" in log
    assert "Exception: Capture cuda graph failed: Ninja build failed." in log


def test_a_python_syntax_error_in_the_communicator_fails_in_the_scheduler(make_host):
    host = make_host()
    host.patch(COMMUNICATOR, "(_is_sm90_supported or _is_sm100_supported)",
               "(_is_sm90_supported or _is_sm100_supported or)", 1)
    server = host.start(*SEED)
    assert server.wait_exit() == 1
    log = server.log()
    assert "Scheduler hit an exception: Traceback (most recent call last):" in log
    assert 'sglang/srt/layers/communicator.py", line 95' in log
    assert "SyntaxError: invalid syntax" in log


def test_a_helper_used_without_its_import_fails_with_a_name_error(make_host):
    host = make_host()
    host.patch(COMMUNICATOR, "(_is_sm90_supported or _is_sm100_supported)",
               "(_is_sm90_supported or _is_sm100_supported or is_sm120_supported())", 1)
    server = host.start(*SEED)
    assert server.wait_exit() == 1
    assert "NameError: name 'is_sm120_supported' is not defined" in server.log()


def test_a_python_syntax_error_in_server_args_fails_at_import(make_host):
    host = make_host()
    host.patch(SERVER_ARGS, "and (is_sm90_supported() or is_sm100_supported())",
               "and (is_sm90_supported() or is_sm100_supported()", 1)
    server = host.start(*SEED)
    assert server.wait_exit() == 1
    log = server.log()
    assert log.startswith("Traceback (most recent call last):")
    assert "SyntaxError" in log and " TP0]" not in log


def test_all_patches_give_a_working_fused_server_on_sm120(make_host):
    host = make_host()
    patch_all(host)
    server = host.start(*SEED, "--disable-cuda-graph")
    server.wait_ready()
    assert server.generate("2+2=")["text"] == "4"
    assert "Capture cuda graph" not in server.log()
