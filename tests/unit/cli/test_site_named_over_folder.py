"""FLEET_SITE that wins over the site of the working folder is said (issue 46, finding 8; h-new24's hour): with
FLEET_SITE left exported (a shell profile, another team's runbook), `cd ~/sites/b && inv status` read site a's
inventory and playbooks without a word, so `inv deploy --all` there would have deployed a's hosts."""

from __future__ import annotations

import pytest

from fleet import cli, site


@pytest.fixture
def two_sites(tmp_path, monkeypatch):
    for name, host in (("a", "ha"), ("b", "hb")):
        (tmp_path / name / "inventory").mkdir(parents=True)
        (tmp_path / name / "fleet-site.yaml").write_text("{}\n")
        (tmp_path / name / "inventory" / "hosts.yaml").write_text(f"hosts:\n  {host}: {{address: 127.0.0.1}}\n")
        (tmp_path / name).chmod(0o700)
    monkeypatch.chdir(tmp_path / "b" / "inventory")
    monkeypatch.setattr(cli, "_SAID_SITES", set())
    return tmp_path


def test_fleet_site_over_the_working_folders_site_is_said_once(two_sites, monkeypatch, capsys):
    monkeypatch.setenv("FLEET_SITE", str(two_sites / "a"))
    assert [h.name for h in cli.select_hosts(None, [], [])] == ["ha"]
    cli.select_hosts(None, [], [])
    assert capsys.readouterr().err == (
        f"fleet: FLEET_SITE={two_sites / 'a'} wins over the site of the working folder, {two_sites / 'b'}: the "
        f"inventory and playbooks of {two_sites / 'a'} are used, not {two_sites / 'b'}'s (unset FLEET_SITE to use "
        "it)\n")


@pytest.mark.parametrize("named", ["b", None])
def test_nothing_is_said_where_they_agree_or_it_is_unset(two_sites, monkeypatch, capsys, named):
    if named:
        monkeypatch.setenv("FLEET_SITE", str(two_sites / named))
    else:
        monkeypatch.delenv("FLEET_SITE", raising=False)
    assert [h.name for h in cli.select_hosts(None, [], [])] == ["hb"]
    assert capsys.readouterr().err == "" and site.shadowed() is None


def test_outside_any_site_fleet_site_is_the_site_unsaid(two_sites, monkeypatch, capsys):
    monkeypatch.setenv("FLEET_SITE", str(two_sites / "a"))
    monkeypatch.chdir(two_sites)
    assert [h.name for h in cli.select_hosts(None, [], [])] == ["ha"]
    assert capsys.readouterr().err == ""
