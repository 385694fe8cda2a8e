"""The parallel suite's own rules (tests/conftest.py): which tests share a worker, and who holds a sandbox lane."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
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
        stdout=subprocess.PIPE, text=True, cwd=REPO,
        env={k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "FLEET_TEST_LANE_OF")})
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
    (root._LOCKS / f"{lane}.lock").unlink()


def _child(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh python that loaded tests/conftest.py by path as `m`, with `env` over this one's."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("PYTEST_XDIST_WORKER", "FLEET_TEST_LANE_OF", "FLEET_STATE_DIR", "FLEET_WHEELHOUSE")}
    prelude = ("import importlib.util\n"
               f"spec = importlib.util.spec_from_file_location('c', {str(REPO / 'tests' / 'conftest.py')!r})\n"
               "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n")
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, cwd=REPO,
                          env={**base, **env}, timeout=120)


def test_a_process_a_worker_starts_takes_no_lane_of_its_own():
    """It inherits the worker's PYTEST_XDIST_WORKER and its lane: taking another would hold a lane a second run
    needs (the review's repro: gw0 on lane6, a child loading conftest took lane7)."""
    lane = f"unit-{uuid.uuid4().hex[:8]}"
    child = _child("import os; print(sorted(m._HELD), os.environ['FLEET_SANDBOX_INSTANCE'])",
                   PYTEST_XDIST_WORKER="gw0", FLEET_TEST_LANE_OF="1", FLEET_SANDBOX_INSTANCE="lane6",
                   FLEET_SANDBOX_LANES=lane)
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["[]", "lane6"]


def test_the_state_folders_a_run_makes_are_removed_at_its_end():
    child = _child("import os; made = [os.environ['FLEET_STATE_DIR'], os.environ['FLEET_WHEELHOUSE']]\n"
                   "assert all(os.path.isdir(d) for d in made)\n"
                   "m.pytest_unconfigure(None); print(all(not os.path.exists(d) for d in made))")
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "True"


def test_a_lane_name_that_is_no_instance_is_refused_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "1", "-p", "no:cacheprovider",
                           "tests/unit/test_suite_lanes.py"], capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**{k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"},
                               "FLEET_SANDBOX_LANES": "lane6,lane8"})
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "FLEET_SANDBOX_LANES: no sandbox instance lane8" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
