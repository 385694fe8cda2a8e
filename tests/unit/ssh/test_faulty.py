"""fleet.ssh.faulty: the fault harness's runner is put on a connection only under its variables, and wraps the
I/O loop from outside (fleet.ssh.remote has no fault branch of its own)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from fakesession import HOST

from fleet import faulthook
from fleet.ssh import faulty, remote


class Transport:
    def __init__(self) -> None:
        self.closed = False

    def is_active(self) -> bool:
        return not self.closed

    def close(self) -> None:
        self.closed = True


class Conn:
    def __init__(self) -> None:
        self.transport = Transport()
        self.client = self

    def get_transport(self) -> Transport:
        return self.transport


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    faulthook.number_from_one()
    for name in (faulthook.TRACE, faulthook.AT):
        monkeypatch.delenv(name, raising=False)


def test_a_connection_gets_the_fault_runner_only_under_the_harness_variables(monkeypatch):
    plain = Conn()
    faulty.install(plain)  # type: ignore[arg-type]
    assert remote._runner(plain) is remote.DIRECT  # type: ignore[arg-type]
    monkeypatch.setenv(faulthook.AT, "3:fail")
    wrapped = Conn()
    faulty.install(wrapped)  # type: ignore[arg-type]
    assert remote._runner(wrapped) is faulty.FAULTY  # type: ignore[arg-type]


def test_the_armed_step_fails_without_running_and_the_others_are_counted(monkeypatch, tmp_path):
    monkeypatch.setenv(faulthook.AT, "1:fail")
    monkeypatch.setenv(faulthook.TRACE, str(tmp_path / "trace"))
    conn = Conn()
    res = faulty.FAULTY.run_bytes(conn, HOST, "systemctl daemon-reload", b"", 5, 100)  # type: ignore[arg-type]
    assert (res.exited, res.stderr) == (1, b"fleet fault hook: injected failure\n")
    assert (tmp_path / "trace").read_text().split("\t")[2].endswith(": systemctl daemon-reload\n")


def test_a_dropped_journal_channel_is_a_lost_link_and_nothing_is_opened(monkeypatch):
    monkeypatch.setenv(faulthook.AT, "1:drop")
    conn = Conn()
    with pytest.raises(remote.ConnectionLost, match="fleet fault hook: link dropped"):
        faulty.FAULTY.open_channel(conn, HOST, "journalctl -u sglang -f", 5, "the journal")  # type: ignore[arg-type]
    assert conn.transport.closed


def test_the_io_loop_has_no_fault_branch():
    tree = ast.parse(Path(remote.__file__).read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert "faulthook" not in names | imported


def test_every_verb_a_step_label_passes_over_is_a_function_of_fleet_host():
    """A verb renamed in fleet.host without its name here would label its steps by itself, not by who asked."""
    host = Path(remote.__file__).parents[1] / "host"
    defined = {n.name for p in host.glob("*.py") for n in ast.walk(ast.parse(p.read_text()))
               if isinstance(n, ast.FunctionDef)}
    assert faulty._VERBS <= defined, sorted(faulty._VERBS - defined)
