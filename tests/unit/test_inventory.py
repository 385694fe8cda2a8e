"""Inventory loading: merging, selection, and one-line errors that name file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet import inventory
from fleet.errors import InputError

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_shipped_example_inventory_loads():
    inv = inventory.load(REPO / "inventory/hosts.example.yaml")
    host = inv.hosts["gpu-node-1"]
    assert (host.address, host.user, host.venv, host.groups) == ("10.1.230.174", "root", "/root/ml-env",
                                                                 ("blackwell-pcie",))
    assert inv.groups["blackwell-pcie"] == ["gpu-node-1"]


def test_settings_merge_defaults_then_groups_then_host(tmp_path):
    path = write(tmp_path, "hosts.yaml", """
defaults: {user: ops, venv: /opt/a, vars: {site: x}}
groups:
  g1: {venv: /opt/g1, unit: sgl, vars: {rack: r1}, hosts: [h1]}
hosts:
  h1: {address: 10.0.0.1, port: 2222, vars: {rack: r9}}
  h2: {address: h2.example.org, groups: [g1], venv: /opt/h2}
""")
    inv = inventory.load(path)
    h1, h2 = inv.hosts["h1"], inv.hosts["h2"]
    assert (h1.user, h1.port, h1.venv, h1.unit, h1.vars) == ("ops", 2222, "/opt/g1", "sgl", {"site": "x", "rack": "r9"})
    assert (h2.venv, h2.port, h2.groups) == ("/opt/h2", None, ("g1",))
    assert sorted(inv.groups["g1"]) == ["h1", "h2"]


def test_names_resolve_across_every_file_of_the_folder_and_default_file_selects(tmp_path):
    a = write(tmp_path, "a.yaml", "hosts: {a1: {address: 10.0.0.1}}\n")
    write(tmp_path, "b.yaml", "hosts: {b1: {address: 10.0.0.2, groups: [gb]}}\n")
    inv = inventory.load(a)
    assert [h.name for h in inv.select(default_file=a)] == ["a1"]
    assert [h.name for h in inv.select(names=["b1"])] == ["b1"]
    assert [h.name for h in inv.select(names=["10.0.0.2"])] == ["b1"]
    assert [h.name for h in inv.select(groups=["gb"])] == ["b1"]


@pytest.mark.parametrize("text,expected", [
    ("hosts:\n  h1:\n    address: 10.0.0.1\n    colour: red\n", r"hosts.yaml:4: hosts.h1.colour: unknown key"),
    # a typo at 3 a.m. says the key meant (the fifth newcomer's hour: `usr: ops` said only "unknown key")
    ("hosts:\n  h1:\n    address: 10.0.0.1\n    usr: ops\n",
     r"hosts.yaml:4: hosts.h1.usr: unknown key; did you mean user\?$"),
    ("defaults:\n  identity_fle: /k\n",
     r"hosts.yaml:2: defaults.identity_fle: unknown key; did you mean identity_file\?$"),
    ("hosts:\n  h1:\n    address: 10.0.0.1\n    port: '22'\n",
     r"hosts.yaml:4: hosts.h1.port: Input should be a valid integer"),
    ("hosts:\n  h1:\n    port: 22\n", r"hosts.yaml:2: hosts.h1.address: required key is missing"),
    ("hosts:\n  h1:\n    address: 999.1.1.1\n", r"hosts.yaml:3: hosts.h1.address: .*not an IP address or host name"),
    ("hosts:\n  h1:\n    address: 'a b'\n", r"hosts.yaml:3: hosts.h1.address: .*not an IP address or host name"),
    ("hosts:\n  h1: {address: 10.0.0.1}\n  h1: {address: 10.0.0.2}\n", r"hosts.yaml:3: hosts.h1: duplicate key"),
    ("hosts:\n  h1: {address: 10.0.0.1\n", r"hosts.yaml:3: invalid YAML"),
    ("- just\n- a list\n", r"hosts.yaml:1: an inventory file must be a mapping"),
    ("hosts:\n  h1: {address: 10.0.0.1, venv: relative/path}\n", r"hosts.yaml:2: hosts.h1.venv: .*absolute path"),
    ("hosts:\n  h1: {address: 10.0.0.1, user: 'root; rm -rf /'}\n", r"hosts.yaml:2: hosts.h1.user: .*not a valid user"),
    ("groups:\n  g: {hosts: [ghost]}\n", r"hosts.yaml:2: groups.g.hosts: host 'ghost' is not defined"),
    ("hosts:\n  'bad name': {address: 10.0.0.1}\n", r"hosts.yaml:2: hosts.bad name: names may use"),
    # vars.env is typed (issue 46 finding 8): refused where it is written, not at a deploy's render
    ("hosts:\n  h1:\n    address: 10.0.0.1\n    vars: {env: {BAD-NAME: x}}\n",
     r"hosts.yaml:4: hosts.h1.vars.env: .*'BAD-NAME' is not valid"),
    ("hosts:\n  h1:\n    address: 10.0.0.1\n    vars: {env: [A=1]}\n",
     r"hosts.yaml:4: hosts.h1.vars.env: .*a mapping of NAME: value"),
    ("defaults:\n  vars: {env: {A: {nested: 1}}}\n", r"hosts.yaml:2: defaults.vars.env: env A: a value is text"),
    ("hosts:\n  h1:\n    address: 10.0.0.1\n    vars:\n      env: {A: \"x\\ny\"}\n",
     r"hosts.yaml:5: hosts.h1.vars.env: .*env A: .*newline"),
    # every variable said at once (the newcomer's second hour: fixing one name revealed the next value)
    ("hosts:\n  h1:\n    address: 10.0.0.1\n    vars:\n      env: {BAD-NAME: x, A: \"x\\ny\", B: [1]}\n",
     r"hosts.yaml:5: hosts.h1.vars.env: environment variable name 'BAD-NAME' is not valid; env A: .*newline.*; "
     r"env B: a value is text"),
])
def test_bad_inventory_gives_one_line_error_with_file_line_and_key(tmp_path, text, expected):
    path = write(tmp_path, "hosts.yaml", text)
    with pytest.raises(InputError, match=expected) as err:
        inventory.load(path)
    assert "\n" not in str(err.value)


def test_conflicting_group_vars_are_an_error_unless_the_host_decides(tmp_path):
    text = """
groups:
  a: {venv: /opt/a}
  b: {venv: /opt/b}
hosts:
  h1: {address: 10.0.0.1, groups: [a, b]}
"""
    with pytest.raises(InputError, match=r"hosts.yaml:6: hosts.h1.groups: groups a and b set venv differently"):
        inventory.load(write(tmp_path, "hosts.yaml", text))
    fixed = text.replace("groups: [a, b]}", "groups: [a, b], venv: /opt/h}")
    assert inventory.load(write(tmp_path, "hosts.yaml", fixed)).hosts["h1"].venv == "/opt/h"


def test_a_host_defined_in_two_files_is_an_error(tmp_path):
    a = write(tmp_path, "a.yaml", "hosts: {h: {address: 10.0.0.1}}\n")
    write(tmp_path, "b.yaml", "hosts: {h: {address: 10.0.0.2}}\n")
    with pytest.raises(InputError, match=r"b.yaml:1: hosts.h: host also defined in .*a.yaml"):
        inventory.load(a)


def test_selection_errors_name_the_flag(tmp_path):
    inv = inventory.load(write(tmp_path, "hosts.yaml", "hosts: {h: {address: 10.0.0.1}}\n"))
    with pytest.raises(InputError, match=r"--host nope: no such host"):
        inv.select(names=["nope"])
    with pytest.raises(InputError, match=r"--group g: no such group"):
        inv.select(groups=["g"])
    with pytest.raises(InputError, match=r"--inventory .*missing.yaml: no such file"):
        inventory.load(tmp_path / "missing.yaml")


@pytest.mark.parametrize("address", ["fe80::1%$(touch X;echo eth0)", "fe80::1%x,gpu-node-2"])
def test_an_address_whose_zone_id_is_not_an_interface_name_is_refused(tmp_path, address):
    path = tmp_path / "hosts.yaml"
    path.write_text(f"hosts:\n  gpu-1: {{address: '{address}'}}\n")
    with pytest.raises(InputError, match=r"hosts.yaml:2: .*zone id .*an interface name"):
        inventory.load(path)


def test_a_group_binds_a_playbook_by_name_or_by_a_path_beside_the_inventory(tmp_path):
    path = write(tmp_path, "hosts.yaml", """
groups:
  pcie: {playbook: glm5-nvfp4, hosts: [a]}
  lab: {playbook: books/lab.yaml, hosts: [b]}
  racks: {hosts: [a, c]}
hosts:
  a: {address: 10.0.0.1}
  b: {address: 10.0.0.2}
  c: {address: 10.0.0.3}
""")
    inv = inventory.load(path)
    assert inv.hosts["a"].playbook == "glm5-nvfp4"
    assert inv.hosts["b"].playbook == str(tmp_path / "books/lab.yaml")
    assert inv.hosts["c"].playbook is None


def test_two_groups_binding_different_playbooks_to_one_host_is_an_error_naming_both(tmp_path):
    path = write(tmp_path, "hosts.yaml", """
groups:
  pcie: {playbook: glm5-nvfp4, hosts: [a]}
  small: {playbook: llama-replicas, hosts: [a]}
hosts:
  a: {address: 10.0.0.1}
""")
    with pytest.raises(InputError) as err:
        inventory.load(path)
    assert "hosts.yaml:" in str(err.value) and "pcie (glm5-nvfp4) and small (llama-replicas)" in str(err.value)


FLEET = """
groups:
  pcie: {hosts: [pve-gpu-01, pve-gpu-02, pve-gpu-03]}
  sxm: {hosts: [dgx-1, dgx-2]}
  canary: {hosts: [pve-gpu-01, dgx-1]}
hosts:
  pve-gpu-01: {address: 10.0.0.1}
  pve-gpu-02: {address: 10.0.0.2}
  pve-gpu-03: {address: 10.0.0.3}
  dgx-1: {address: 10.0.1.1}
  dgx-2: {address: 10.0.1.2}
"""

SELECTIONS = [
    (["pve-gpu-0*"], [], ["pve-gpu-01", "pve-gpu-02", "pve-gpu-03"]),
    (["pve-gpu-0[12]"], [], ["pve-gpu-01", "pve-gpu-02"]),
    (["10.0.1.*"], [], ["dgx-1", "dgx-2"]),
    (["pve-gpu-0*", "!pve-gpu-02"], [], ["pve-gpu-01", "pve-gpu-03"]),
    (["pve-gpu-0*,!pve-gpu-02"], [], ["pve-gpu-01", "pve-gpu-03"]),
    (["!pve-gpu-02"], [], ["pve-gpu-01", "pve-gpu-03", "dgx-1", "dgx-2"]),  # read-only tasks: the file's hosts
    ([], ["pcie", "sxm"], ["pve-gpu-01", "pve-gpu-02", "pve-gpu-03", "dgx-1", "dgx-2"]),
    ([], ["pcie,sxm", "!canary"], ["pve-gpu-02", "pve-gpu-03", "dgx-2"]),
    ([], ["pcie", "&canary"], ["pve-gpu-01"]),
    ([], ["*"], ["pve-gpu-01", "pve-gpu-02", "pve-gpu-03", "dgx-1", "dgx-2"]),
    (["dgx-2", "!pve-gpu-0[23]"], ["pcie"], ["dgx-2", "pve-gpu-01"]),
    (["!dgx-*"], ["!pcie"], []),
]


@pytest.mark.parametrize(("hosts", "groups", "chosen"), SELECTIONS)
def test_selection_reads_as_ansibles_limit(tmp_path, hosts, groups, chosen):
    """Globs, `!` exclusion, `&` intersection, commas, groups combined with hosts."""
    path = write(tmp_path, "hosts.yaml", FLEET)
    inv = inventory.load(path)
    if not chosen:
        with pytest.raises(InputError, match="leaves no host") as err:
            inv.select(hosts, groups, default_file=path)
        assert all(f"'{p}'" in str(err.value) for p in inventory.split_patterns([*hosts, *groups]) if p[0] in "!&")
        return
    assert [h.name for h in inv.select(hosts, groups, default_file=path)] == chosen


@pytest.mark.parametrize(("hosts", "groups", "said"), [
    (["pve-gpu-3"], [], "--host pve-gpu-3: no such host in the inventory; did you mean pve-gpu-03?"),
    (["!pve-gpu-3"], [], "--host '!pve-gpu-3': no such host in the inventory; did you mean pve-gpu-03?"),
    (["dgx-1,&pve-gpu-3"], [], "--host '&pve-gpu-3': no such host in the inventory; did you mean pve-gpu-03?"),
    (["!pcie"], [], "--host '!pcie': no such host in the inventory; it is a group: --group '!pcie'"),
    ([], ["!dgx-1"], "--group '!dgx-1': no such group: it is a host, --host '!dgx-1'"),
    ([], ["&pice"], "--group '&pice': no such group; did you mean pcie?"),
    (["!pve-gpu-1*"], [], "--host '!pve-gpu-1*': matches no host of the inventory"),
    (["PVE-GPU-03"], [], "--host PVE-GPU-03: no such host in the inventory; did you mean pve-gpu-03?"),
    ([], ["PCIE"], "--group PCIE: no such group; did you mean pcie?"),
    (["pve-gpu-1*"], [], "--host 'pve-gpu-1*': matches no host of the inventory"),
    (["pcie"], [], "--host pcie: no such host in the inventory; it is a group: --group pcie"),
    ([], ["pice"], "--group pice: no such group; did you mean pcie?"),
    ([], ["dgx-1"], "--group dgx-1: no such group: it is a host, --host dgx-1"),
    ([], ["gpu*"], "--group 'gpu*': matches no group (known: canary, pcie, sxm)"),
    (["dgx-1,,dgx-2"], [], "--host: an empty name"),
    # Ansible's --limit spellings: the nearest name said to an Ansible hand was a host the pattern never meant
    ([], ["pcie:!canary"], "--group 'pcie:!canary': no such group; patterns are given one to an option, or joined "
                           "with commas, not with Ansible's ':': --group pcie --group '!canary'"),
    (["dgx-1:pve-gpu-03"], [], "--host dgx-1:pve-gpu-03: no such host in the inventory; patterns are given one to an "
                               "option, or joined with commas, not with Ansible's ':': --host dgx-1 --host pve-gpu-03"),
    (["pve-gpu-0*:!canary"], [], "--host 'pve-gpu-0*:!canary': matches no host of the inventory; patterns are given "
                                 "one to an option, or joined with commas, not with Ansible's ':': --host 'pve-gpu-0*' "
                                 "--group '!canary'"),
    (["~pve-gpu-0[12]"], [], "--host '~pve-gpu-0[12]': matches no host of the inventory; fleet takes globs, not "
                             "Ansible's ~regex"),
    # a shell's list and ssh's host:port: 'did you mean dgx-2?' named one host of several meant, or a host for a port
    (["dgx-1 dgx-2"], [], "--host 'dgx-1 dgx-2': no such host in the inventory; patterns are given one to an option, "
                          "or joined with commas, not with spaces: --host dgx-1 --host dgx-2"),
    (["dgx-1;pcie"], [], "--host 'dgx-1;pcie': no such host in the inventory; patterns are given one to an option, or "
                         "joined with commas, not with ';': --host dgx-1 --group pcie"),
    (["dgx-1:22"], [], "--host dgx-1:22: no such host in the inventory; a port is no part of a host's pattern (the "
                       "inventory's port: is): --host dgx-1"),
    (["10.0.1.1:2222"], [], "--host 10.0.1.1:2222: no such host in the inventory; a port is no part of a host's "
                            "pattern (the inventory's port: is): --host 10.0.1.1"),
    (["DGX-*"], [], "--host 'DGX-*': matches no host of the inventory; globs match case as typed: --host 'dgx-*'"),
    (["pve-gpu-1*"], [], "--host 'pve-gpu-1*': matches no host of the inventory (known: dgx-1, dgx-2, pve-gpu-01,"),
    (["all"], [], "--host all: no such host in the inventory; every host is --all"),
    ([], ["all"], "--group all: no such group; every host is --all"),
])
def test_a_pattern_that_matches_nothing_is_one_line_with_the_nearest_name(tmp_path, hosts, groups, said):
    """A typo in an exclusion would act on the host it meant to spare: refused, never ignored; the line names the
    pattern as typed, quoted as a shell needs it again (`-H '!a3'` was said as `--host a3`, the host it spares)."""
    path = write(tmp_path, "hosts.yaml", FLEET)
    with pytest.raises(InputError) as err:
        inventory.load(path).select(hosts, groups, default_file=path)
    assert str(err.value).startswith(said), str(err.value)


def test_vars_env_is_text_for_the_server_and_other_vars_stay_free_form(tmp_path):
    path = write(tmp_path, "hosts.yaml", """
defaults: {vars: {env: {A: "1"}, rack: a3}}
hosts:
  h1: {address: 10.0.0.1, vars: {env: {NCCL_P2P_DISABLE: 1, B: x}, proxmox: {node: pve1}}}
""")
    host = inventory.load(path).hosts["h1"]
    assert host.vars == {"env": {"NCCL_P2P_DISABLE": "1", "B": "x"}, "rack": "a3", "proxmox": {"node": "pve1"}}


def test_an_inventory_file_names_its_wheelhouse_relative_to_itself(tmp_path):
    write(tmp_path, "sandbox.yaml", "wheelhouse: wheels\nhosts: {sbx0: {address: 172.30.77.10}}\n")
    write(tmp_path, "hosts.yaml", "hosts: {gpu1: {address: 10.0.0.1}}\n")
    inv = inventory.load(tmp_path / "hosts.yaml")
    assert inv.hosts["sbx0"].wheelhouse == tmp_path / "wheels" and inv.hosts["gpu1"].wheelhouse is None


@pytest.mark.parametrize(("name", "text", "said"), [
    ("glm5.yaml", "name: glm5\nmodel: {path: /m}\nladder: [{name: a}]\n",
     "not an inventory file (its keys are name:, model:, ladder:; an inventory's are defaults:, groups:, hosts:, "
     "wheelhouse:)"),
    ("site.yaml", "- hosts: all\n  tasks: []\n", "not an inventory file (it is a YAML list; an inventory's are"),
    ("compose.yaml", "services: {web: {image: x}}\n", "not an inventory file (its keys are services:;"),
])
def test_a_file_beside_the_inventory_that_is_no_inventory_is_one_line_naming_it(tmp_path, name, text, said):
    """A newcomer's pass: a playbook kept beside hosts.yaml stopped every task with `glm5.yaml:1: name: unknown
    key` (the inventory's schema, for a file that never was one). Every *.yaml of the folder is read as
    documented (inventory/README.md); a file that is none is named, with what to do."""
    hosts = write(tmp_path, "hosts.yaml", "hosts: {a1: {address: 10.0.0.1}}\n")
    write(tmp_path, name, text)
    with pytest.raises(InputError) as err:
        inventory.load(hosts)
    assert str(err.value).startswith(f"{tmp_path / name}: {said}"), str(err.value)
    assert str(err.value).endswith(f"fleet reads every *.yaml beside hosts.yaml as inventory; move it out of "
                                   f"{tmp_path} or rename it (.bak)") and "\n" not in str(err.value)


def test_hidden_and_example_files_beside_the_inventory_are_not_read(tmp_path):
    """As a shell's `*.yaml` leaves out `.#hosts.yaml` (an editor's lock) and `.hosts.yaml`, fleet does."""
    hosts = write(tmp_path, "hosts.yaml", "hosts: {a1: {address: 10.0.0.1}}\n")
    write(tmp_path, ".#hosts.yaml", "junk: [\n")
    write(tmp_path, ".hosts.yaml", "hosts: {a1: {address: 10.0.0.9}}\n")
    write(tmp_path, "hosts.example.yaml", "hosts: {a1: {address: 10.0.0.8}}\n")
    assert inventory.load(hosts).hosts["a1"].address == "10.0.0.1"


def test_a_copy_of_the_inventory_beside_it_says_why_it_was_read(tmp_path):
    hosts = write(tmp_path, "hosts.yaml", "hosts: {a1: {address: 10.0.0.1}}\n")
    write(tmp_path, "hosts-old.yaml", "hosts: {a1: {address: 10.0.0.1}}\n")
    with pytest.raises(InputError, match=r"hosts.yaml:1: hosts.a1: host also defined in .*hosts-old.yaml \(every "
                                         r"\*.yaml of an inventory's folder is read"):
        inventory.load(hosts)


def test_a_shells_list_is_said_with_the_option_it_was_typed_to(tmp_path):
    """`inv status --detail 'sbx0 sbx1'` was told `--host sbx0 --host sbx1`, which --detail refuses beside it."""
    path = write(tmp_path, "hosts.yaml", FLEET)
    with pytest.raises(InputError) as err:
        inventory.load(path).select(["dgx-1 dgx-2"], [], default_file=path, host_flag="--detail")
    assert str(err.value).endswith("not with spaces: --detail dgx-1 --detail dgx-2"), str(err.value)


@pytest.mark.parametrize("value", ["a1", "!a3", "gpu-0*", "a b", "it's", "10.1.2.3", "&canary", "x,y", "", "é1"])
def test_a_pattern_is_named_as_a_shell_would_need_it_again(value):
    import shlex

    assert inventory.as_typed("--host", value) == f"--host {shlex.quote(value)}"


@pytest.mark.parametrize(("hosts", "groups", "said"), [
    # a glob's [1:3] is the set {1, :, 3}: it took pve-gpu-01 and pve-gpu-03 and left out pve-gpu-02, silently
    (["pve-gpu-0[1:3]"], [], "--host 'pve-gpu-0[1:3]': [1:3] is Ansible's range (or a group's slice), not a glob, "
                             "whose [...] is a set of characters: --host pve-gpu-01,pve-gpu-02,pve-gpu-03"),
    (["!pve-gpu-0[2:3]"], [], "--host '!pve-gpu-0[2:3]': [2:3] is Ansible's range (or a group's slice), not a glob, "
                              "whose [...] is a set of characters: --host '!pve-gpu-02,!pve-gpu-03'"),
    (["pve-gpu-[01:02]"], [], "--host 'pve-gpu-[01:02]': [01:02] is Ansible's range (or a group's slice), not a "
                              "glob, whose [...] is a set of characters: --host pve-gpu-01,pve-gpu-02"),
    ([], ["pcie[0:1]"], "--group 'pcie[0:1]': [0:1] is Ansible's range (or a group's slice), not a glob, whose [...] "
                        "is a set of characters"),
])
def test_ansibles_range_is_said_not_taken_as_a_glob(tmp_path, hosts, groups, said):
    """Found by the seventh newcomer's hour (issue 46, finding 6): `-H 'sbx[0:3]'`, Ansible's range, selected sbx0
    and sbx3 and said nothing of sbx1 and sbx2."""
    path = write(tmp_path, "hosts.yaml", FLEET)
    with pytest.raises(InputError) as err:
        inventory.load(path).select(hosts, groups, default_file=path)
    assert str(err.value) == said


def test_a_glob_of_characters_and_an_ipv6_address_are_no_range(tmp_path):
    path = write(tmp_path, "hosts.yaml", FLEET + "  v6: {address: 'fe80::1'}\n")
    assert [h.name for h in inventory.load(path).select(["pve-gpu-0[13]", "fe80::1"], [])] == \
        ["pve-gpu-01", "pve-gpu-03", "v6"]


def test_a_folder_or_a_device_given_as_the_inventory_is_said_as_what_it_is(tmp_path):
    """h-new18: `inv check -i inventory/` and `-i /dev/null` said `no such file`, of a folder that is there."""
    with pytest.raises(InputError, match=r"^--inventory .*: a folder: name the file in it, e.g. --inventory "
                                         r".*/hosts.yaml$"):
        inventory.load(tmp_path)
    assert [str(e) for e in inventory.check(Path("/dev/null"))[1]] == [
        "--inventory /dev/null: not a regular file"]
    assert [str(e) for e in inventory.check(tmp_path / "nosuch.yaml")[1]] == [
        f"--inventory {tmp_path / 'nosuch.yaml'}: no such file"]
