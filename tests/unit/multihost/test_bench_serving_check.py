"""`inv bench` measures only the release's own server (fleet.multihost.bench._refuse_unless_serving). The check
took any 200 on /health as "it serves": with the unit stopped and another process answering on serve.port (an
orphan sglang of an older release, another team's server), the benchmark measured that process and stored its
figures in the current release's manifest, as the release's (h-adv18)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fleet.errors import FleetError
from fleet.inventory import Host
from fleet.multihost import bench

HOST = Host(name="sbx0", address="10.0.0.1", port=None, user=None, become=False, identity_file=None,
            known_hosts=None, ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(),
            source=Path("hosts.yaml"))
SERVE = SimpleNamespace(unit="sglang", book=SimpleNamespace(serve=SimpleNamespace(port=30000)))
LISTENER = 'LISTEN 0 2048 0.0.0.0:30000 0.0.0.0:* users:(("python3",pid=4242,fd=7))'


def check(monkeypatch, code: str, active: str, sub: str, other: str = "", files: tuple[str, ...] = (),
          serve: SimpleNamespace = SERVE) -> None:
    monkeypatch.setattr(bench.hostcurl, "health_code", lambda conn, host, port: code)
    monkeypatch.setattr(bench, "unit_state", lambda conn, host, unit: {"ActiveState": active if unit == "sglang"
                                                                       else "inactive", "SubState": sub})
    monkeypatch.setattr(bench, "port_users", lambda conn, host, port, unit: other if unit == "sglang" else LISTENER,
                        raising=False)
    release = SimpleNamespace(id="r1", files={f: {} for f in files})
    bench._refuse_unless_serving(None, HOST, serve, release)  # type: ignore[arg-type]


def test_the_units_own_server_is_measured(monkeypatch):
    check(monkeypatch, "200", "active", "running")


def test_a_200_while_the_unit_is_stopped_is_not_the_releases_server(monkeypatch):
    with pytest.raises(FleetError) as refused:
        check(monkeypatch, "200", "inactive", "dead", LISTENER)
    said = str(refused.value)
    assert said.startswith("sbx0: GET /health on port 30000 answered 200, but not from unit sglang (inactive "
                           "(dead))"), said
    assert "pid=4242" in said and "release r1 not measured" in said and "\n" not in said


def test_a_200_from_a_process_outside_the_running_unit_is_refused(monkeypatch):
    with pytest.raises(FleetError) as refused:
        check(monkeypatch, "200", "activating", "auto-restart", LISTENER)
    assert "not from unit sglang (activating (auto-restart))" in str(refused.value)
    with pytest.raises(FleetError) as refused:
        check(monkeypatch, "200", "active", "running", LISTENER)
    assert "port 30000 is held by a process that is not unit sglang's" in str(refused.value)


def test_a_server_that_answers_nothing_is_said_as_before(monkeypatch):
    with pytest.raises(FleetError) as refused:
        check(monkeypatch, "000", "inactive", "dead")
    assert str(refused.value).startswith("sbx0: the server does not serve (unit sglang inactive (dead), GET /health "
                                         "on port 30000 answered nothing): release r1 not measured")


def test_the_unit_asked_after_is_the_releases_own_under_another_playbook(monkeypatch):
    """--playbook naming another unit (serve.unit sglang-b) than the one the release installed (sglang): its server
    is measured, as the line before the benchmark says."""
    other = SimpleNamespace(unit="sglang-b", book=SERVE.book)
    files = ("before:/etc/systemd/system/x.service", "/etc/systemd/system/sglang.service", "/etc/fleet/sglang.env")
    check(monkeypatch, "200", "active", "running", files=files, serve=other)
    with pytest.raises(FleetError):
        check(monkeypatch, "200", "active", "running", serve=other)  # no unit recorded: the playbook's
