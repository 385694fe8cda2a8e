"""Log classification: recorded real failures, normal startup lines, severity, grouping, the live watcher."""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from pathlib import Path

import pytest
from invoke import Context
from invoke.exceptions import Failure, WatcherError

from fleet.logs.watch import (
    NONE,
    FatalLogLine,
    LineClassifier,
    LogClass,
    LogWatcher,
    ServerReady,
    Severity,
    classify_line,
    classify_text,
    load_rules,
    normalise,
)

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def _cases(name: str) -> list[dict]:
    return [json.loads(row) for row in (LOGS / name).read_text().splitlines() if row.strip()]


@pytest.fixture(scope="module")
def rules():
    return load_rules()


# --- recorded text: every excerpt gets a verdict its fixture accepts -------------------------------

@pytest.mark.parametrize("case", _cases("real_failures.jsonl"), ids=lambda c: c["id"])
def test_real_failure_excerpt_gets_an_expected_verdict(rules, case):
    verdict = classify_text(case["text"], rules)
    assert verdict.log_class in case["expect"], [(e.line, e.log_class, e.rule) for e in verdict.events]


@pytest.mark.parametrize("case", _cases("alt_wordings.jsonl"), ids=lambda c: c["id"])
def test_alternative_wording_gets_an_expected_verdict(rules, case):
    verdict = classify_text(case["text"], rules)
    assert verdict.log_class in case["expect"], [(e.line, e.log_class, e.rule) for e in verdict.events]


def test_recorded_full_startup_is_ready_with_nothing_else_to_say(rules):
    verdict = classify_text((LOGS / "sglang_startup_ready.log").read_text(), rules)
    assert verdict.log_class == LogClass.READY
    assert [(e.line, e.log_class) for e in verdict.events] == [(44, LogClass.READY)]


def test_startup_with_p2p_and_autotuner_warnings_is_still_ready(rules):
    verdict = classify_text((LOGS / "sglang_startup_ready_sm120_warnings.log").read_text(), rules)
    assert verdict.ready and not verdict.fatal
    assert {e.log_class for e in verdict.events} == {LogClass.READY, LogClass.P2P_UNAVAILABLE, LogClass.TMA_FAILURE}
    assert all(e.severity is not Severity.FATAL for e in verdict.events)


@pytest.mark.parametrize(("name", "expected", "line", "first_remedy"), [
    ("sglang_sm120_allreduce_fusion_crash.log", LogClass.ARCH_UNSUPPORTED, 17, "disable_allreduce_fusion"),
    ("sglang_kv_pool_too_small.log", LogClass.KV_CACHE_TOO_SMALL, 11, "raise_mem_fraction"),
])
def test_failed_startup_names_the_cause_line_and_remedy(rules, name, expected, line, first_remedy):
    verdict = classify_text((LOGS / name).read_text(), rules)
    assert verdict.fatal and verdict.log_class == expected
    assert verdict.event.line == line and verdict.event.remedies[0] == first_remedy


# --- normal lines are never failures -------------------------------------------------------------

NORMAL_LINES = [
    "[2026-03-02 09:14:09 TP0] Init torch distributed begin.",
    "[2026-03-02 09:14:11 TP0] Init torch distributed ends. elapsed=1.62 s, mem usage=0.52 GB",
    "[2026-03-02 09:14:11 TP0] Load weight begin. avail mem=78.52 GB",
    "Loading safetensors checkpoint shards: 100% Completed | 16/16 [00:09<00:00,  1.70it/s]",
    "[2026-03-02 09:14:22 TP0] Load weight end. elapsed=10.84 s, type=Qwen3MoeForCausalLM, dtype=torch.bfloat16, "
    "avail mem=49.87 GB, mem usage=28.65 GB.",
    "[2026-03-02 09:14:22 TP0] KV Cache is allocated. #tokens: 1021842, K size: 23.39 GB, V size: 23.39 GB",
    "[2026-03-02 09:14:22 TP0] Memory pool end. avail mem=2.91 GB",
    "[2026-03-02 09:14:23 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=2.68 GB",
    "[2026-03-02 09:14:23 TP0] Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]",
    "Capturing batches (bs=1 avail_mem=2.12 GB): 100%|██████████| 36/36 [00:05<00:00,  6.52it/s]",
    "[2026-03-02 09:14:29 TP0] Capture cuda graph end. Time elapsed: 6.11 s. mem usage=0.57 GB. avail mem=2.11 GB.",
    "2026-03-02 10:02:34,101 - INFO - autotuner.py:262 - flashinfer.jit: [Autotuner]: Autotuning process starts ...",
    "2026-03-02 10:02:41,880 - INFO - autotuner.py:280 - flashinfer.jit: [Autotuner]: Autotuning process ends",
    "[Autotuner]: Loading configs for fused_moe from file failed; Using default configs instead.",
    "NCCL version 2.27.5+cuda12.9",
    "[2026-03-02 09:14:11 TP0] sglang is using nccl==2.27.5",
    "gpu-node-1:5131:5131 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1",
    "gpu-node-1:5131:5131 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
    "[Gloo] Rank 0 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1",
    "[2026-03-02 09:14:31] INFO:     127.0.0.1:51234 - \"GET /health HTTP/1.1\" 200 OK",
    "[2026-03-02 09:14:31] INFO:     127.0.0.1:51234 - \"GET /health HTTP/1.1\" 503 Service Unavailable",
    "INFO:     10.0.0.5:40112 - \"POST /generate HTTP/1.1\" 200 OK",
    "[2026-03-02 09:14:30] INFO:     Application startup complete.",
    "[2026-03-02 09:14:09 TP0] Attention backend not specified. Use flashinfer backend by default.",
    "[2026-03-02 09:14:20 TP0] FlashInfer workspace initialized for rank 0, world_size 2",
    "rank 0 allocated ipc_handles: [['0x7f0c2ce8a350']]",
    "[2026-03-02 09:14:01] server_args=ServerArgs(model_path='x', mem_fraction_static=0.828, "
    "disable_cuda_graph=False, disable_custom_all_reduce=False, enable_flashinfer_allreduce_fusion=False)",
    "[2026-03-02 09:14:41 TP0] Decode batch. #running-req: 1, #token: 9, token usage: 0.00, cuda graph: True, "
    "gen throughput (token/s): 3.14, #queue-req: 0",
    "sglang.service: Main process exited, code=exited, status=0/SUCCESS",
    "sglang.service: Main process exited, code=killed, status=15/TERM",
    "sglang.service: Deactivated successfully.",
    "Started sglang.service - sglang server.",
]


@pytest.mark.parametrize("line", NORMAL_LINES)
def test_normal_startup_line_classifies_to_nothing(rules, line):
    assert classify_line(line, rules) is None
    assert classify_text(line, rules).log_class == NONE


def test_every_line_of_the_recorded_startup_but_ready_is_normal(rules):
    lines = (LOGS / "sglang_startup_ready.log").read_text().splitlines()
    found = {i + 1: m.rule.name for i, line in enumerate(lines) if (m := classify_line(line, rules))}
    assert found == {44: "server_ready"}


# --- severity and specificity --------------------------------------------------------------------

SKIP = ("[Autotuner]: Skipping tactic <flashinfer.fused_moe.core.MoERunner object at 0x7c70ccce8350> 15, "
        "due to failure while profiling: ")


@pytest.mark.parametrize("cause", ["RuntimeError: workspace too small", "CUDA error: an illegal memory access",
                                   "[TensorRT-LLM][ERROR] Assertion failed: Failed to initialize cutlass TMA WS "
                                   "grouped gemm. Error: Error Internal"])
def test_autotuner_skipping_tactic_is_a_warning_never_fatal(rules, cause):
    verdict = classify_text(SKIP + cause, rules)
    assert [e.severity for e in verdict.events] == [Severity.WARNING]
    assert not verdict.fatal


def test_tma_failure_inside_an_autotune_warning_is_tma_failure(rules):
    match = classify_line(SKIP + "Failed to initialize cutlass TMA WS grouped gemm. Error: Error Internal", rules)
    assert (match.rule.log_class, match.severity) == (LogClass.TMA_FAILURE, Severity.WARNING)


def test_capture_cuda_graph_failed_on_arch_is_arch_unsupported_not_graph_failure(rules):
    line = "Exception: Capture cuda graph failed: No supported CUDA architectures found for major versions [9, 10]."
    assert classify_line(line, rules).rule.log_class is LogClass.ARCH_UNSUPPORTED
    assert classify_text(line, rules).log_class == LogClass.ARCH_UNSUPPORTED


def test_kv_pool_error_asks_for_more_memory_and_oom_for_less(rules):
    kv = classify_text("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", rules)
    oom = classify_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", rules)
    assert (kv.log_class, kv.event.remedies[0]) == (LogClass.KV_CACHE_TOO_SMALL, "raise_mem_fraction")
    assert (oom.log_class, oom.event.remedies[0]) == (LogClass.CUDA_OOM, "lower_mem_fraction")


BARE = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 150.00 MiB.",
    "Exception: Capture cuda graph failed: No supported CUDA architectures found for major versions [9, 10].",
    SKIP + "Failed to initialize cutlass TMA WS grouped gemm.",
    "The server is fired up and ready to roll!",
    "P2P is disabled between connected GPUs 2 and 1.",
    "  File \"/x/lamport_workspace.py\", line 300, in get_allreduce_workspace",
]
PREFIXES = [
    "Feb 23 10:00:00 gpu-node-1 python3[1234]: ",
    "2026-02-23T10:00:00.123456+0000 gpu-node-1 python3[1234]: ",
    "(pid=4411) ",
    "(Worker_PP0 pid=38385) ",
    "(RayWorkerWrapper pid=9912, ip=10.0.0.2) ",
    "(VllmWorker rank=0 pid=2210) ",
    "[2026-02-23 10:00:00 TP3] ",
    "[2026-02-23 10:00:00 DP0 TP3] ",
    "[2026-02-23 10:00:00] TP3 ",
    "[19:01:01 TP0] ",
    "\x1b[31m[2026-02-23 10:00:00 TP0] ",
    "2025-11-11 06:41:27,319 - WARNING - autotuner.py:485 - flashinfer.jit: ",
    "ERROR 05-29 16:44:33 [multiproc_executor.py:874] ",
    "INFO 05-13 08:48:35 utils.py:132] ",
    "E0425 10:43:31.433641 841 backend_model.cc:691] ",
    "sglang-1  | ",
    "Feb 23 10:00:00 gpu-node-1 python3[1234]: (Worker_TP1 pid=912664) ERROR 05-29 16:44:33 [x.py:874] ",
]


@pytest.mark.parametrize(("prefix", "bare"), [
    *[(p, b) for p in PREFIXES for b in BARE],
    ("node155:3052669:3052713 [1] ", "NCCL INFO P2P is disabled between connected GPUs 2 and 1."),
])
def test_prefixed_line_classifies_as_the_bare_line(rules, prefix, bare):
    want, got = classify_line(bare, rules), classify_line(prefix + bare + "\x1b[0m", rules)
    assert (got.rule.name, got.severity) == (want.rule.name, want.severity)
    assert normalise(prefix + bare).text == bare


def test_multi_line_traceback_is_one_event_at_its_cause(rules):
    text = ("[2026-03-02 12:10:01 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
            "  File \"/x/sglang/srt/managers/scheduler.py\", line 3188, in run_scheduler_process\n"
            "    scheduler = Scheduler(server_args)\n"
            "  File \"/x/sglang/srt/model_executor/model_runner.py\", line 312, in init_memory_pool\n"
            "    raise RuntimeError(\"Not enough memory\")\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
            "\n"
            "During handling of the above exception, another exception occurred:\n"
            "\n"
            "Traceback (most recent call last):\n"
            "  File \"/x/sglang/srt/managers/scheduler.py\", line 3190, in run_scheduler_process\n"
            "RuntimeError: worker failed\n")
    events = classify_text(text, rules).events
    assert [(e.first_line, e.line, e.log_class) for e in events] == [(1, 6, LogClass.CUDA_OOM)]


def test_the_exception_message_is_the_evidence_not_the_source_line_raising_it(rules):
    text = ("Traceback (most recent call last):\n"
            "  File \"/x/sglang/srt/model_executor/model_runner.py\", line 99, in load_model\n"
            "    raise torch.OutOfMemoryError(self.rank.oom_message(1.75))\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB.\n")
    events = classify_text(text, rules).events
    assert [(e.line, e.log_class) for e in events] == [(4, LogClass.CUDA_OOM)]
    assert events[0].text.startswith("torch.OutOfMemoryError: CUDA out of memory")


def test_traceback_nothing_explains_is_one_fatal_event(rules):
    text = ("Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n    main()\n"
            "ValueError: invalid literal for int() with base 10: 'auto'\n")
    events = classify_text(text, rules).events
    assert [(e.line, e.log_class, e.severity) for e in events] == [(4, LogClass.FATAL, Severity.FATAL)]


def test_cause_on_the_line_after_a_wrapper_names_the_event(rules):
    text = ("Exception: Capture cuda graph failed: Internal Triton PTX codegen error:\n"
            "ptxas fatal   : Value 'sm_120a' is not defined for option 'gpu-name'\n"
            "Possible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n")
    events = classify_text(text, rules).events
    assert [(e.line, e.log_class) for e in events] == [(2, LogClass.NO_KERNEL_IMAGE)]


def test_frames_under_a_warning_stay_part_of_the_warning(rules):
    text = (SKIP + "boom\n"
            "1       0x7c6dd0a58b16 tensorrt_llm::common::throwRuntimeError(char const*, int) + 97\n"
            "    CUDA error: an illegal memory access was encountered\n"
            "[2026-03-02 10:02:42 TP0] Capture cuda graph begin. This can take up to several minutes.\n")
    events = classify_text(text, rules).events
    assert [(e.line, e.log_class, e.severity) for e in events] == [
        (3, LogClass.ILLEGAL_ADDRESS, Severity.WARNING)]


def test_verdict_prefers_fatal_then_ready_then_the_worst_most_specific_warning(rules):
    ready = "The server is fired up and ready to roll!"
    p2p = "Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test failed."
    tma = SKIP + "Failed to initialize cutlass TMA WS grouped gemm."
    shm = "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct"
    assert classify_text(f"{ready}\nRuntimeError: CUDA error: misaligned address", rules).log_class == \
        LogClass.ILLEGAL_ADDRESS
    assert classify_text(f"{p2p}\n{ready}", rules).log_class == LogClass.READY
    assert classify_text(f"{p2p}\n{tma}\n{shm}", rules).log_class == LogClass.TMA_FAILURE
    assert classify_text(shm, rules).log_class == LogClass.P2P_UNAVAILABLE
    assert classify_text("", rules).log_class == NONE


# --- the live watcher ----------------------------------------------------------------------------

def _stream(name: str) -> str:
    return (LOGS / name).read_text()


def _feed(watcher: LogWatcher, stream: str, cuts: list[int]) -> None:
    """Submit the stream as Invoke does: the whole text read so far, growing at each cut."""
    for cut in [*cuts, len(stream)]:
        watcher.submit(stream[:cut])


@pytest.mark.parametrize("seed", range(6))
def test_watcher_sees_each_line_exactly_once_whatever_the_chunks(rules, seed):
    stream = _stream("sglang_startup_ready_sm120_warnings.log") + _stream("sglang_startup_ready.log")
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(stream)), 60)) if seed else list(range(1, len(stream)))  # 0: per char
    seen = []
    watcher = LogWatcher(rules, on_event=seen.append)
    _feed(watcher, stream, cuts)
    watcher.finish()
    assert watcher.lines_read == stream.count("\n")
    assert seen == watcher.events == list(classify_text(stream, rules).events)
    assert watcher.ready.is_set() and watcher.fatal is None


def test_watcher_raises_on_the_fatal_line_and_not_before(rules):
    head = _stream("sglang_startup_ready.log").split("[2026-03-02 09:14:23 TP0] Capture")[0]
    fatal = "[2026-03-02 09:14:23 TP0] RuntimeError: CUDA error: no kernel image is available for execution\n"
    stream = head + fatal + "[2026-03-02 09:14:24] more text after it\n"
    watcher = LogWatcher(rules)
    watcher.submit(head + fatal[:40])  # the fatal line is not complete yet
    with pytest.raises(FatalLogLine) as raised:
        watcher.submit(head + fatal)
    assert isinstance(raised.value, WatcherError)
    assert raised.value.event.line == head.count("\n") + 1
    assert raised.value.event.log_class is LogClass.NO_KERNEL_IMAGE
    watcher.submit(stream)  # reading on resumes after the fatal line, without reading it twice
    assert watcher.lines_read == stream.count("\n")
    assert [e.log_class for e in watcher.events] == [LogClass.NO_KERNEL_IMAGE]


def test_watcher_never_raises_on_warnings(rules):
    stream = _stream("sglang_startup_ready_sm120_warnings.log")
    watcher = LogWatcher(rules)
    _feed(watcher, stream, list(range(0, len(stream), 97)))
    assert watcher.ready.is_set()
    assert {e.severity for e in watcher.events} == {Severity.INFO, Severity.WARNING}


def test_watcher_can_end_the_wait_on_ready(rules):
    watcher = LogWatcher(rules, stop_on_ready=True)
    with pytest.raises(ServerReady):
        watcher.submit(_stream("sglang_startup_ready.log"))
    assert watcher.verdict().ready


def test_watcher_releases_a_held_wrapper_at_the_next_record_or_at_the_end(rules):
    wrapper = "Exception: Capture cuda graph failed: Ninja build failed.\nPossible solutions:\n"
    watcher = LogWatcher(rules)
    watcher.submit(wrapper)  # its cause may still follow: held
    with pytest.raises(FatalLogLine) as raised:
        watcher.submit(wrapper + "[2026-03-02 12:10:02] Received sigquit from a child process.\n")
    assert raised.value.event.log_class is LogClass.CUDA_GRAPH_FAILURE
    quiet = LogWatcher(rules)
    quiet.submit(wrapper + "partial last line without newline: ptxas fatal : Value 'sm_120' is not defined")
    assert quiet.fatal is None
    assert [e.log_class for e in quiet.finish()] == [LogClass.NO_KERNEL_IMAGE]
    assert quiet.fatal.log_class is LogClass.NO_KERNEL_IMAGE and quiet.lines_read == 3


def test_watcher_keeps_one_cursor_per_stream_and_shares_events_across_threads(rules):
    watcher = LogWatcher(rules)  # Invoke reads stdout and stderr in two threads, one watcher
    out = _stream("sglang_startup_ready.log")
    err = "P2P is disabled between connected GPUs 0 and 1.\n[2026-03-02 09:14:30] next\n"
    threads = [threading.Thread(target=_feed, args=(watcher, s, list(range(0, len(s), 50)))) for s in (out, err)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert watcher.lines_read == out.count("\n") + err.count("\n")
    assert sorted(e.log_class for e in watcher.events) == [LogClass.P2P_UNAVAILABLE, LogClass.READY]


def _reap(process) -> None:
    """Invoke's local runner leaves the child running (and its pipes open) after a watcher error."""
    process.kill()
    process.wait(timeout=10)
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


def test_watcher_ends_a_running_command_at_once_on_a_fatal_line(rules, tmp_path):
    script = tmp_path / "server.py"
    script.write_text(
        "import sys, time\n"
        "print('[2026-03-02 09:14:09 TP0] Init torch distributed begin.', flush=True)\n"
        "print('[2026-03-02 09:14:10 TP0] torch.OutOfMemoryError: CUDA out of memory.', flush=True)\n"
        "time.sleep(60)\n")
    seen = []
    watcher = LogWatcher(rules, on_event=seen.append)
    start = time.monotonic()
    # without a pty Invoke also joins the idle stderr reader (up to 1 s); deploy uses pty=True
    promise = Context().run(f"{sys.executable} {script}", watchers=[watcher], hide=True, in_stream=False,
                            timeout=50, asynchronous=True)
    try:
        with pytest.raises(Failure) as failed:
            promise.join()
        assert time.monotonic() - start < 10  # it sleeps 60 s: only the watcher can end the wait this soon
    finally:
        _reap(promise.runner.process)
    assert isinstance(failed.value.reason, FatalLogLine)
    assert [e.log_class for e in seen] == [LogClass.CUDA_OOM] and watcher.fatal is seen[0]


def test_shipped_rules_are_the_default(rules):
    assert classify_text("RuntimeError: CUDA error: misaligned address").log_class == LogClass.ILLEGAL_ADDRESS
    assert LogWatcher().verdict().log_class == NONE


def test_line_classifier_is_what_classify_text_uses(rules):
    text = _stream("sglang_kv_pool_too_small.log")
    classifier = LineClassifier(rules)
    events = [e for line in text.splitlines() for e in classifier.feed(line)] + classifier.flush()
    assert events == list(classify_text(text, rules).events)


def test_a_host_flooding_warnings_leaves_a_bounded_event_list():
    seen = []
    watcher = LogWatcher(on_event=seen.append, raise_on_fatal=False, max_events=50)
    watcher.submit("".join(f"{SKIP}RuntimeError: workspace too small {i}\n" for i in range(200)))
    watcher.finish()
    assert len(seen) == 200 and len(watcher.events) == 50
