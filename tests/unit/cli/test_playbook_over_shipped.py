"""A site's playbook that shadows a shipped one of the same name is said (issue 46, finding 8; h-new21's hour): a
site's copy of glm5-nvfp4 won over the clone's (README: "found by name before the shipped ones") without a word at
run time, so after a `git pull` that fixed the shipped one the deploy still used the stale copy, silently."""

from __future__ import annotations

from fleet.cli import targets
from fleet.site import SHIPPED


def test_a_site_playbook_over_a_shipped_one_of_its_name_is_said(tmp_path, monkeypatch, capsys):
    (tmp_path / "playbooks").mkdir()
    own = tmp_path / "playbooks/glm5-nvfp4.yaml"
    own.write_text((SHIPPED / "playbooks/glm5-nvfp4.yaml").read_text())
    monkeypatch.setenv("FLEET_SITE", str(tmp_path))
    assert targets.playbook_for([], "glm5-nvfp4") == "glm5-nvfp4"
    assert capsys.readouterr().err == (f"fleet: playbook glm5-nvfp4 is the site's {own}, over the shipped "
                                       f"{SHIPPED / 'playbooks/glm5-nvfp4.yaml'}\n")


def test_a_shipped_playbook_used_as_is_says_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLEET_SITE", str(tmp_path))
    assert targets.playbook_for([], "glm5-nvfp4") == "glm5-nvfp4"
    assert capsys.readouterr().err == ""
