"""FLEET_WHEELHOUSE wins over the wheelhouse an inventory names (inventory/README.md), and a deploy that builds from
it now says so where they differ: an operator whose shell sets it for the real fleet deployed pins to the sandbox
from the real wheelhouse without a word (the README's tour says the sandbox's own is read), issue 46, finding 8 (an
override unsaid; the fifteenth newcomer's hour)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fleet import cli
from fleet.cli import deploy
from fleet.inventory import Host

HOST = Host(name="sbx0", address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(), source=Path("sandbox.yaml"),
            wheelhouse=Path("/var/lib/fleet-sandbox/demo/wheelhouse"))


def test_fleet_wheelhouse_over_the_inventorys_is_said(monkeypatch, capsys):
    monkeypatch.setenv("FLEET_WHEELHOUSE", "/srv/wheels")
    hosts = [HOST, dataclasses.replace(HOST, name="sbx1")]
    cli.use_wheelhouse(hosts)
    monkeypatch.setattr(deploy.wheels, "prepare", lambda *a: None)
    book = type("Book", (), {"packages": {"sglang": "0.5.9"}})()
    deploy.fill_wheelhouse(hosts, book, Path("p.yaml"), None)  # type: ignore[arg-type]
    assert capsys.readouterr().err == ("fleet: FLEET_WHEELHOUSE=/srv/wheels over the wheelhouse "
                                       "/var/lib/fleet-sandbox/demo/wheelhouse the inventory names (sbx0, sbx1)\n")


def test_nothing_is_said_where_they_agree_or_the_inventory_names_none(monkeypatch, capsys):
    monkeypatch.setenv("FLEET_WHEELHOUSE", "/var/lib/fleet-sandbox/demo/wheelhouse")
    cli.wheelhouse_over_inventory([HOST, dataclasses.replace(HOST, name="gpu1", wheelhouse=None)])
    monkeypatch.delenv("FLEET_WHEELHOUSE")
    cli.use_wheelhouse([HOST])  # the inventory's, set by fleet: nothing replaced
    cli.wheelhouse_over_inventory([HOST])
    monkeypatch.delenv("FLEET_WHEELHOUSE")
    assert capsys.readouterr().err == ""
