"""`inv check` in rounds, as the newcomer of issue 46 found it again (finding 7): two problems in one place, where
fixing the one the check named brought out another it had not. Each case: the report on the playbook with both
problems holds every problem of the playbook with the first one fixed, or says the rule it could not run."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import yaml

from fleet.cli import check

BOOK: dict[str, Any] = {"name": "t", "model": {"path": "/models/m"}, "flags": {"tp-size": 8},
                        "ladder": [{"name": "r0"}, {"name": "r1", "after": ["HANG"]}]}


def _report(root: Path, book: dict[str, Any]) -> list[str]:
    (root / "t.yaml").write_text(yaml.safe_dump(book, sort_keys=False))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check.command([str(root / "t.yaml")], None, True)
    found = json.loads(out.getvalue())["playbooks"][0]
    return [*found["errors"], *found["warnings"]]


def test_a_flag_under_a_refused_version_range_is_checked_all_the_same(tmp_path):
    """`flags_by_sglang: {"~~0.5": {foo: 1}}`: the range was refused and its flags dropped unchecked; with the
    range fixed, `--foo is in no sglang release` came out. A flag's name is wrong in every release alike."""
    broken = {**BOOK, "ladder": [{"name": "r0", "flags_by_sglang": {"~~0.5": {"foo-flag": 1}}}]}
    fixed = {**BOOK, "ladder": [{"name": "r0", "flags_by_sglang": {"<0.5.14": {"foo-flag": 1}}}]}
    after = _report(tmp_path, fixed)
    assert any("--foo-flag is in no sglang release" in p for p in after)
    before = _report(tmp_path, broken)
    assert any("bad version range clause '~~0.5'" in p for p in before)
    assert any("--foo-flag is in no sglang release" in p for p in before), before


def test_nodes_that_is_no_mapping_says_the_split_rule_was_not_checked(tmp_path):
    """`nodes: 3` was refused and nothing said of each rung's TP x PP against the count; with `nodes: {count: 3}`
    `TP x PP = 8 x 1 does not split over 3 nodes` came out for every rung."""
    after = _report(tmp_path, {**BOOK, "nodes": {"count": 3}})
    assert any("does not split over 3 nodes" in p for p in after)
    before = _report(tmp_path, {**BOOK, "nodes": 3})
    assert any("nodes:" in p and "valid dictionary" in p for p in before), before
    assert any("not checked against nodes.count, which is refused" in p for p in before), before


def test_a_group_binding_a_playbook_that_names_nothing_is_said(tmp_path):
    """`inv check -i` said 0 errors of an inventory whose group binds `playbook: nosuch` (or a path to no file);
    the deploy that relied on it then stopped on `--playbook nosuch: no such playbook`, an option never typed."""
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(BOOK))
    inv = tmp_path / "inv" / "hosts.yaml"
    inv.parent.mkdir()
    inv.write_text(yaml.safe_dump({"groups": {"a": {"hosts": ["h1"], "playbook": "nosuch-pb"},
                                              "b": {"hosts": ["h2"], "playbook": "gone.yaml"},
                                              "c": {"hosts": ["h3"], "playbook": "../t.yaml"}},
                                   "hosts": {"h1": {"address": "10.0.0.1"}, "h2": {"address": "10.0.0.2"},
                                             "h3": {"address": "10.0.0.3"}}}))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = check.command([str(tmp_path / "t.yaml")], str(inv), True)
    errors = json.loads(out.getvalue())["inventory_errors"]
    assert code == 2
    assert [e.split(": ")[1:3] for e in errors] == [["groups.a.playbook", "nosuch-pb"],
                                                    ["groups.b.playbook", "gone.yaml"]], errors
    assert "no such playbook" in errors[0] and "no such file" in errors[1]


def test_a_rung_whose_name_is_missing_or_refused_is_checked_all_the_same(tmp_path):
    """A rung with no name (or `name: "bad name!"`) was one error and nothing else: its unknown flag, failure
    class, patch set and SM came out only once it had a good name (5 errors, 2 before)."""
    rungs = [{"name": "ok"}, {"flags": {"tp-szie": 2}, "after": ["NOPE"], "patches": ["nope-set"],
                              "when": {"sm": [999]}}, {"name": "bad name!", "flags": {"enable-fooo": True}}]
    named = [rungs[0], {"name": "two", **rungs[1]}, {**rungs[2], "name": "three"}]
    after = _report(tmp_path, {**BOOK, "ladder": named})
    assert len(after) == 5, after
    before = _report(tmp_path, {**BOOK, "ladder": rungs})
    for problem in after:
        assert any(problem.split(": ", 2)[1:] == p.split(": ", 2)[1:] for p in before), (problem, before)
    assert any("ladder.1.name: required key is missing" in p for p in before)


def test_a_key_written_twice_says_its_first_copy_is_not_checked(tmp_path):
    """An inventory with a group and a host each written twice: `duplicate key` (6 errors), and once the second copies
    were deleted, the first ones' problems came out (9): YAML reads the last copy only. The duplicate's line now
    says the other copy is not checked, so deleting either one brings out nothing that was not announced."""
    inv = tmp_path / "inv" / "hosts.yaml"
    inv.parent.mkdir()
    inv.write_text("groups:\n  g1: {hosts: [h1, h9], colour: 2}\n  g1: {hosts: [h1]}\n"
                   "hosts:\n  h1: {address: 10.0.0.1}\n")
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(BOOK))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check.command([str(tmp_path / "t.yaml")], str(inv), True)
    errors = json.loads(out.getvalue())["inventory_errors"]
    assert len(errors) == 1 and errors[0].endswith(
        "hosts.yaml:3: groups.g1: duplicate key (also at line 2: YAML reads only this one, so the one at line 2 is not "
        "checked)"), errors


def _inventory_report(root: Path, hosts: str) -> list[str]:
    (root / "inv").mkdir(exist_ok=True)
    (root / "inv" / "hosts.yaml").write_text(hosts)
    (root / "t.yaml").write_text(yaml.safe_dump(BOOK, sort_keys=False))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check.command([str(root / "t.yaml")], str(root / "inv" / "hosts.yaml"), True)
    return json.loads(out.getvalue())["inventory_errors"]


def test_a_hosts_ssh_config_that_every_host_task_refuses_is_said_beside_the_schema_errors(tmp_path):
    """The fifth newcomer: `inv check -i` said 0 errors of an inventory whose host names an ssh_config that does
    not exist, and `inv probe` then refused it (exit 2); with the schema fixed, a second round found it."""
    said = _inventory_report(tmp_path, "hosts:\n  a: {address: 10.0.0.1, ssh_config: /nonexistent/cfg}\n"
                                       "  b: {address: 10.0.0.2, port: 0}\n")
    assert any("hosts.b.port" in p for p in said), said
    assert any("hosts.a.ssh_config: no such file /nonexistent/cfg" in p for p in said), said
    (tmp_path / "cfg").write_text('Host *\n  Match exec "true"\n')
    said = _inventory_report(tmp_path, f"hosts:\n  a: {{address: 10.0.0.1, ssh_config: {tmp_path / 'cfg'}}}\n")
    assert any("'Match exec \"true\"' refused: FLEET_SANDBOX_ONLY=1" in p for p in said), said  # tests run under it
