"""The fault suite shares the integration tests' CLI and SSH helpers (tests/integration)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))


def pytest_terminal_summary(terminalreporter):
    """The suite's figures for a person reading the run: each refused input with fleet's own words, and the
    network timings measured."""
    inputs = getattr(sys.modules.get("test_fault_input"), "RESULTS", [])
    figures = getattr(sys.modules.get("test_fault_network"), "FIGURES", {})
    inputs = [*inputs, *getattr(sys.modules.get("test_fault_secrets"), "RESULTS", [])]
    if not inputs and not figures:
        return
    terminalreporter.section("fault suite figures")
    for what, said in inputs:
        terminalreporter.write_line(f"{what:<48} {said[:160]}")
    for name, seconds in figures.items():
        terminalreporter.write_line(f"{name:<48} {seconds:.1f} s")
