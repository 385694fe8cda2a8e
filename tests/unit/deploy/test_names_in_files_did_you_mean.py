"""A host name mistyped in a file (a playbook's router.host, a group's hosts: list) says the nearest one, as a
mistyped --host does (issue 46, finding 6; h-new24's hour): `router.host: sbx00` was `sbx00 is no host of the
inventory` in `inv check`, `no host named 'sbx00' in the inventory` in the deploy, and a group's `hosts: [sbx00]`
`host 'sbx00' is not defined in this file`, each leaving the operator to find sbx0 by eye."""

from __future__ import annotations

import pytest
from test_check import BOOK, lines, run

from fleet import playbook
from fleet.errors import InputError
from fleet.inventory import load as load_inventory
from fleet.multihost import router_plan

ROUTED = BOOK.replace("name: t", "name: t\nserve: {host: 0.0.0.0, api_key: {env: K}}\nrouter: {host: sbx00, port: "
                      "30080}")


def test_check_names_the_nearest_router_host(tmp_path):
    found = [line for line in lines(run(tmp_path, ROUTED, hosts={"sbx0", "sbx1"})) if "router.host" in line]
    assert found == ["t.yaml:3: router.host: sbx00 is no host of the inventory; did you mean sbx0?"], found


def test_check_says_no_nearest_where_none_is_near(tmp_path):
    found = [line for line in lines(run(tmp_path, ROUTED.replace("sbx00", "gpu7"), hosts={"sbx0", "sbx1"}))
             if "router.host" in line]
    assert found == ["t.yaml:3: router.host: gpu7 is no host of the inventory"], found


def test_the_deploy_names_the_nearest_router_host(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_SANDBOX_ONLY", "0")  # nothing is sent here
    (tmp_path / "inventory").mkdir()
    inv = tmp_path / "inventory" / "hosts.yaml"
    inv.write_text("hosts:\n  sbx0: {address: 127.0.0.1}\n  sbx1: {address: 127.0.0.2}\n")
    path = tmp_path / "t.yaml"
    path.write_text(ROUTED)
    with pytest.raises(InputError, match=r"router.host: no host named 'sbx00' in the inventory \(hosts.yaml and the "
                                         r"other files of its folder\); did you mean sbx0\?"):
        router_plan.router_host(playbook.load(path), path, [load_inventory(inv).hosts["sbx1"]])


def test_a_groups_member_mistyped_names_the_nearest_host(tmp_path):
    (tmp_path / "hosts.yaml").write_text("groups:\n  canary: {hosts: [sbx00]}\nhosts:\n  sbx0: {address: 127.0.0.1}\n")
    with pytest.raises(InputError, match=r"groups.canary.hosts: host 'sbx00' is not defined in this file; did you "
                                         r"mean sbx0\?"):
        load_inventory(tmp_path / "hosts.yaml")
