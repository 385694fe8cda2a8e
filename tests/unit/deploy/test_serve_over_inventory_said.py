"""The playbook's serve.venv and serve.unit over the inventory's venv and unit are said (issue 46, 8, a newcomer's
form): an inventory that gives a host its venv (`defaults: {venv: /root/ml-env}`, as the sandbox's does) and a
playbook with `serve.venv: /opt/other-venv` deployed into the playbook's, unsaid, where for the environment the
inventory wins (vars.env over serve.env). The dry run showed only an ExecStart line, and the deploy failed in
`systemd-analyze verify`. Deployer.plan says the line in both; a setting the inventory leaves to fleet's default
(no `unit:` anywhere: `sglang`) replaces nothing the operator wrote and is not said."""

from __future__ import annotations

from pathlib import Path

from fleet import inventory, playbook
from fleet.deploy.serving import Serving

BOOK = """name: b
model: {path: /models/m}
serve: {venv: /opt/other-venv, unit: sglang-b}
ladder:
  - name: plain
"""


def _serving(tmp_path: Path, inventory_text: str, book: str = BOOK) -> Serving:
    (tmp_path / "inv").mkdir()
    (tmp_path / "inv" / "hosts.yaml").write_text(inventory_text)
    (tmp_path / "b.yaml").write_text(book)
    host = inventory.load(tmp_path / "inv" / "hosts.yaml").hosts["gpu-1"]
    return Serving.of(host, playbook.load(tmp_path / "b.yaml"), tmp_path / "b.yaml")


def test_a_venv_the_inventory_gives_and_the_playbook_replaces_is_said(tmp_path: Path) -> None:
    serve = _serving(tmp_path, "defaults: {venv: /root/ml-env}\nhosts:\n  gpu-1: {address: 10.0.0.1}\n")
    assert serve.venv == "/opt/other-venv"  # the playbook's wins, as docs/playbooks.md's serve table says
    assert serve.env_overrides(serve.book.ladder) == [
        "venv /opt/other-venv from the playbook's serve.venv, over the inventory's venv /root/ml-env of gpu-1 "
        "(docs/playbooks.md#serve)"]  # its unit: left to fleet's default, sglang: nothing the operator wrote


def test_a_host_s_own_unit_replaced_is_said_and_the_same_value_is_not(tmp_path: Path) -> None:
    serve = _serving(tmp_path, "hosts:\n  gpu-1: {address: 10.0.0.1, unit: sglang-site, venv: /opt/other-venv}\n")
    assert serve.env_overrides(serve.book.ladder) == [
        "unit sglang-b from the playbook's serve.unit, over the inventory's unit sglang-site of gpu-1 "
        "(docs/playbooks.md#serve)"]


def test_a_playbook_that_names_neither_replaces_nothing(tmp_path: Path) -> None:
    serve = _serving(tmp_path, "defaults: {venv: /root/ml-env, unit: s}\nhosts:\n  gpu-1: {address: 10.0.0.1}\n",
                     book="name: b\nmodel: {path: /models/m}\nladder:\n  - name: plain\n")
    assert serve.env_overrides(serve.book.ladder) == []


def test_the_host_is_probed_and_patched_in_the_venv_the_unit_runs(tmp_path: Path) -> None:
    """The same newcomer's deploy of a playbook whose serve.venv is a venv of sglang 0.5.23 (the README tour's
    pinned upgrade built it) on a host whose inventory venv has 0.5.9: the unit ran 0.5.23, and the deploy said
    `versions: sglang 0.5.23 -> 0.5.9` and recorded 0.5.9 (`inv history`): its probe, preflight and patches read
    the inventory's venv (Serving.host kept it), a downgrade that never happened (issue 46, 11's kind)."""
    serve = _serving(tmp_path, "defaults: {venv: /root/ml-env}\nhosts:\n  gpu-1: {address: 10.0.0.1}\n")
    assert (serve.host.venv, serve.venv, serve.origin.venv) == ("/opt/other-venv", "/opt/other-venv", "/root/ml-env")
