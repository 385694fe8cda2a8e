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
    _fault_points(terminalreporter)
    if not inputs and not figures:
        return
    terminalreporter.section("fault suite figures")
    for what, said in inputs:
        terminalreporter.write_line(f"{what:<48} {said[:160]}")
    for name, seconds in figures.items():
        terminalreporter.write_line(f"{name:<48} {seconds:.1f} s")


def _fault_points(terminalreporter):
    """test_fault_points' figures: points per flow, kinds, runs, survived, and each failure found."""
    results = getattr(sys.modules.get("test_fault_points"), "RESULTS", [])
    results = [*results, *getattr(sys.modules.get("test_fault_points_many"), "RESULTS", [])]  # many-host flows
    if not results:
        return
    terminalreporter.section("fault points")
    flows = sorted({r[0] for r in results})
    for flow in flows:
        mine = [r for r in results if r[0] == flow]
        points, kinds = {r[2] for r in mine}, sorted({r[1] for r in mine})
        survived = sum(1 for r in mine if not r[4])
        terminalreporter.write_line(f"{flow:<9} {len(points)} points x {', '.join(kinds)}: {len(mine)} runs, "
                                    f"{survived} survived")
    for flow, kind, n, label, broke in results:
        if broke:
            terminalreporter.write_line(f"FAILED {flow} {kind} point {n} ({label}): {broke[:300]}")
