"""`--playbook` wins over the playbook the hosts' groups bind (docs/cli.md, Which playbook), and now says so where
they differ: `inv deploy -g blackwell -p llama-port` over hosts whose group binds glm5-nvfp4 went ahead without a word
of it (issue 46, finding 8, an override unsaid; the fifteenth newcomer's hour), where a playbook's serve.unit over
the inventory's unit is said."""

from __future__ import annotations

from pathlib import Path

from fleet.cli import targets
from fleet.inventory import Host


def host(name: str, playbook: str | None = None) -> Host:
    return Host(name=name, address="10.0.0.1", port=None, user=None, become=False, identity_file=None,
                known_hosts=None, ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(),
                source=Path("hosts.yaml"), playbook=playbook)


def test_a_playbook_given_over_a_groups_binding_is_said(capsys):
    given = targets.playbook_for([host("a", "glm5-nvfp4"), host("b", "glm5-nvfp4"), host("c")], "llama-replicas")
    assert given == "llama-replicas"
    assert capsys.readouterr().err == "fleet: --playbook llama-replicas over glm5-nvfp4, which the inventory's " \
                                      "groups bind to a, b\n"


def test_the_playbook_the_group_binds_given_again_says_nothing(capsys):
    shipped = Path(__file__).resolve().parents[3] / "playbooks/glm5-nvfp4.yaml"
    assert targets.playbook_for([host("a", "glm5-nvfp4")], "glm5-nvfp4") == "glm5-nvfp4"
    assert targets.playbook_for([host("a", str(shipped))], "glm5-nvfp4") == "glm5-nvfp4"
    assert targets.playbook_for([host("a")], "glm5-nvfp4") == "glm5-nvfp4"
    assert capsys.readouterr().err == ""
