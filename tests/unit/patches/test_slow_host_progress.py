"""`inv audit` and `inv patch` say where they stand while a host's program runs (issue 46, finding 5; h-new24's
hour): the scan of a host's packages and its patch program take up to 300 s each, and a host slow to run them (its
python held 40 s on the sandbox's sbx2) showed nothing for 42 s, then the table."""

from __future__ import annotations

from pathlib import Path

from ticking import Said

from fleet.inventory import Host
from fleet.multihost import patch as patch_run
from fleet.patches import audit as archgate
from fleet.patches.engine import HostResult
from fleet.ssh.connect import ConnectOptions


def hosts(n: int) -> list[Host]:
    return [Host(name=f"h{i}", address=f"10.0.0.{i}", port=None, user=None, become=False, identity_file=None,
                 known_hosts=None, ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(),
                 source=Path("hosts.yaml")) for i in range(n)]


class _Conn:
    def close(self) -> None:
        pass


def test_an_audit_says_where_its_scans_stand(monkeypatch):
    said = Said()

    def audit_host(conn, host, **kw):
        if host.name == "h1":  # the slow host: its scan ends once where the audit stands was said
            assert said.ticked.wait(10), said
        return None

    monkeypatch.setattr(archgate, "open_connection", lambda host, opts: _Conn())
    monkeypatch.setattr(archgate.venvs, "serving", lambda conn, host: host)
    monkeypatch.setattr(archgate, "audit_host", audit_host)
    archgate.audit_hosts(hosts(2), ConnectOptions(), [], None, [], False, said)
    assert any(str(m).startswith("phase audit scan: ") and "of 300s budget; 1 of 2 hosts done, still running: h1"
               in m for m in said), said


def test_a_patch_check_says_where_its_hosts_stand(monkeypatch):
    said = Said()

    class Session:
        conn = _Conn()

        @classmethod
        def open(cls, host, opts):
            return cls()

        def close(self) -> None:
            pass

    def check_host(conn, host, sets, allow_prebuilt):
        if host.name == "h1":
            assert said.ticked.wait(10), said
        return HostResult(host.name, "check", True)

    monkeypatch.setattr(patch_run, "HostSession", Session)
    monkeypatch.setattr(patch_run.venvs, "serving", lambda conn, host: host)
    monkeypatch.setattr(patch_run, "check_host", check_host)
    results = patch_run.run_hosts(hosts(2), [], "check", ConnectOptions(), progress=said)
    assert [r.ok for r in results] == [True, True]
    assert any(str(m).startswith("phase patch check: ") and "of 300s budget; 1 of 2 hosts done, still running: h1"
               in m for m in said), said
