"""`inv check -i INV` checks a playbook's pins against the wheelhouse a deploy of INV's hosts builds from: the
inventory's `wheelhouse:` (FLEET_WHEELHOUSE still winning), issue 46, finding 8 (an override not applied; the
eighteenth newcomer's hour). It read ~/.cache/fleet/wheelhouse: on the sandbox, whose inventory names its own, every
pin was `no wheel ... in the wheelhouse ~/.cache/fleet/wheelhouse` with `pip download -d` into a folder the deploy
never reads, and `inv check --lock -i INV` was exit 2 while the deploy built the same pins."""

from __future__ import annotations

import json

from fleet.cli import check

BOOK = """name: pinned
model: {path: /models/x}
packages: {sglang: 0.5.9}
ladder: [{name: plain}]
"""


def test_check_with_an_inventory_reads_the_wheelhouse_it_names(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLEET_WHEELHOUSE", "")  # recorded: what check sets is undone after the test
    monkeypatch.delenv("FLEET_WHEELHOUSE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "wh").mkdir()
    inv = tmp_path / "inv" / "hosts.yaml"
    inv.parent.mkdir()
    inv.write_text(f"wheelhouse: {tmp_path / 'wh'}\nhosts:\n  a: {{address: 10.0.0.1}}\n")
    book = tmp_path / "pinned.yaml"
    book.write_text(BOOK)
    check.command([str(book)], str(inv), as_json=True)
    [found] = json.loads(capsys.readouterr().out)["playbooks"]
    said = " ".join(found["warnings"])
    assert f"in the wheelhouse {tmp_path / 'wh'} " in said, said
    assert ".cache/fleet/wheelhouse" not in said, said
