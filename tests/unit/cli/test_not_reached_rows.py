"""A host that answered with a host key fleet does not know (or another than known_hosts has) was `unreachable` on
`inv status`'s row, `probe failed` on the probe's, `-` on exec's and `failed` on the rollout's: only the line
under the table said what it was, and an operator reads "unreachable" as the network. Every per-host row now says
the cause in the same word (fleet.errors.NotReached); a host SSH could not reach stays `unreachable`."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from fleet.cli import deploy_view, execute, probe_view, status, status_view
from fleet.deploy.results import DeployResult
from fleet.errors import NotReached
from fleet.host.facts import HostFacts
from fleet.inventory import Host
from fleet.multihost.status import HostStatus
from fleet.outcomes import DeployStatus
from fleet.parallel import HostOutcome

SAID = "sbx1 (root@10.0.0.2:22): host key unknown (no entry for 10.0.0.2 in /k); it offers ssh-ed25519 SHA256:x"


def drawn(draw) -> str:
    console = Console(width=160, record=True, file=io.StringIO(), color_system=None)
    draw(console)
    return console.export_text()


def row_of(text: str, host: str = "sbx1") -> str:
    return next(line for line in text.splitlines() if line.split(" ")[:1] == [host] or f"│ {host} " in line)


@pytest.mark.parametrize("cause", list(NotReached))
def test_status_row_and_its_exit_line_name_the_cause(cause, capsys):
    rows = [HostStatus("sbx1", "10.0.0.2", ok=False, error=SAID, unreached=cause)]
    cells = row_of(drawn(lambda c: status_view.render(rows, c))).split()
    assert " ".join(cells[1:1 + len(str(cause).split())]) == cause
    assert status.exit_code(rows) == 1  # docs/cli.md: a host not reached is a failed host, whatever the cause
    assert capsys.readouterr().err.strip() == f"fleet: not clean (exit 1): sbx1: {cause}"


def test_an_unknown_key_is_never_called_unreachable_on_any_row():
    fail = NotReached.UNKNOWN_KEY
    host = Host(name="sbx1", address="10.0.0.2", port=22, user="root", become=False, identity_file=None,
                known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                source=Path("hosts.yaml"))
    views = {
        "status": lambda c: status_view.render([HostStatus("sbx1", "10.0.0.2", ok=False, error=SAID,
                                                           unreached=fail)], c),
        "probe": lambda c: probe_view.render([HostFacts.failed("sbx1", "10.0.0.2", SAID, fail)], c),
        "exec": lambda c: execute.report([HostOutcome(host, False, None, SAID, 0.1, fail)], False, False, c),
        "deploy": lambda c: deploy_view.render_rollout(
            [DeployResult("sbx1", DeployStatus.FAILED, error=SAID, unreached=fail)], {"sbx1": 1}, {}, None, c),
    }
    for name, draw in views.items():
        row = row_of(drawn(draw))
        assert "unknown key" in row and "unreachable" not in row, (name, row)


def test_exec_says_an_unknown_keys_fingerprint_whole_on_one_line_at_80_columns():
    """A newcomer's `inv exec` of a host whose key is unknown (issue 46, 10, a new form): the sentence sat in the
    table's output cell, 40 columns wide at 80, and its fingerprint broke in two (`SHA256:8lHIVTugetnCdc4wo0zepO
    Fqna3fmO69H` / `XXQWHy+BzM`): nothing to compare with `ssh-keygen -lf` on the console, nothing to paste."""
    fingerprint = "SHA256:8lHIVTugetnCdc4wo0zepOFqna3fmO69HXXQWHy+BzM"
    said = (f"sbx1 (root@172.30.74.11:22): host key unknown (no entry for 172.30.74.11 in /tmp/kh, "
            f"/etc/ssh/ssh_known_hosts, /etc/ssh/ssh_known_hosts2); it offers ssh-ed25519 {fingerprint}: first "
            "contact? check that against `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` on its console, then "
            "re-run with --accept-new-host-keys")
    host = Host(name="sbx1", address="172.30.74.11", port=22, user="root", become=False, identity_file=None,
                known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                source=Path("hosts.yaml"))
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    execute.report([HostOutcome(host, False, None, said, 0.1, NotReached.UNKNOWN_KEY)], False, False, console)
    text = console.export_text()
    assert any(fingerprint in line for line in text.splitlines()), text
    assert "unknown key" in row_of(text) and max(len(line) for line in text.splitlines()) <= 80, text
