"""`inv check` in a site checks the site's inventory too (issue 46, finding 7; h-new21's hour): without `-i` it said
`0 errors` while every host task refused the inventory the site names (`defaults.colour: unknown key`, exit 2)."""

from __future__ import annotations

import contextlib
import io
import json

from fleet.cli import check


def test_check_without_i_checks_the_inventory_the_site_names(tmp_path, monkeypatch):
    (tmp_path / "inventory").mkdir()
    inv = tmp_path / "inventory/hosts.yaml"
    inv.write_text("defaults: {colour: red}\nhosts:\n  h1: {address: 10.0.0.1}\n")
    (tmp_path / "fleet-site.yaml").write_text("inventory: inventory/hosts.yaml\n")
    monkeypatch.setenv("FLEET_SITE", str(tmp_path))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = check.command(["glm5-nvfp4"], None, True)
    report = json.loads(out.getvalue())
    assert code == 2
    assert report["inventory"] == str(inv)
    assert report["inventory_errors"] == [f"{inv}:1: defaults.colour: unknown key"]


def test_check_without_i_and_no_inventory_checks_the_playbooks_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_SITE", str(tmp_path))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert check.command(["glm5-nvfp4"], None, True) == 0
    assert json.loads(out.getvalue())["inventory"] is None
