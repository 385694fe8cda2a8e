"""The site: found from any folder of it (fleet-site.yaml, as invoke finds tasks.py) or FLEET_SITE, else the clone;
its inventory, playbooks beside the shipped ones, state and defaults; the shipped data read from the clone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleet import playbook, site
from fleet.errors import InputError
from fleet.patches import sets as patchsets


@pytest.fixture
def here(monkeypatch):
    monkeypatch.delenv("FLEET_SITE", raising=False)
    monkeypatch.delenv("FLEET_STATE_DIR", raising=False)

    def go(folder: Path) -> site.Site:
        monkeypatch.chdir(folder)
        return site.find()
    return go


def test_a_site_is_found_from_a_subfolder_with_its_defaults(tmp_path, here):
    (tmp_path / "fleet-site.yaml").write_text("inventory: hosts/prod.yaml\noffline: true\n")
    (tmp_path / "a/b").mkdir(parents=True)
    found = here(tmp_path / "a/b")
    assert found.root == tmp_path and found.inventory == tmp_path / "hosts/prod.yaml"
    assert found.defaults.offline is True and found.state == tmp_path / ".fleet"
    assert found.playbooks == [tmp_path / "playbooks", site.SHIPPED / "playbooks"]


def test_fleet_site_wins_and_must_exist(tmp_path, here, monkeypatch):
    (tmp_path / "other").mkdir()
    monkeypatch.setenv("FLEET_SITE", str(tmp_path / "other"))
    found = here(tmp_path)
    assert found.root == tmp_path / "other" and found.inventory == tmp_path / "other/inventory/hosts.yaml"
    monkeypatch.setenv("FLEET_SITE", str(tmp_path / "missing"))
    with pytest.raises(InputError, match="FLEET_SITE=.*missing: no such folder"):
        site.find()


def test_outside_any_site_the_clone_is_the_site(tmp_path, here):
    assert here(tmp_path).root == site.SHIPPED
    assert here(site.SHIPPED / "docs").playbooks == [site.SHIPPED / "playbooks"]


def test_a_bad_defaults_file_names_its_line(tmp_path, here):
    (tmp_path / "fleet-site.yaml").write_text("inventory: x.yaml\nofline: true\n")
    with pytest.raises(InputError, match=r"fleet-site.yaml:2: ofline: unknown key"):
        here(tmp_path)


def test_every_problem_of_the_defaults_file_is_said_at_once(tmp_path, here):
    """Issue 46, finding 7 (the eighteenth newcomer's hour): three problems of fleet-site.yaml came one per run
    (`inv check` included), each fix showing the next."""
    (tmp_path / "fleet-site.yaml").write_text('inventory: x.yaml\noffline: "no"\nofline: true\ninventry: y\n')
    with pytest.raises(InputError) as refused:
        here(tmp_path)
    said = str(refused.value)
    assert "\n" not in said
    for problem in ("fleet-site.yaml:2: offline: Input should be a valid boolean",
                    "fleet-site.yaml:3: ofline: unknown key; did you mean offline?",
                    "fleet-site.yaml:4: inventry: unknown key; did you mean inventory?"):
        assert problem in said, said


def test_a_playbook_name_is_the_sites_own_first_then_the_shipped_one(tmp_path, here):
    (tmp_path / "fleet-site.yaml").write_text("")
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks/mine.yaml").write_text("name: mine\n")
    (tmp_path / "deep/er").mkdir(parents=True)
    here(tmp_path / "deep/er")
    assert playbook.resolve("mine") == tmp_path / "playbooks/mine.yaml"
    assert playbook.resolve("glm5-nvfp4") == site.SHIPPED / "playbooks/glm5-nvfp4.yaml"
    with pytest.raises(InputError, match="--playbook nosuch: no such playbook .known: .*glm5-nvfp4.*mine"):
        playbook.resolve("nosuch")
    with pytest.raises(InputError, match=r"--playbook glm5-nvfp: no such playbook; did you mean glm5-nvfp4\? "
                                         r"\(known: "):
        playbook.resolve("glm5-nvfp")  # one letter off: the newcomer of issue 46 was told only the list
    with pytest.raises(InputError):
        playbook.resolve("../../etc/passwd")
    # a path that is not there is said as a missing file, where it was looked for (the fifth newcomer's hour:
    # `-p sandbox/playbooks/lama.yaml` said "no such playbook (known: ...)", as for an unknown name)
    with pytest.raises(InputError, match=r"--playbook plays/nosuch.yaml: no such file \(.*/deep/er/plays/nosuch.yaml\);"
                                         r" a name without .yaml is looked up in playbooks/ \(known: .*mine"):
        playbook.resolve("plays/nosuch.yaml")


def test_the_shipped_data_is_read_whatever_the_working_folder(tmp_path, here):
    here(tmp_path)
    assert "sm120-allreduce-fusion" in patchsets.available()
    assert os.getcwd() == str(tmp_path)


# A site is trusted as git trusts a repository: found by walking up, it must be the user's own.
NOBODY = 65534


@pytest.fixture
def own_config(tmp_path, monkeypatch):
    """The user's own config folder (XDG_CONFIG_HOME), empty until a test writes config.yaml."""
    home = tmp_path / "config"
    (home / "fleet").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home / "fleet" / "config.yaml"


def planted(tmp_path: Path) -> Path:
    """A shared folder holding another user's site (marker, inventory, playbooks), the operator's work below."""
    shared = tmp_path / "shared"
    (shared / "inventory").mkdir(parents=True)
    (shared / "fleet-site.yaml").write_text("")
    (shared / "inventory/hosts.yaml").write_text("hosts: {sbx0: {address: 172.30.77.99}}\n")
    (shared / "operator/work").mkdir(parents=True)
    return shared


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root (CI runs as root)")
def test_a_site_another_user_owns_is_refused_in_one_line_saying_how_to_trust_it(tmp_path, here, own_config):
    shared = planted(tmp_path)
    os.chown(shared / "fleet-site.yaml", NOBODY, NOBODY)
    with pytest.raises(InputError) as refused:
        here(shared / "operator/work")
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"site {shared} refused: fleet-site.yaml is owned by uid 65534")
    assert f"FLEET_SITE={shared}" in line and str(own_config) in line


def test_a_site_folder_anyone_may_write_is_refused(tmp_path, here, own_config):
    shared = planted(tmp_path)
    (shared / "inventory").chmod(0o777)
    with pytest.raises(InputError, match=r"refused: inventory is writable by anyone"):
        here(shared / "operator/work")
    (shared / "inventory").chmod(0o775)
    with pytest.raises(InputError, match=r"refused: inventory is writable by its group"):
        here(shared / "operator")


def test_a_site_named_or_listed_safe_is_trusted(tmp_path, here, own_config, monkeypatch):
    shared = planted(tmp_path)
    shared.chmod(0o777)
    with pytest.raises(InputError, match=r"refused: shared/ is writable by anyone"):
        here(shared / "operator/work")
    own_config.write_text(f"safe:\n  - {shared}\n")
    assert here(shared / "operator").root == shared
    own_config.write_text(f"safe: [{shared}]\n")
    own_config.chmod(0o666)  # a config others may write vouches for nothing
    with pytest.raises(InputError, match="refused"):
        here(shared)
    own_config.unlink()
    monkeypatch.setenv("FLEET_SITE", str(shared))
    assert here(shared / "operator/work").root == shared
