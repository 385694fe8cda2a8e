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


def test_every_schema_error_of_the_inventory_in_one_pass(tmp_path, capsys):
    """A newcomer's hour: an inventory with six errors took six runs of `inv check`, one error each."""
    book = tmp_path / "b.yaml"
    book.write_text("name: b\nmodel: {path: /m}\nladder: [{name: plain}]\n")
    (tmp_path / "inventory").mkdir()
    hosts = tmp_path / "inventory" / "hosts.yaml"
    hosts.write_text("defaults:\n  usr: root\n  venv: relative/venv\nhosts:\n  h1:\n    address: 10.0.0.1\n"
                     "    port: 99999\n    vars:\n      env: {bad-name: x}\n  h2:\n    adress: 10.0.0.2\n"
                     "    become_password: hunter2\n")
    assert check.command([str(book)], str(hosts), False) == 2
    lines = [line for line in capsys.readouterr().out.splitlines() if str(hosts) in line and line.startswith("error")]
    assert [line.split(": ")[2] for line in lines] == [
        "defaults.venv", "defaults.usr", "hosts.h1.port", "hosts.h1.vars.env", "hosts.h2.become_password",
        "hosts.h2.address", "hosts.h2.adress"]
    assert check.command([str(book)], str(hosts), True) == 2
    report = json.loads(capsys.readouterr().out)
    assert len(report["inventory_errors"]) == 7 and report["inventory_error"] == report["inventory_errors"][0]


def test_every_name_that_is_no_playbook_is_said_beside_the_others_problems(tmp_path, capsys):
    """Issue 46, finding 7 (h-check7): the first --playbook that named nothing stopped inv check, so two typos took
    two runs and hid every problem of the playbooks that were there."""
    book = tmp_path / "b.yaml"
    book.write_text("name: b\nmodel: {path: /m}\nladder: 3\n")
    assert check.command(["no-such-one", str(book), "no-such-two"], None, True) == 2
    report = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in report["playbooks"]] == ["no-such-one", "b", "no-such-two"]
    assert ["no such playbook" in p["errors"][0] for p in report["playbooks"]] == [True, False, True]
    assert report["playbooks"][1]["errors"][0].startswith(f"{book}:3: ladder")
    assert report["errors"] == 3
    assert check.command(["no-such-one", "no-such-two"], None, False) == 2
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out[:2]] == ["error", "error"] and "2 errors" in out[-1]


def test_every_key_written_twice_is_said_beside_the_other_problems(tmp_path, capsys):
    """Issue 46, finding 7 (h-check7): a duplicate key stopped the file's reading at the first one, so a second
    duplicate, and every other problem of the playbook and inventory, came one run later."""
    book = tmp_path / "b.yaml"
    book.write_text("name: b\nmodel: {path: /m}\nflags: {tp-size: 1, tp-size: 2, tp-szie: 1}\n"
                    "ladder:\n  - {name: a}\n  - {name: a}\nkeep_releases: 0\nkeep_releases: 1\n")
    (tmp_path / "inventory").mkdir()
    hosts = tmp_path / "inventory" / "hosts.yaml"
    hosts.write_text("hosts:\n  h: {address: 10.0.0.1, port: x}\n  h: {address: 10.0.0.2}\n  g: {address: 1, user: A}\n"
                     "defaults: {user: root, user: root}\n")
    assert check.command([str(book)], str(hosts), True) == 2
    report = json.loads(capsys.readouterr().out)
    said = [e.removeprefix(f"{book}:") for e in report["playbooks"][0]["errors"]]
    assert [e.split(": ")[0:2] for e in said] == [["3", "flags.tp-size"], ["3", "flags.tp-szie"], ["4", "ladder"],
                                                   ["8", "keep_releases"]], said
    assert "duplicate key" in said[0] and "duplicate key" in said[3] and "appears twice" in said[2]
    inv = [e.removeprefix(f"{hosts}:") for e in report["inventory_errors"]]
    assert [e.split(": ")[0:2] for e in inv] == [["3", "hosts.h"], ["5", "defaults.user"], ["4", "hosts.g.user"],
                                                  ["4", "hosts.g.address"]], inv  # a key twice: the last is read
