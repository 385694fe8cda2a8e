"""What the command line loads: rich only where something is drawn. `--json` paths, `inv --list`, `--help`
and a bad-input error never import it (tasks.py imports only fleet.cli; each task its own command module;
each command module its view only on the path that draws). Run as a user runs `inv`, in a fresh process
per case, against the sandbox where a task needs hosts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from fleetcli import REPO, llama_playbook

# After the task ends (invoke exits through sys.exit), say whether any rich module was imported.
RUN = """
import atexit, os, sys
atexit.register(lambda: os.write(2, b"\\nfleet-test: rich=%d\\n"
                                   % any(m == "rich" or m.startswith("rich.") for m in sys.modules)))
from fleet.cli.program import main  # what the venv's `inv` runs
sys.argv = ["inv", *sys.argv[1:]]
main()
"""


def run_inv(*args: str) -> tuple[int, str, bool]:
    """(exit code, stdout, whether rich was loaded) of `inv ARGS...` in the repository."""
    proc = subprocess.run([sys.executable, "-c", RUN, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "120"})
    marks = [line for line in proc.stderr.splitlines() if line.startswith("fleet-test: rich=")]
    assert marks, f"inv {' '.join(args)} ended before its exit hook: {proc.stderr[-2000:]}"
    return proc.returncode, proc.stdout, marks[-1].endswith("=1")


@pytest.mark.parametrize("args", [["--list"], ["probe", "--help"], ["deploy", "--help"],
                                  ["classify", "tests/fixtures/logs/sglang_kv_pool_too_small.log", "--json"],
                                  ["deploy", "-i", "/nonexistent/hosts.yaml", "--json"]])
def test_no_rich_without_hosts(args):
    code, out, rich = run_inv(*args)
    assert not rich, f"inv {' '.join(args)} (exit {code}) imported rich"


def test_the_control_drawing_a_table_does_load_rich():
    code, out, rich = run_inv("classify", "tests/fixtures/logs/sglang_kv_pool_too_small.log")
    assert rich and out.strip()


def _json_run(sandbox, task: list[str]) -> None:
    code, out, rich = run_inv(task[0], "-i", str(sandbox.cfg.inventory_path), *task[1:], "--json")
    assert out.lstrip().startswith("{"), f"inv {' '.join(task)} --json (exit {code}) printed {out[:300]!r}"
    assert not rich, f"inv {' '.join(task)} --json (exit {code}) imported rich"


@pytest.mark.parametrize("task", [["probe"], ["exec", "--all", "--yes", "--cmd", "true"], ["status"],
                                  ["history", "--host", "sbx2"]])
def test_no_rich_on_the_json_paths_of_host_tasks(task, sandbox):
    _json_run(sandbox, task)


def test_no_rich_on_a_deploy_dry_run_with_json(sandbox, tmp_path):
    book = llama_playbook(tmp_path, [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}}], name="llama-json")
    _json_run(sandbox, ["deploy", "--host", "sbx2", "--playbook", str(book), "--dry-run"])


def test_no_rich_when_logs_stream_json_lines(sandbox):
    code, out, rich = run_inv("logs", "-i", str(sandbox.cfg.inventory_path), "--host", "sbx2", "--since", "5m",
                              "--json")
    assert all(line.startswith("{") for line in out.splitlines()), out[:300]
    fatal = any(json.loads(line)["severity"] == "fatal" for line in out.splitlines())
    assert code == (1 if fatal else 0), out[-300:]  # 1 exactly when a fatal line is shown (an earlier test's)
    assert not rich
