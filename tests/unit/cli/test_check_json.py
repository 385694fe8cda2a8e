"""`inv check --json` names each playbook, one with schema errors too, and the inventory it checked against
(was `"name": null` and `"inventory": null`, the inventory's key holding only its error)."""

from __future__ import annotations

import json
from pathlib import Path

from fleet.cli import check

REPO = Path(__file__).resolve().parents[3]


def test_json_names_the_playbook_that_does_not_load_and_the_inventory(tmp_path, capsys):
    book = tmp_path / "broken.yaml"
    book.write_text("name: my-llama\nmodel: {path: /m}\nserve: {port: not-a-port}\nladder: 3\n")
    stemmed = tmp_path / "nameless.yaml"
    stemmed.write_text("ladder: 3\n")
    (tmp_path / "inventory").mkdir()  # an inventory reads every *.yaml of its folder
    hosts = tmp_path / "inventory" / "hosts.yaml"
    hosts.write_text("hosts:\n  h: {address: 127.0.0.1}\n")
    assert check.command([str(book), str(stemmed)], str(hosts), True) == 2
    report = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in report["playbooks"]] == ["my-llama", "nameless"]
    assert all(p["errors"] for p in report["playbooks"])
    assert (report["inventory"], report["inventory_error"]) == (str(hosts), None)


def test_json_says_the_inventory_and_its_error_apart(tmp_path, capsys):
    book = tmp_path / "b.yaml"
    book.write_text("ladder: 3\n")
    missing = tmp_path / "none.yaml"
    check.command([str(book)], str(missing), True)
    report = json.loads(capsys.readouterr().out)
    assert report["inventory"] == str(missing) and "no such file" in report["inventory_error"]
    check.command([str(book)], None, True)
    report = json.loads(capsys.readouterr().out)
    assert (report["inventory"], report["inventory_error"]) == (None, None)


def test_every_path_in_json_is_absolute_however_it_was_given(tmp_path, capsys, monkeypatch):
    """A newcomer's pass: `inv check --json` named a playbook given by name absolute, one given as a path and the
    inventory as typed (relative): one form now, absolute, in the paths and in the errors naming them."""
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "bad.yaml").write_text("name: bad\nmodel: {path: /m}\nladder: 3\n")
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory" / "hosts.yaml").write_text("hosts:\n  h: {address: 127.0.0.1}\n")
    monkeypatch.chdir(tmp_path / "books")
    assert check.command(["./bad.yaml", "glm5-nvfp4"], "../inventory/hosts.yaml", True) == 2
    report = json.loads(capsys.readouterr().out)
    assert [p["path"] for p in report["playbooks"]] == [str(tmp_path / "books" / "bad.yaml"),
                                                        str(REPO / "playbooks" / "glm5-nvfp4.yaml")]
    assert report["inventory"] == str(tmp_path / "inventory" / "hosts.yaml")
    assert report["playbooks"][0]["errors"][0].startswith(f"{tmp_path / 'books' / 'bad.yaml'}:3: ladder")
    check.command(["./bad.yaml"], "../inventory/none.yaml", True)
    assert f"--inventory {tmp_path / 'inventory' / 'none.yaml'}: no such file" == json.loads(
        capsys.readouterr().out)["inventory_error"]
