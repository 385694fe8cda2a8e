"""A replica's drain before its stop (issue 46, finding 5; the eighteenth newcomer's hour): it said `draining: N
request(s) still running` as a line of its own every 0.5 s (240 lines in a 120 s drain off a terminal), and a drain
that ran out of its budget went on to the stop without a word. Now where it stands is a Live line (in place on a
terminal, one every 30 s off one), and running out of its budget is said."""

from __future__ import annotations

from pathlib import Path

from fleet.inventory import Host
from fleet.multihost import router
from fleet.playbook import load
from fleet.progress import Live

HOST = Host(name="r1", address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(), source=Path("hosts.yaml"))


def drained(tmp_path, monkeypatch, running: list[float]) -> list[str]:
    (tmp_path / "p.yaml").write_text("name: p\nmodel: {path: /m}\nladder: [{name: base}]\nbudgets: {stop: 5}\n")
    now = [0.0]
    left = iter(running)
    monkeypatch.setattr(router.hostcurl, "metrics_text", lambda conn, host, port: "")
    monkeypatch.setattr(router, "running_requests", lambda text: next(left, running[-1]))
    said: list[str] = []
    router.drain(None, HOST, load(tmp_path / "p.yaml"), said.append, clock=lambda: now[0],  # type: ignore[arg-type]
                 sleep=lambda s: now.__setitem__(0, now[0] + s))
    return said


def test_where_a_drain_stands_is_one_live_line_not_a_line_each_half_second(tmp_path, monkeypatch):
    said = drained(tmp_path, monkeypatch, [3.0, 2.0, 0.0])
    assert said == ["phase drain: 0s of 5s budget; 3 request(s) still running",
                    "phase drain: 0s of 5s budget; 2 request(s) still running"]
    assert all(isinstance(m, Live) for m in said)


def test_a_drain_past_its_budget_says_the_stop_goes_on(tmp_path, monkeypatch):
    said = drained(tmp_path, monkeypatch, [4.0])
    assert said[-1] == "drain: 4 request(s) still running after 5s (budgets.stop): stopping all the same"
    assert all(isinstance(m, Live) for m in said[:-1]) and not isinstance(said[-1], Live)
