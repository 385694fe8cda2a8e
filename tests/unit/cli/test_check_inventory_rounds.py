"""`inv check -i` in rounds, found again by the fifteenth newcomer's hour (issue 46, finding 7): a problem of the
inventory kept another from being checked, which the next run, with the first fixed, brought out. Each case: the
report on the file with both problems holds the one the fixed file shows."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from fleet.cli import check

PLAYBOOK = "glm5-nvfp4"


def _report(inventory: Path) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check.command([PLAYBOOK], str(inventory), True)
    return list(json.loads(out.getvalue())["inventory_errors"])


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


def test_a_host_whose_groups_bind_two_playbooks_still_has_its_other_keys_checked(tmp_path):
    """The host was dropped at the clash: its `proxy_jump: root@bastion:99999` (every host task refuses it) came out
    only once the groups agreed."""
    hosts = "hosts:\n  h1:\n    address: 10.0.0.1\n    proxy_jump: root@bastion:99999\n"
    fixed = _report(_write(tmp_path / "a", "hosts.yaml", "groups:\n  g1: {playbook: glm5-nvfp4, hosts: [h1]}\n"
                                                             + hosts))
    assert any("hosts.h1.proxy_jump" in e for e in fixed), fixed
    both = _report(_write(tmp_path / "b", "hosts.yaml", "groups:\n  g1: {playbook: glm5-nvfp4, hosts: [h1]}\n"
                                                            "  g2: {playbook: llama-replicas, hosts: [h1]}\n" + hosts))
    assert any("bind different playbooks" in e for e in both), both
    assert any("hosts.h1.proxy_jump" in e for e in both), both


def test_a_duplicate_key_does_not_hide_a_group_binding_a_playbook_that_names_nothing(tmp_path):
    """A host written twice (YAML keeps the second) and `playbook: glm5-nvfpp4`: only the duplicate was said."""
    text = "groups:\n  g1: {playbook: glm5-nvfpp4, hosts: [h1]}\nhosts:\n  h1: {address: 10.0.0.1}\n"
    fixed = _report(_write(tmp_path / "a", "hosts.yaml", text))
    assert any("groups.g1.playbook: glm5-nvfpp4: no such playbook" in e for e in fixed), fixed
    both = _report(_write(tmp_path / "b", "hosts.yaml", text + "  h2: {address: 10.0.0.2}\n  h2: {address: "
                                                               "10.0.0.3}\n"))
    assert any("duplicate key" in e for e in both), both
    assert any("groups.g1.playbook: glm5-nvfpp4: no such playbook" in e for e in both), both


def test_a_file_beside_the_inventory_has_its_groups_playbooks_checked_too(tmp_path):
    """Every *.yaml of the folder is read as inventory, and its proxy_jump was said; its group's `playbook:` that
    names nothing was said only when that file itself was given to -i."""
    hosts = _write(tmp_path, "hosts.yaml", "hosts:\n  h1: {address: 10.0.0.1}\n")
    _write(tmp_path, "more.yaml", "groups:\n  g2: {playbook: nosuch-pb, hosts: [h2]}\nhosts:\n  h2: {address: "
                                  "10.0.0.2}\n")
    assert any("more.yaml" in e and "nosuch-pb: no such playbook" in e for e in _report(tmp_path / "more.yaml"))
    found = _report(hosts)
    assert any("more.yaml" in e and "nosuch-pb: no such playbook" in e for e in found), found
