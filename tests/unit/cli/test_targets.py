"""Which hosts a task that changes hosts acts on, with which playbook, and the go-ahead: refusals are exit 2."""

from __future__ import annotations

import dataclasses
import io
import os
import pty
import select
import sys
import time
from pathlib import Path

import pytest

from fleet.cli import targets
from fleet.cli.deploy import deploy_plan
from fleet.deploy.inputs import load_playbook
from fleet.errors import EXIT_BAD_INPUT, InputError
from fleet.inventory import Host
from fleet.multihost import rollout


def host(name: str, playbook: str | None = None) -> Host:
    return Host(name=name, address="10.0.0.1", port=None, user=None, become=False, identity_file=None,
                known_hosts=None, ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(),
                source=Path("hosts.yaml"), playbook=playbook)


@pytest.mark.parametrize(("hosts", "groups", "every"), [([], [], False), (["a"], [], True), ([], ["g"], True)])
def test_no_target_or_all_with_names_is_refused(hosts, groups, every):
    with pytest.raises(InputError) as err:
        targets.require_target("deploy", hosts, groups, every)
    assert err.value.exit_code == EXIT_BAD_INPUT and "--host" in str(err.value)


@pytest.mark.parametrize(("hosts", "groups", "every"), [(["a"], [], False), ([], ["g"], False), ([], [], True)])
def test_a_named_target_is_enough(hosts, groups, every):
    targets.require_target("deploy", hosts, groups, every)


def test_the_playbook_given_wins_else_the_groups_binding():
    assert targets.playbook_for([host("a", "x")], "given") == "given"
    assert targets.playbook_for([host("a", "x"), host("b", "x")], None) == "x"


def test_no_playbook_for_a_host_names_the_host():
    with pytest.raises(InputError) as err:
        targets.playbook_for([host("a", "x"), host("b")], None)
    assert "--playbook" in str(err.value) and "no group of b binds one" in str(err.value)


def test_hosts_bound_to_different_playbooks_are_refused_naming_each():
    with pytest.raises(InputError) as err:
        targets.playbook_for([host("a", "x"), host("b", "y")], None)
    assert "a: x, b: y" in str(err.value)


def test_one_host_or_yes_never_asks():
    none = io.StringIO("")  # not a terminal: would refuse if it asked
    targets.confirm("deploy", [host("a")], yes=False, answers=none)
    targets.confirm("deploy", [host("a"), host("b")], yes=True, answers=none)


def test_several_hosts_without_a_terminal_need_yes():
    with pytest.raises(InputError) as err:
        targets.confirm("exec", [host("a"), host("b")], yes=False, answers=io.StringIO("y\n"))
    assert "--yes" in str(err.value) and "a, b" in str(err.value)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "ok"), [("y\n", True), ("YES\n", True), ("n\n", False), ("\n", False),
                                            ("", False), ("yes please\n", False)])
def test_on_a_terminal_the_plan_is_shown_and_only_yes_goes_ahead(capsys, answer, ok):
    hosts = [host(f"h{i}") for i in range(20)]
    if ok:
        targets.confirm("deploy", hosts, yes=False, plan=["playbook: x"], answers=_Tty(answer))
    else:
        with pytest.raises(InputError, match="not confirmed"):
            targets.confirm("deploy", hosts, yes=False, plan=["playbook: x"], answers=_Tty(answer))
    shown = capsys.readouterr().err
    assert "inv deploy on 20 hosts: h0, h1" in shown and "and 8 more" in shown and "  playbook: x" in shown


def test_names_in_plans_are_capped():
    many = [dataclasses.replace(host("a"), name=f"n{i}") for i in range(100)]
    assert targets.names(many).endswith("n11 and 88 more")


def test_a_deploys_plan_names_the_playbook_and_the_batches_in_order():
    book, path = load_playbook("glm5-nvfp4")
    hosts = [host(f"h{i:02}") for i in range(20)]
    plan = deploy_plan(hosts, book, path, rollout.parse_serial("1,25%"), rollout.parse_max_fail("10%"))
    assert plan[0] == f"playbook: glm5-nvfp4 ({path})"
    assert plan[1:4] == ["batch 1 (canary): h00", "batch 2: h01, h02, h03, h04, h05",
                         "batch 3: h06, h07, h08, h09, h10"]
    assert plan[-1] == "stops once more than 2 host(s) failed (--max-fail), or when the canary fails"
    alike = deploy_plan(hosts, book, path, rollout.parse_serial("5"), rollout.parse_max_fail("10%"))
    assert alike[1] == "batch 1: h00, h01, h02, h03, h04" and alike[-1].endswith("(--max-fail)")  # no canary
    two_node, where = load_playbook("glm5-2node")
    assert deploy_plan(hosts[:2], two_node, where, None, rollout.parse_max_fail(None))[1] == (
        "one server over 2 nodes, deployed together")


def _on_a_terminal(args: list[str], cwd: Path, answers: list[tuple[str, str]]) -> tuple[int, str]:
    """Run `inv ARGS` with a pseudo-terminal as its controlling terminal (getpass reads /dev/tty); each time the
    output so far ends with a prompt of answers, type its answer. (exit code, everything it printed)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: inv, on the terminal
        os.chdir(cwd)
        os.execve(str(Path(sys.executable).parent / "inv"), ["inv", *args],
                  {**os.environ, "FLEET_SANDBOX_ONLY": "1", "COLUMNS": "120"})
    seen, pending, deadline = b"", list(answers), time.monotonic() + 20
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal: it ended
                break
            if not chunk:
                break
            seen += chunk
        if pending and seen.rstrip().endswith(pending[0][0].encode()):
            os.write(fd, pending.pop(0)[1].encode())
    if time.monotonic() >= deadline:  # still waiting for something nobody typed: end it
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), seen.decode(errors="replace")


def test_ask_become_pass_asks_for_the_password_only_after_the_plan_is_agreed(tmp_path):
    """`inv deploy -k` on two become hosts: the plan first; no, and no password was ever asked for; yes, then the
    password prompt, which Ctrl-C leaves (exit 130) before any host is contacted."""
    (tmp_path / "hosts.yaml").write_text("hosts:\n" + "".join(
        f"  {name}: {{address: 127.0.0.1, port: 9, user: ops, become: true, venv: /v}}\n" for name in ("a", "b")))
    args = ["deploy", "-i", "hosts.yaml", "-H", "a", "-H", "b", "-p", "glm5-nvfp4", "-k"]
    code, said = _on_a_terminal(args, tmp_path, [("Go ahead? [y/N]", "n\r")])
    assert code == EXIT_BAD_INPUT and "inv deploy on 2 hosts: a, b" in said and "BECOME password" not in said, said
    code, said = _on_a_terminal(args, tmp_path, [("Go ahead? [y/N]", "y\r"), ("BECOME password:", "\x03")])
    assert said.index("Go ahead? [y/N]") < said.index("BECOME password:") and code == 130, said


@pytest.mark.parametrize(("hosts", "groups", "every", "refused"), [
    (["!a"], [], False, "--host '!a' only narrows a selection"),
    ([], ["&canary"], False, "--group '&canary' only narrows a selection"),
    (["!a"], [], True, None),  # every host but a
    (["a*"], [], False, None),
    (["a*", "!ab"], [], False, None),
    (["a", "!b"], [], True, "give one or the other"),
])
def test_exclusions_alone_name_no_host_for_a_task_that_changes_hosts(hosts, groups, every, refused):
    if refused is None:
        targets.require_target("deploy", hosts, groups, every)
        return
    with pytest.raises(InputError) as err:
        targets.require_target("deploy", hosts, groups, every)
    assert err.value.exit_code == EXIT_BAD_INPUT and refused in str(err.value)


@pytest.mark.parametrize("args", [["unlock", "gpu-*", "tok"], ["recover", "-H", "gpu-*", "--dry-run"],
                                  ["recover", "-H", "gpu-1,gpu-2", "--dry-run"]])
def test_a_task_of_one_host_refuses_a_pattern_naming_several(args, tmp_path):
    import shlex
    import subprocess

    inventory = tmp_path / "hosts.yaml"
    inventory.write_text("hosts:\n  gpu-1: {address: 127.0.0.1, port: 9}\n  gpu-2: {address: 127.0.0.1, port: 9}\n")
    done = subprocess.run([str(Path(sys.executable).parent / "inv"), *args, "-i", str(inventory)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    typed = args[2] if args[0] == "recover" else args[1]  # as the operator typed it, quoted as a shell needs it
    assert done.returncode == 2 and done.stderr.splitlines()[-1] == (
        f"error: --host {shlex.quote(typed)}: inv {args[0]} takes one host (2 matched)")


def test_a_deploy_builds_from_the_wheelhouse_its_hosts_inventory_names(tmp_path, monkeypatch):
    from fleet import cli, inventory

    (tmp_path / "sandbox.yaml").write_text("wheelhouse: /var/lib/fleet-sandbox/demo/wheelhouse\n"
                                           "hosts: {sbx0: {address: 172.30.77.10}, sbx1: {address: 172.30.77.11}}\n")
    (tmp_path / "hosts.yaml").write_text("hosts: {gpu1: {address: 10.0.0.1}}\n")
    hosts = inventory.load(tmp_path / "hosts.yaml").hosts
    monkeypatch.delenv("FLEET_WHEELHOUSE", raising=False)
    with pytest.raises(InputError, match=r"^the hosts' inventory files name different wheelhouses \(/var/lib/fleet-"
                                         r"sandbox/demo/wheelhouse, the default\): deploy them apart"):
        cli.use_wheelhouse([hosts["sbx0"], hosts["gpu1"]])
    cli.use_wheelhouse([hosts["gpu1"]])
    assert "FLEET_WHEELHOUSE" not in os.environ  # the operator's default stays the default
    cli.use_wheelhouse([hosts["sbx0"], hosts["sbx1"]])
    assert os.environ["FLEET_WHEELHOUSE"] == "/var/lib/fleet-sandbox/demo/wheelhouse"
    monkeypatch.setenv("FLEET_WHEELHOUSE", "/mine")
    cli.use_wheelhouse([hosts["sbx0"]])
    assert os.environ["FLEET_WHEELHOUSE"] == "/mine"  # set by the operator: it wins


@pytest.mark.parametrize(("hosts", "groups", "said"), [
    ([], ["spare"], "--group spare: no host is in it; nothing was contacted"),
    ([], ["spa*"], "--group 'spa*': no host is in it; nothing was contacted"),
    ([], [], "hosts.yaml: no hosts in this inventory file; nothing was contacted"),
])
def test_a_selection_with_no_host_is_bad_input(hosts, groups, said, tmp_path):
    """Newcomer's third hour: `inv deploy -g spare` (a group with no host yet) and a task on an inventory file of no
    host said 'no hosts selected' with exit 1, 'some host failed', where docs/cli.md says no target is exit 2."""
    from fleet import cli

    inventory = tmp_path / "hosts.yaml"
    inventory.write_text("groups: {spare: {}}\nhosts: {}\n" if groups else "hosts: {}\n")
    with pytest.raises(InputError) as err:
        cli.select_hosts(str(inventory), hosts, groups)
    assert err.value.exit_code == EXIT_BAD_INPUT and str(err.value).endswith(said), str(err.value)


def test_ask_become_pass_without_a_terminal_is_refused_as_bad_input(tmp_path):
    """Newcomer's third hour: `inv probe -k` in a script (no terminal to prompt on) was exit 1, 'some host failed',
    though no host was contacted; refused before anything changed is exit 2, as --yes without a terminal is."""
    import subprocess

    (tmp_path / "hosts.yaml").write_text("hosts: {a: {address: 127.0.0.1, port: 9, user: ops, become: true}}\n")
    done = subprocess.run([str(Path(sys.executable).parent / "inv"), "probe", "-i", "hosts.yaml", "-k"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == EXIT_BAD_INPUT and done.stderr == (
        "error: --ask-become-pass needs a terminal to prompt on; give the hosts a become_password reference (env: or "
        "file:) instead\n"), done.stderr


def test_ask_become_pass_where_no_host_would_be_asked_says_so_and_goes_on(tmp_path):
    """-k on hosts that log in as root (or name their own become_password) used to be ignored in silence."""
    import subprocess

    (tmp_path / "hosts.yaml").write_text("hosts: {a: {address: 127.0.0.1, port: 9, user: root}}\n")
    done = subprocess.run([str(Path(sys.executable).parent / "inv"), "probe", "-i", "hosts.yaml", "-k", "--json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.stderr.startswith("fleet: --ask-become-pass: no host here uses become without a become_password of "
                                  "its own: nothing to ask\n"), done.stderr
    assert done.returncode == 1 and '"host": "a"' in done.stdout  # port 9: the probe ran and failed on its own
