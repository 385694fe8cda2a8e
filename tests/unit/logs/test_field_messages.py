"""Messages operators posted in public issues (tests/fixtures/field/, each with its source): every failure gets its
specific class, a fatal verdict and a remedy (a ladder step where the thread's fix is one); no excerpt of a server
that went on working is fatal. The labelling rule is in tests/fixtures/field/README.md (labels set before the
classifier ran)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.logs.classify import classify_line, classify_text
from fleet.logs.rules import LogClass, Severity

FIELD = Path(__file__).resolve().parents[2] / "fixtures" / "field"
ROWS = [json.loads(line) for line in (FIELD / "failures.jsonl").read_text().splitlines()]
HEALTHY = [json.loads(line) for line in (FIELD / "healthy.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_public_issue_message_gets_its_class_and_a_remedy(row):
    verdict = classify_text(row["text"])
    assert verdict.log_class in row["expect"], (verdict.log_class, row["text"])
    assert verdict.fatal and verdict.event is not None and verdict.event.remedy
    if row["steps"]:  # the thread's fix is a ladder step: the decided rule names it
        assert set(row["steps"]) & set(verdict.event.remedies), (verdict.event.rule, verdict.event.remedies)


@pytest.mark.parametrize("row", HEALTHY, ids=[r["id"] for r in HEALTHY])
def test_what_a_working_server_prints_is_never_fatal(row):
    verdict = classify_text(row["text"])
    assert not verdict.fatal, (verdict.log_class, verdict.event.text if verdict.event else None)


def test_the_corpus_is_large_enough_and_every_row_cites_its_thread():
    assert len(ROWS) >= 60 and len(HEALTHY) >= 10
    for row in ROWS + HEALTHY:
        assert row["source"].startswith("https://github.com/"), row["id"]
    assert len({r["id"] for r in ROWS + HEALTHY}) == len(ROWS) + len(HEALTHY)
    assert all(r["remedy"] and r["expect"] for r in ROWS)


def test_rc_watchdog_lock_is_a_gpu_fault_not_a_quiet_kernel_line():
    match = classify_line("[  610.299897] NVRM: krcWatchdog_IMPL: RC watchdog: GPU is probably locked!  "
                          "Notify Timeout Seconds: 7")
    assert match is not None and match.rule.log_class is LogClass.GPU_FAULT and match.severity is Severity.FATAL


def test_deepgemm_without_a_recipe_for_the_arch_is_arch_unsupported_with_a_ladder_step():
    match = classify_line("RuntimeError: Assertion error (/workspace/.deps/deepgemm-src/csrc/apis/layout.hpp:59): "
                          "Unknown SF transformation")
    assert match is not None and match.rule.log_class is LogClass.ARCH_UNSUPPORTED
    assert "moe_backend_triton" in match.rule.remedies


def test_shared_memory_a_tile_cannot_have_is_a_resource_refusal_with_a_ladder_step():
    match = classify_line("ValueError: Not enough SMEM or TMEM capacity for selected tile size")
    assert match is not None and match.rule.name == "arch_kernel_resources"
    assert match.rule.remedies == ("moe_backend_triton",)


def test_cublas_refusal_under_the_autotuner_stays_a_warning():
    line = ("[Autotuner]: Skipping tactic <Runner object at 0x7f> 3, due to failure while profiling: "
            "bmm_fp8_internal_cublaslt failed: CUBLAS_STATUS_NOT_SUPPORTED")
    match = classify_line(line)
    assert match is not None and match.rule.name == "library_refuses_config" and match.severity is Severity.WARNING


def test_sm75_requirement_on_a_modern_gpu_reads_as_a_toolkit_too_old():
    match = classify_line("RuntimeError: FlashInfer requires GPUs with sm75 or higher")
    assert match is not None and match.rule.name == "toolkit_too_old_for_gpu"
    assert match.rule.log_class is LogClass.NO_KERNEL_IMAGE and "12.9" in (match.rule.remedy or "")


def test_peer_gone_after_another_rank_died_names_the_cause_line():
    # the first line (vllm#47436) killed one rank; the second (sglang#15792) is what the surviving rank then printed
    text = ("[2026-07-02 10:00:01 TP1] RuntimeError: Assertion error (/workspace/.deps/deepgemm-src/csrc/apis/"
            "layout.hpp:59): Unknown SF transformation\n"
            "[2026-07-02 10:00:02 TP0] Error receiving requests in scheduler event loop: [/pytorch/third_party/gloo/"
            "gloo/transport/tcp/pair.cc:547] Connection closed by peer [10.244.24.18]:54661\n")
    verdict = classify_text(text)
    assert verdict.log_class == LogClass.ARCH_UNSUPPORTED and verdict.event is not None and verdict.event.line == 1
    assert verdict.follows is not None and verdict.follows.line == 2 and verdict.follows.rule == "peer_rank_gone"
    assert verdict.to_json()["consequence"]["line"] == 2


def test_peer_gone_alone_still_decides_as_a_comm_failure():
    verdict = classify_text("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by "
                            "peer [18.25.6.30]:28048\n")
    assert verdict.log_class == LogClass.COMM_FAILURE and verdict.follows is None
