"""A tune records every trial in the winning release; `inv history` showed the first trial that did not serve as
that release's failure (`TMA_FAILURE` beside rung no-fusion) and `inv status` the last (`PERF_REGRESSION`, a
trial that lost), as if the rung that serves had failed. Each failure is now its attempt's, named by its rung.
The attempts are those of a tune of glm5-nvfp4 on the sandbox's sbx0 (rtx-pro-6000-x8-proxmox), 2026-12-06."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from fleet.cli import deploy_view, status_view
from fleet.host.attempts import FailedAttempt, failed_attempts
from fleet.host.releases import Release
from fleet.inventory import Host
from fleet.multihost import status

TUNED = [{"rung": "fusion-sm120", "outcome": "TMA_FAILURE", "evidence": "Failed to initialize cutlass TMA WS"},
         {"rung": "no-fusion", "outcome": "READY"},
         {"rung": "triton-moe", "outcome": "PERF_REGRESSION", "evidence": "863 tok/s < 90% of 3,560 tok/s"},
         {"rung": "no-custom-allreduce", "outcome": "READY"},
         {"rung": "lower-mem-fraction", "outcome": "READY"},
         {"rung": "higher-mem-fraction", "outcome": "CUDA_OOM", "evidence": "torch.OutOfMemoryError"},
         {"rung": "tp4-pp2", "outcome": "PERF_REGRESSION", "evidence": "2,015 tok/s < 90% of 3,560 tok/s"},
         {"rung": "safe", "outcome": "PERF_REGRESSION", "evidence": "626 tok/s < 90% of 3,560 tok/s"},
         {"rung": "no-fusion", "outcome": "READY"}]
HOST = Host(name="sbx0", address="a", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(), source=Path("x"))


def test_the_failed_attempts_of_a_release_are_each_named_by_its_number_and_rung():
    assert [(f.number, f.rung, f.outcome) for f in failed_attempts(TUNED)] == [
        (1, "fusion-sm120", "TMA_FAILURE"), (3, "triton-moe", "PERF_REGRESSION"),
        (6, "higher-mem-fraction", "CUDA_OOM"), (7, "tp4-pp2", "PERF_REGRESSION"), (8, "safe", "PERF_REGRESSION")]
    assert failed_attempts([{"rung": "plain", "outcome": "READY"}, "junk", {"outcome": "apply"}]) == []
    assert failed_attempts("not a list") == []
    assert failed_attempts([{"outcome": "HANG", "evidence": 7}]) == [FailedAttempt(1, "?", "HANG", None)]


def test_history_names_the_trial_that_failed_never_the_release_that_won():
    tuned = Release(id="20261206T035016Z-c40c", host="sbx0", playbook="glm5-nvfp4", playbook_sha256="x",
                    created="2026-12-06T03:50:16+00:00", status="ok", rung="no-fusion", attempts=TUNED)
    console = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    deploy_view.render_history("sbx0", [tuned], tuned.id, console)
    row = next(line for line in console.export_text().splitlines() if line.startswith(tuned.id))
    assert "fusion-sm120: TMA_FAILURE +4" in row and " no-fusion " in row, row


def test_status_names_the_rung_of_the_last_failed_attempt_on_the_board_and_in_the_detail():
    manifest = {"id": "r", "playbook": "glm5-nvfp4", "rung": "no-fusion", "files": {}, "attempts": TUNED}
    m = "@@fleet-status@@\n"
    row = status.parse(HOST, "ActiveState=active\n" + m + json.dumps(manifest) + "\n" + m + "200\n" + m + "\n" + m)
    assert (row.last_failure, row.last_failure_rung) == ("PERF_REGRESSION", "safe")
    assert row.last_failure_evidence == "626 tok/s < 90% of 3,560 tok/s"
    board = Console(width=250, record=True, file=io.StringIO(), color_system=None)
    board.print(status_view.table_of([row], width=250))
    assert "safe: PERF_REGRESSION" in board.export_text()
    detail = Console(width=250, record=True, file=io.StringIO(), color_system=None)
    status_view.render_detail(row, detail)
    assert "last failure:          safe: PERF_REGRESSION" in detail.export_text()


def detail_of(attempts: list[dict[str, object]], width: int = 250) -> str:
    manifest = {"id": "r", "playbook": "glm5-nvfp4", "rung": "no-fusion", "files": {}, "attempts": attempts}
    m = "@@fleet-status@@\n"
    row = status.parse(HOST, "ActiveState=active\n" + m + json.dumps(manifest) + "\n" + m + "200\n" + m + "\n" + m)
    detail = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    status_view.render_detail(row, detail)
    return detail.export_text()


def test_a_tunes_losing_trial_is_shown_as_the_tunes_choice_with_no_remedy_to_apply():
    """`inv status --detail` right after a tune advised "compare rungs with inv tune" for the trial that lost.
    TUNED as a tune now records it: each losing trial names the rung the tune kept."""
    recorded = [{**a, "lost_to": "no-fusion"} if a["outcome"] == "PERF_REGRESSION" else a for a in TUNED]
    text = detail_of(recorded)
    assert "compare rungs" not in text
    assert "next: nothing to do: a tune's trial; the tune kept rung no-fusion, which was faster" in text
    # a deploy's rung below the gate (no tune kept another) keeps its remedy
    assert "next: compare rungs with inv tune" in detail_of(TUNED)


def test_the_detail_folds_a_long_evidence_and_remedy_under_themselves():
    """At 120 columns the TMA failure's evidence and remedy ran on from the terminal's first column."""
    evidence = ("RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: Failed to initialize cutlass TMA WS grouped "
                "gemm. Error: Error Internal (/workspace/flashinfer/csrc/nv_internal/tensorrt_llm/"
                "cutlass_instantiations/120/gemm_grouped/120/cutlass_kernel_file_gemm_grouped_sm120_M256_BS_group0"
                ".generated.cu:60)")  # as sbx0 recorded it, 2026-12-06
    lines = detail_of([{**TUNED[0], "evidence": evidence}, TUNED[1]], width=120).splitlines()
    below = lines[next(i for i, line in enumerate(lines) if "last failure:" in line) + 1:]
    assert below[0].startswith("    evidence: RuntimeError")
    assert any(line.startswith("    next: run MoE") for line in below)
    assert all(line.startswith("    ") and len(line) <= 120 for line in below), below
