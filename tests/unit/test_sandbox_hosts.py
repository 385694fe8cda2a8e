"""sandbox.hosts: what `inv sandbox.cut sbx1` and its kin say when the host is not there (pure: no fleet is
brought up; the state folder is a temporary one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.config import config
from sandbox.hosts import Sandbox, SandboxError

REPO = Path(__file__).resolve().parents[2]


def test_a_host_of_a_fleet_that_is_not_up_says_so(tmp_path, monkeypatch):
    """The newcomer's second hour: after the fleet went down, `inv sandbox.cut sbx1` said "no sandbox host named
    'sbx1' (have: )"; it now says no fleet is up and how to bring one up."""
    monkeypatch.setenv("FLEET_SANDBOX_HOME", str(tmp_path))
    sandbox = Sandbox(config())  # whichever instance: its state folder is this test's own
    name = sandbox.cfg.instance
    with pytest.raises(SandboxError) as err:
        sandbox.host("sbx1")
    assert str(err.value) == (f"no sandbox fleet ({name}) is up, so no host 'sbx1': bring it up with `inv sandbox.up` "
                              "(or `inv demo`)")
    sandbox.cfg.state_file.parent.mkdir(parents=True, exist_ok=True)
    sandbox.cfg.state_file.write_text(json.dumps({"hosts": []}))
    with pytest.raises(SandboxError, match=rf"no sandbox fleet \({name}\) is up"):
        sandbox.host("sbx1")


@pytest.mark.parametrize("args", [["sandbox.cut", "sbx9"], ["sandbox.heal", "sbx9"], ["sandbox.kill", "sbx9"],
                                  ["sandbox.start", "sbx9"], ["sandbox.up", "--profile", "nosuch"]])
def test_a_host_or_profile_the_sandbox_does_not_have_is_bad_input_exit_2(args, tmp_path):
    """Newcomer h-new17: a typo in a sandbox task's host or profile exited 1 (a failed host's code), though its
    --help says 2 for bad input, as `--hosts 0` already was (issue 46, finding 3). Nothing is brought up: the
    state folder is this test's own, and the refusal comes before anything is made."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "FLEET_SANDBOX_HOME": str(tmp_path),
           "PYTHONPATH": str(REPO)}
    done = subprocess.run([str(Path(sys.executable).parent / "inv"), *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert not list(tmp_path.glob("**/nspawn.pid"))
