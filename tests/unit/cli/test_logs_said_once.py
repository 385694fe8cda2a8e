"""`inv logs` says a class's explanation and remedy once for lines of it in a row: issue 46, finding 9, a newcomer's
form (h-new19). The autotuner's skipped tactics (12 to 19, one line each, a stack frame between) were 8 blocks of
`>> TMA_FAILURE (warning): a cutlass TMA ...`, the line, `next: run MoE on triton ...`: the same two sentences 8
times, 24 lines around the 8 that differ."""

from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from fleet.cli import logs
from fleet.logs.classify import Event
from fleet.logs.follow import LogLine
from fleet.logs.rules import Severity

TACTIC = ("2026-12-06 11:26:11,073 - WARNING - autotuner.py:25 - flashinfer.jit: [Autotuner]: Skipping tactic "
          "<flashinfer.fused_moe.core.get_cutlass_fused_moe_module.<locals>.MoERunner object at 0x7c70ccce8350> {n}, "
          "due to failure while profiling: [TensorRT-LLM][ERROR] Assertion failed: Failed to initialize cutlass TMA "
          "WS grouped gemm. Error: Error Internal (/workspace/flashinfer/csrc/nv_internal/tensorrt_llm/"
          "cutlass_instantiations/120/gemm_grouped/120/cutlass_kernel_file_gemm_grouped_sm120_M256_BS_group0."
          "generated.cu:60)")
FRAME = "1       0x7c6dd0a58b16 tensorrt_llm::common::throwRuntimeError(char const*, int) + 97"


def test_lines_of_one_class_in_a_row_say_its_explanation_and_remedy_once():
    said: list[LogLine] = []
    for n in (12, 13, 14):
        for text in (TACTIC.format(n=n), FRAME):
            event = Event(1, 1, "TMA_FAILURE", Severity.WARNING, text, "tma-autotuner", 30,  # type: ignore[arg-type]
                          "a cutlass TMA warp-specialised grouped GEMM (MoE) could not start", (),
                          "run MoE on triton (--moe-runner-backend triton)") if text != FRAME else None
            said.append(LogLine("sbx0", f"2026-12-06T11:26:{n - 1:02d}+0000", text, event, "python[415]"))

    def stream(host, opts, follow, since, emit, stop, count=None) -> None:
        for line in said:
            emit(line)

    console = Console(width=400, record=True, file=io.StringIO(), color_system=None)
    logs.run([SimpleNamespace(name="sbx0")], None, False, None, None, False, console,  # type: ignore[arg-type]
             read=stream)
    text = console.export_text()
    assert text.count("next: run MoE on triton") == 1, text
    assert text.count(">> TMA_FAILURE (warning): a cutlass TMA") == 1
    assert text.count(">> TMA_FAILURE (warning): as above") == 2
    assert all(f"> {n}, due to failure" in text for n in (12, 13, 14))  # every line still shown
