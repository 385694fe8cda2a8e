"""`inv check` in rounds and a group mistyped on a host (issue 46, finding 7; h-new21's hour): a playbook with any
error had its unresolvable secrets (which the deploy refuses) said only once every error was fixed; a host's
`groups: [canry]` beside a defined `canary` said nothing, and `--group canary` then left that host out."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from fleet.cli import check
from fleet.deploy import inputs

BOOK = """name: sec
model: {path: /models/x}
serve:
  api_key: {env: FLEET_TEST_NO_KEY}
  env: {OTHER: {env: FLEET_TEST_NO_OTHER}}
ladder:
  - name: plain
    env: {RUNG_TOKEN: {env: FLEET_TEST_NO_RUNG}}
budgets: {start: -5}
"""


def test_a_playbook_with_an_error_still_has_its_secrets_checked(tmp_path, monkeypatch):
    for name in ("FLEET_TEST_NO_KEY", "FLEET_TEST_NO_OTHER", "FLEET_TEST_NO_RUNG"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "sec.yaml"
    path.write_text(BOOK)
    found = inputs.check_playbook(path)
    assert any("budgets.start" in p.text for p in found.errors), found.errors
    said = " ".join(p.text for p in found.warnings)
    for name in ("FLEET_TEST_NO_KEY", "FLEET_TEST_NO_OTHER", "FLEET_TEST_NO_RUNG"):
        assert f"${name} is not set" in said, said


def _report(inventory: Path) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check.command(["glm5-nvfp4"], str(inventory), True)
    return json.loads(out.getvalue())


@pytest.mark.parametrize("typed,near", [("canry", "canary"), ("Canary", "canary")])
def test_a_host_group_near_a_defined_one_is_a_warning(tmp_path, typed, near):
    inv = tmp_path / "hosts.yaml"
    inv.write_text(f"groups:\n  canary: {{hosts: [h2]}}\nhosts:\n  h1:\n    address: 10.0.0.1\n    groups: [{typed}]\n"
                   "  h2: {address: 10.0.0.2}\n")
    report = _report(inv)
    assert report["inventory_errors"] == []
    assert report["inventory_warnings"] == [
        f"{inv}:6: hosts.h1.groups: {typed} is no group of groups:; did you mean {near}? (--group {near} leaves h1 "
        f"out; a group named only by its hosts has no settings)"]


def test_a_group_named_only_by_hosts_and_near_none_is_fine(tmp_path):
    inv = tmp_path / "hosts.yaml"
    inv.write_text("groups:\n  canary: {hosts: [h2]}\nhosts:\n  h1: {address: 10.0.0.1, groups: [rack-a3]}\n"
                   "  h2: {address: 10.0.0.2}\n")
    assert _report(inv)["inventory_warnings"] == []
