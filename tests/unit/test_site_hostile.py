"""A site whose deploy-deciding files others may write, as an attacker plants it (found by review, issue 45)."""

from __future__ import annotations

import pytest
from test_site import here, own_config, planted  # noqa: F401

from fleet.errors import InputError


def test_a_symlinked_playbooks_folder_anyone_may_write_is_refused(tmp_path, here, own_config):  # noqa: F811
    shared = planted(tmp_path)
    team = tmp_path / "team-playbooks"
    team.mkdir()
    team.chmod(0o777)  # anyone may plant sglang.yaml (api_key: {env: HF_TOKEN}) or sglang.lock here
    (shared / "playbooks").symlink_to(team)
    with pytest.raises(InputError, match="refused"):
        here(shared / "operator/work")


def test_a_symlinked_marker_anyone_may_write_is_refused(tmp_path, here, own_config):  # noqa: F811
    shared = planted(tmp_path)
    other = tmp_path / "anyone.yaml"
    other.write_text("inventory: /tmp/anyone/hosts.yaml\n")
    other.chmod(0o666)
    (shared / "fleet-site.yaml").unlink()
    (shared / "fleet-site.yaml").symlink_to(other)
    with pytest.raises(InputError, match="refused"):
        here(shared / "operator/work")


def test_the_inventory_the_marker_names_is_checked_too(tmp_path, here, own_config):  # noqa: F811
    shared = planted(tmp_path)
    (shared / "fleet-site.yaml").write_text("inventory: hosts/prod.yaml\n")
    (shared / "hosts").mkdir()
    (shared / "hosts").chmod(0o777)
    with pytest.raises(InputError, match="refused"):
        here(shared / "operator/work")


def test_a_playbook_or_lock_anyone_may_write_is_refused(tmp_path, here, own_config):  # noqa: F811
    shared = planted(tmp_path)
    (shared / "playbooks").mkdir()
    (shared / "playbooks/sglang.lock").write_text("locked: []\n")
    (shared / "playbooks/sglang.lock").chmod(0o666)  # anyone may put their wheel's sha256 in it
    with pytest.raises(InputError, match="refused"):
        here(shared / "operator/work")
