"""Issue 46, findings 7 and 8 (h-new21's hour): what the inventory's files and `vars:` override, across the files of
one folder, said at load and by `inv check`, never a traceback nor an override silently dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet import inventory
from fleet.errors import InputError

GROUPS = "groups:\n  gpus: {unit: sglang-a, venv: /opt/a, playbook: llama, vars: {env: {A: '1'}}}\n"
HOSTS = "hosts:\n  sbx0: {address: 10.0.0.1, groups: [gpus]}\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("groups_file", ["a-groups.yaml", "z-groups.yaml"])  # read before and after the hosts' file
def test_a_host_takes_the_settings_of_a_group_another_file_of_the_folder_defines(tmp_path, groups_file):
    # it was a KeyError traceback on every task (inv check too) where the group's file was read first, and the
    # group's unit, venv, playbook and vars.env silently not applied where it was read after
    write(tmp_path, groups_file, GROUPS)
    hosts = write(tmp_path, "m-hosts.yaml", HOSTS)
    host = inventory.load(hosts).hosts["sbx0"]
    assert (host.unit, host.venv, host.playbook, host.vars.get("env")) == ("sglang-a", "/opt/a", "llama", {"A": "1"})
    assert inventory.check(hosts)[1] == []


def test_a_group_two_files_define_with_other_settings_is_one_error_naming_both(tmp_path):
    write(tmp_path, "a.yaml", GROUPS)
    hosts = write(tmp_path, "b.yaml", "groups:\n  gpus: {unit: sglang-b}\n" + HOSTS)
    with pytest.raises(InputError, match=r"b.yaml:2: groups.gpus: also defined in .*a.yaml with other settings "
                                         r"\(venv unset vs '/opt/a', unit 'sglang-b' vs 'sglang-a'"):
        inventory.load(hosts)
    assert len(inventory.check(hosts)[1]) == 1


def test_a_group_given_members_in_two_files_is_one_group(tmp_path):
    write(tmp_path, "a.yaml", "groups:\n  canary: {hosts: [a1]}\nhosts:\n  a1: {address: 10.0.0.1}\n")
    b = write(tmp_path, "b.yaml", "groups:\n  canary: {hosts: [b1]}\nhosts:\n  b1: {address: 10.0.0.2}\n")
    assert [h.name for h in inventory.load(b).select(groups=["canary"])] == ["a1", "b1"]


@pytest.mark.parametrize("key,value,said", [
    ("venv", "/opt/other", r"hosts.yaml:4: hosts.h1.vars: venv is a setting of its own, written beside vars: "
                           r"\(venv: /opt/other\), not inside it: fleet reads no vars.venv$"),
    ("unit", "sglang-b", r"hosts.h1.vars: unit is a setting of its own"),
    ("port", 2222, r"hosts.h1.vars: port is a setting of its own"),
    ("ansible_host", "10.0.0.9", r"hosts.h1.vars: ansible_host is Ansible's; fleet's is address: it is a setting "
                                 r"of its own, written beside vars: \(address: 10.0.0.9\)"),
])
def test_a_setting_written_inside_vars_is_refused_not_silently_ignored(tmp_path, key, value, said):
    # vars: {venv: /opt/other} loaded, inv check said 0 errors, and the deploy ran /root/ml-env's sglang
    path = write(tmp_path, "hosts.yaml", f"hosts:\n  h1:\n    address: 10.0.0.1\n    vars: {{{key}: {value}}}\n")
    with pytest.raises(InputError, match=said):
        inventory.load(path)


def test_env_written_beside_vars_names_vars_env_not_venv(tmp_path):
    # `env:` on the host said "unknown key; did you mean venv?"
    path = write(tmp_path, "hosts.yaml", "hosts:\n  h1:\n    address: 10.0.0.1\n    env: {A: '1'}\n")
    with pytest.raises(InputError, match=r"hosts.h1.env: unknown key; did you mean vars.env\?$"):
        inventory.load(path)
