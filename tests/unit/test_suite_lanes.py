"""The parallel suite's own rules (tests/conftest.py): which tests share a worker, and who holds a sandbox lane."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _root_conftest():
    """tests/conftest.py by path: in a worker that ran another folder's tests, "conftest" is that folder's."""
    spec = importlib.util.spec_from_file_location("tests_root_conftest_lanes", REPO / "tests" / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_module_is_one_scope_and_the_fault_matrix_is_spread_test_by_test():
    root = _root_conftest()
    matrix = "tests/faults/test_fault_points.py::test_every_fault_point_keeps_the_invariant[deploy-kill]"
    module_test = "tests/integration/test_deploy.py::test_dry_run_touches_nothing"
    assert root._spread(matrix)  # the module says SPREAD_OVER_WORKERS = True
    assert not root._spread(module_test)
    assert not root._spread("tests/integration/no_such_module.py::test_x")


def test_a_lane_held_by_a_live_run_is_not_taken_and_a_killed_run_holds_nothing():
    root = _root_conftest()
    lane = f"unit-{uuid.uuid4().hex[:8]}"  # a lock of its own, not a real lane another run may hold
    other = subprocess.Popen(
        [sys.executable, "-c",
         "import importlib.util, sys, time\n"
         f"spec = importlib.util.spec_from_file_location('c', {str(REPO / 'tests' / 'conftest.py')!r})\n"
         "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
         f"print(m.hold({lane!r}), flush=True)\n"
         "time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "True"
        assert root.hold(lane) is False  # another live run has it
    finally:
        other.kill()  # as SIGKILL does to a run in the middle
        other.wait()
        other.stdout.close()
    assert root.hold(lane) is True  # the kernel let go of the dead run's lock
    assert root.hold(lane) is True  # and this process holding it already is no conflict
    os.close(root._HELD.pop(lane))
    (Path(tempfile.gettempdir()) / f"fleet-sandbox-locks-{os.getuid()}" / f"{lane}.lock").unlink()
