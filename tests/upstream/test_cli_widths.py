"""Every view of `inv audit`, `inv patch --check` and `inv classify` fits COLUMNS (no line longer, at 80 and 200),
and with --wide nothing is cut: every path, set name, function and evidence line whole, however narrow the terminal.
Run as a user runs them, over the real releases of the corpus (no host)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INV = str(Path(sys.executable).parent / "inv")
LOG = REPO / "tests/fixtures/logs/sglang_sm120_allreduce_fusion_crash.log"
VIEWS = {
    "audit": ["audit", "--sglang", "0.5.23", "--flashinfer", "0.7.4", "--sm", "120", "--set",
              "sm120-allreduce-fusion", "--offline"],
    "patch": ["patch", "--check", "--against", "sglang==0.5.9,flashinfer-python==0.6.3", "--set",
              "sm120-allreduce-fusion", "--offline"],
    "classify": ["classify", str(LOG), "--sglang", "0.5.9"],
}
# what each view must show whole with --wide (what the narrow views shorten: paths, set names, functions, evidence)
WHOLE = {
    "audit": ["sglang/srt/layers/layer_boundary/residual/add_norm.py", "sm120-allreduce-fusion",
              "_flashinfer_allreduce_fusion_auto_enable", "get_platform().is_sm90 or get_platform().is_sm100",
              "source: https://github.com/flashinfer-ai/flashinfer/pull/3385"],
    "patch": ["flashinfer/data/include/flashinfer/comm/trtllm_allreduce_fusion.cuh", "trtllm kernel gates (< 1200)",
              "sglang runtime gate: SM120 flag", "sm120-allreduce-fusion"],
    "classify": ["RuntimeError: No supported CUDA architectures found for major versions [9, 10].",
                 "from sglang 0.5.9 srt/entrypoints/engine.py:869 (launch_phase_sigquit_handler)"],
}


def _run(args: list[str], columns: int) -> list[str]:
    p = subprocess.run([INV, *args], cwd=REPO, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "COLUMNS": str(columns)})
    assert p.returncode in (0, 1) and p.stdout, p.stderr
    return p.stdout.splitlines()


@pytest.mark.parametrize("columns", [80, 200])
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_no_line_is_longer_than_the_terminal(matrix, view, columns):
    lines = _run(VIEWS[view], columns)
    assert max(len(line) for line in lines) <= columns, "\n".join(line for line in lines if len(line) > columns)
    if columns == 200:  # room for everything: nothing shortened either
        assert not any("…" in line for line in lines), "\n".join(lines)


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_wide_cuts_nothing_even_at_80_columns(matrix, view):
    lines = _run([*VIEWS[view], "--wide"], 80)
    text = "\n".join(lines)
    assert "…" not in text and "~" not in text
    for whole in WHOLE[view]:
        assert any(whole in line for line in lines), f"{whole!r} not whole on one line of:\n{text}"
    assert max(len(line) for line in lines) > 80  # it took the room it needed instead of folding
