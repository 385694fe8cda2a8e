"""What a shell or Ansible hand types into --host, said as what fleet takes, never as a nearest host the pattern
did not mean (issue 46, finding 6; found by the fifteenth newcomer's hour on the sandbox):

- `-H "\\!sbx0"`: bash keeps the backslash before `!` inside double quotes (history expansion), so the exclusion
  arrived as `\\!sbx0` and was answered `did you mean sbx0?`, the very host it meant to spare;
- `-H 'sbx{0,1}'`, `-H 'sbx{0..3}'`: the shell's brace expansion, quoted (or in a script's variable), was split at
  its comma (`--host 'sbx{0'`: did you mean sbx0?) or read whole (`did you mean sbx3?`), one host of several meant;
- `-H @retry.txt`: Ansible's `--limit @FILE` was a name no host has (the known names listed);
- `-H 'sbx0|sbx1'`: a regex's alternation, answered `did you mean sbx1?`."""

from __future__ import annotations

import pytest

from fleet import inventory
from fleet.errors import InputError

FLEET = """
hosts:
  sbx0: {address: 10.0.0.10}
  sbx1: {address: 10.0.0.11}
  sbx2: {address: 10.0.0.12}
  sbx3: {address: 10.0.0.13}
groups:
  pcie: {hosts: [sbx0, sbx1]}
"""


@pytest.mark.parametrize(("hosts", "groups", "said"), [
    (["\\!sbx0"], [], "--host '\\!sbx0': a backslash before `!` is kept as typed (bash keeps it inside double "
                      "quotes); to leave sbx0 out: --host '!sbx0' (single quotes)"),
    (["sbx1,\\!sbx0"], [], "--host '\\!sbx0': a backslash before `!` is kept"),
    ([], ["\\!pcie"], "--group '\\!pcie': a backslash before `!` is kept as typed (bash keeps it inside double "
                      "quotes); to leave pcie out: --group '!pcie' (single quotes)"),
    (["sbx{0,1}"], [], "--host 'sbx{0,1}': {0,1} is the shell's brace expansion, which a shell does only unquoted; "
                       "the hosts it meant: --host sbx0,sbx1"),
    (["sbx{0..3}"], [], "--host 'sbx{0..3}': {0..3} is the shell's brace expansion, which a shell does only "
                        "unquoted; the hosts it meant: --host sbx0,sbx1,sbx2,sbx3"),
    (["!sbx{2,3}"], [], "--host '!sbx{2,3}': {2,3} is the shell's brace expansion, which a shell does only unquoted; "
                        "the hosts it meant: --host '!sbx2,!sbx3'"),
    (["@retry.txt"], [], "--host @retry.txt: Ansible's --limit @FILE (a file of host names) is not read; name the "
                         "hosts, joined with commas: --host \"$(paste -sd, retry.txt)\""),
    (["sbx0|sbx1"], [], "--host 'sbx0|sbx1': no such host in the inventory; patterns are given one to an option, or "
                        "joined with commas, not with '|': --host sbx0 --host sbx1"),
])
def test_a_shells_or_ansibles_spelling_is_said_as_fleet_takes_it(tmp_path, hosts, groups, said):
    path = tmp_path / "hosts.yaml"
    path.write_text(FLEET)
    with pytest.raises(InputError) as err:
        inventory.load(path).select(hosts, groups, default_file=path)
    assert str(err.value).startswith(said), str(err.value)
    assert "did you mean" not in str(err.value)


def test_a_comma_inside_braces_is_no_separator_and_a_glob_still_works(tmp_path):
    path = tmp_path / "hosts.yaml"
    path.write_text(FLEET)
    assert inventory.split_patterns(["sbx{0,1},!sbx2", "a, b"]) == ["sbx{0,1}", "!sbx2", "a", "b"]
    assert [h.name for h in inventory.load(path).select(["sbx[01]", "!sbx1"], [])] == ["sbx0"]
