"""sandbox.hosts: what `inv sandbox.cut sbx1` and its kin say when the host is not there (pure: no fleet is
brought up; the state folder is a temporary one)."""

from __future__ import annotations

import json

import pytest

from sandbox.config import config
from sandbox.hosts import Sandbox, SandboxError


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
