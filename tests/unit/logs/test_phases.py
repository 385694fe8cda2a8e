"""Startup phases from the lines real sglang releases print (0.5.9 and 0.5.23 wordings)."""

from __future__ import annotations

import pytest

from fleet.errors import InputError
from fleet.logs import phases

SGLANG_0_5_9 = [
    ("[2026-12-01 10:00:00 TP0] Init torch distributed begin.", "start"),
    ("[2026-12-01 10:00:03 TP0] Load weight begin. avail mem=94.51 GB", "weight_load"),
    ("Loading safetensors checkpoint shards:  50% Completed | 41/83 [02:00<02:03,  2.93s/it]", "weight_load"),
    ("[2026-12-01 10:05:00 TP0] Running FlashInfer autotune...", "autotune"),
    ("[Autotuner]: Autotuning process starts ...", "autotune"),
    ("[2026-12-01 10:06:00 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=8.10 GB",
     "graph_capture"),
    ("[2026-12-01 10:06:00 TP0] Capture cuda graph bs [1, 2, 4, 8]", "graph_capture"),
    ("[2026-12-01 10:08:00 TP0] Capture cuda graph end. Time elapsed: 120.0 s. mem usage=2.1 GB. avail mem=6.0 GB.",
     "ready"),
]
SGLANG_0_5_23 = [
    ("[2026-12-01 10:00:00 TP0] Init parallel begin.", "start"),
    ("[2026-12-01 10:00:03 TP0] Load weight begin. avail mem=94.51 GB", "weight_load"),
    ("[2026-12-01 10:06:00 TP0] Capture target decode CUDA graph begin. backend=full, bs=[1, 2], avail mem=8.10 GB",
     "graph_capture"),
    ("Capturing batches (bs=512 avail_mem=8.09 GB):   2%|", "graph_capture"),
    # the decode graph's end is not the end of capture: the prefill graph follows
    ("[2026-12-01 10:07:00 TP0] Capture target decode CUDA graph end. elapsed=60.00 s, mem usage=1.00 GB", None),
    ("[2026-12-01 10:07:00 TP0] Capture target prefill CUDA graph begin. backend=breakable, num_tokens=[8]",
     "graph_capture"),
    ("INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)", "ready"),
    ("[2026-12-01 10:09:00] The server is fired up and ready to roll!", "ready"),
]


@pytest.mark.parametrize("line,phase", SGLANG_0_5_9 + SGLANG_0_5_23)
def test_real_lines_mark_their_phase(line, phase):
    assert phases.phase_of(line) == phase


def test_startup_moves_forward_only_through_a_0_5_23_log():
    current = "start"
    seen = []
    for line, _ in SGLANG_0_5_23:
        current = phases.advance(current, line)
        seen.append(current)
    assert seen == ["start", "weight_load", "graph_capture", "graph_capture", "graph_capture", "graph_capture",
                    "ready", "ready"]


def test_silent_jit_builds_are_seen_only_with_ninjas_verbose_lines():
    assert phases.phase_of("[1/4] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -c a.cu") \
        == "jit_compile"
    assert phases.phase_of("[2026-12-01 10:05:00 TP0] Loading JIT ops: trtllm_comm") is None  # no flashinfer says it


def test_a_marker_file_with_an_unknown_phase_or_a_stray_example_is_refused(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text('phases:\n  - name: warmup\n    regex: "x"\n    examples: ["x"]\n'
                   '    sources: [{project: uvicorn, ref: "https://github.com/encode/uvicorn"}]\n')
    with pytest.raises(InputError, match=r"p.yaml:2: phases.0.name: unknown phase 'warmup'"):
        phases.load(bad)
    bad.write_text('phases:\n  - name: ready\n    regex: "fired up"\n    examples: ["up and away"]\n'
                   '    sources: [{project: uvicorn, ref: "https://github.com/encode/uvicorn"}]\n')
    with pytest.raises(InputError, match="example 'up and away' does not match the regex"):
        phases.load(bad)


# Counts the real releases print (playbooks/phases/startup.yaml `counts`): ninja -v's status (flashinfer 0.6.3
# cpp_ext.py run_ninja, with FLASHINFER_JIT_VERBOSE=1), flashinfer 0.6.8.post1+'s tqdm bar while it tunes (its
# redraws joined by carriage returns in one journal line: the last wins), sglang's weight-shard bar (a line each).
COUNTS = [
    ("[2/3] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -c batch_prefill.cu -o x.cuda.o",
     phases.Count("ninja", 2, 3)),
    ("\r[AutoTuner]: Tuning trtllm::fused_moe::gemm1:   0%|          | 0/5 [00:00<?, ?profile/s]"
     "\r[AutoTuner]: Tuning trtllm::fused_moe::gemm1:  40%|████      | 2/5 [00:01<00:01,  1.52profile/s]",
     phases.Count("autotune profiles", 2, 5)),
    ("Loading safetensors checkpoint shards:  12% Completed | 10/83 [00:40<04:52,  4.01s/it]",
     phases.Count("weight shards", 10, 83)),
    ("[2026-12-01 10:00:01 TP0] Init torch distributed begin.", None),
    ("[Autotuner]: Autotuning process starts ...", None),  # 0.6.3 tunes with no count: none is made up
    ("[2026-12-01 10:04:00 TP0] Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]", None),
]


@pytest.mark.parametrize("line,count", COUNTS)
def test_a_count_is_read_only_where_a_real_release_prints_one(line, count):
    assert phases.count_in(line) == count


def test_a_count_regex_without_done_and_total_is_refused(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text('phases: []\ncounts:\n  - name: n\n    regex: "\\\\[(\\\\d+)\\\\]"\n    examples: ["[3]"]\n'
                   '    sources: [{project: ninja, ref: "https://ninja-build.org/manual.html"}]\n')
    with pytest.raises(InputError, match=r"needs two groups \(done, total\), it has 1"):
        phases.load_counts(bad)
