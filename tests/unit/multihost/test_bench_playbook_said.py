"""`inv bench` measures with the bench settings and port of the playbook --playbook (or the inventory's group)
names, whatever playbook the host's release serves (issue 46, finding 8: an override said; the eighteenth newcomer's
hour): on the sandbox, sbx0 serving glm5-nvfp4 was benchmarked with the group's llama playbook and the result stored
in glm5's release, nothing said."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from fleet.inventory import Host
from fleet.multihost import bench
from fleet.playbook import load

HOST = Host(name="sbx0", address="10.0.0.1", port=None, user=None, become=False, identity_file=None,
            known_hosts=None, ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(),
            source=Path("hosts.yaml"))


@dataclass
class Record:
    release: str | None = None
    rung: str | None = None


def measured(tmp_path, monkeypatch, served: str) -> list[str]:
    (tmp_path / "llama.yaml").write_text("name: llama\nmodel: {path: /m}\nladder: [{name: plain}]\n")
    book = load(tmp_path / "llama.yaml")

    @contextmanager
    def run(*args, **kwargs):
        yield SimpleNamespace(session=SimpleNamespace(conn=None))

    release = SimpleNamespace(id="20261206T112544Z-c214", rung="no-fusion", playbook=served, facts={}, dir="/d",
                              files={})
    monkeypatch.setattr(bench, "host_run", run)
    monkeypatch.setattr(bench, "ReleaseStore", lambda conn, host: SimpleNamespace(current=lambda: release))
    monkeypatch.setattr(bench.benching, "run", lambda *args: Record())
    monkeypatch.setattr(bench.benching, "store_in_release", lambda *args: None)
    monkeypatch.setattr(bench, "_refuse_unless_serving", lambda *args: None)  # it serves (test_bench_gate asks)
    said: list[str] = []
    assert bench.bench_host(HOST, book, tmp_path / "llama.yaml", None, say=said.append).ok  # type: ignore[arg-type]
    return said


def test_a_playbook_other_than_the_releases_is_said(tmp_path, monkeypatch):
    said = measured(tmp_path, monkeypatch, served="glm5-nvfp4")
    assert said[0] == ("release 20261206T112544Z-c214 serves playbook glm5-nvfp4: measured with llama's bench settings "
                       "and port (serve.port 30000), as --playbook or the inventory's group names it"), said


def test_the_releases_own_playbook_says_nothing_more(tmp_path, monkeypatch):
    said = measured(tmp_path, monkeypatch, served="llama")
    assert not any("serves playbook" in s for s in said), said
