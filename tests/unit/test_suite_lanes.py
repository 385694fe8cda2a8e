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


SANDBOX_FOLDERS = ("integration", "faults", "hostile", "sim", "tools")


def _fixed_sandbox_places(source: str) -> list[str]:
    """What in a test module ties it to one sandbox instance: an address of an instance's host written out
    (172.30.78.10 is the `test` instance's sbx0; a worker's lane has other addresses), an instance named as the
    one to use (config("test"), FLEET_SANDBOX_INSTANCE set to a name), or an instance's folder written out."""
    import ast
    import ipaddress

    from sandbox.config import _INSTANCES, config

    subnets = {config(name).subnet: name for name in _INSTANCES}
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            try:
                address = ipaddress.ip_address(text)
            except ValueError:
                address = None
            for subnet, name in subnets.items():
                if address is not None and address in subnet:
                    found.append(f"line {node.lineno}: {text} (an address of instance {name})")
            if "/var/lib/fleet-sandbox/" in text:
                found.append(f"line {node.lineno}: {text!r} (an instance's folder)")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "config":
            named = [a.value for a in node.args if isinstance(a, ast.Constant) and a.value in _INSTANCES]
            found += [f"line {node.lineno}: config({n!r})" for n in named]
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (isinstance(key, ast.Constant) and key.value == "FLEET_SANDBOX_INSTANCE"
                        and isinstance(value, ast.Constant)):
                    found.append(f"line {node.lineno}: FLEET_SANDBOX_INSTANCE = {value.value!r}")
    return found


def test_no_sandbox_test_assumes_an_instance_or_its_addresses():
    """Issue 50: each worker runs on a lane of its own (its addresses, its folder); a test that writes out the
    `test` instance's address or names an instance would pass serially and fail (or touch another run's fleet)
    in parallel. Read them from the fixtures (sandbox.cfg, sandbox_inventory)."""
    tied = {}
    for folder in SANDBOX_FOLDERS:
        for path in sorted((REPO / "tests" / folder).rglob("*.py")):
            if found := _fixed_sandbox_places(path.read_text()):
                tied[str(path.relative_to(REPO))] = found
    assert tied == {}


def test_the_contract_sees_each_way_a_test_ties_itself_to_an_instance():
    caught = _fixed_sandbox_places(
        'ADDR = "172.30.78.10"\n'
        'env = {"FLEET_SANDBOX_INSTANCE": "test"}\n'
        'cfg = config("dev")\n'
        'INV = "/var/lib/fleet-sandbox/test/inventory.yaml"\n')
    assert [line.split(":")[0] for line in caught] == ["line 1", "line 2", "line 3", "line 4"], caught
    assert _fixed_sandbox_places('BAD = "172.30.75.10; touch /tmp/pwned"\nOUT = "10.1.230.174"\n') == []
