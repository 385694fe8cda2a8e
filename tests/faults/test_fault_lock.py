"""The host lock under faults: a lock whose owner may still be alive is never taken over (and `inv unlock`
removes it), and deploys that overlap on a host or on part of a fleet never run at once on one host."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import threading
import time

from faultkit import PLAIN, current, in_progress, rung, serving
from fleetcli import inv, inv_json, llama_playbook, sh

from fleet.host import lock as hostlock
from fleet.ssh.connect import open_connection


def _plant_lock(inventory, host: str, owner: dict) -> None:
    sh(inventory, host, f"mkdir -p /var/lib/fleet/lock && echo {shlex.quote(json.dumps(owner))} "
                        "> /var/lib/fleet/lock/owner.json")


def test_a_lock_whose_owner_may_be_alive_is_kept_until_unlock(sandbox, sandbox_inventory, tmp_path):
    book = llama_playbook(tmp_path, PLAIN, name="llama-lock-kept")
    # Another machine's run (its pid cannot be checked from here), 7 hours old: stale-looking, still kept.
    elsewhere = {"owner": "ann@elsewhere", "machine": "elsewhere", "pid": 4242, "purpose": "deploy x",
                 "time": "2026-01-01T00:00:00Z", "epoch": 1, "token": "tok-elsewhere"}
    _plant_lock(sandbox_inventory, "sbx1", elsewhere)
    rc, data, _ = inv_json(sandbox, "deploy", "--host", "sbx1", "--playbook", str(book))
    assert rc == 1 and "host is locked" in data["error"] and "ann@elsewhere pid 4242" in data["error"]
    assert "STALE" in data["error"] and "h old" in data["error"] and "--token tok-elsewhere" in data["error"]
    # This machine, a live pid (the test itself): not stale, not taken.
    here = dict(elsewhere, owner="me@" + socket.gethostname(), machine=socket.gethostname(), pid=os.getpid(),
                epoch=int(time.time()), token="tok-alive")
    sh(sandbox_inventory, "sbx1", "rm -rf /var/lib/fleet/lock")
    _plant_lock(sandbox_inventory, "sbx1", here)
    rc, data, _ = inv_json(sandbox, "deploy", "--host", "sbx1", "--playbook", str(book))
    assert rc == 1 and f"pid {os.getpid()}" in data["error"] and "STALE" not in data["error"]
    assert json.loads(sh(sandbox_inventory, "sbx1", "cat /var/lib/fleet/lock/owner.json"))["token"] == "tok-alive"
    wrong = inv(sandbox, "unlock", "--host", "sbx1", "--token", "not-the-token")
    assert wrong.returncode == 1 and "does not carry token" in wrong.stderr
    assert inv(sandbox, "unlock", "--host", "sbx1", "--token", "tok-alive").returncode == 0
    rc, data, err = inv_json(sandbox, "deploy", "--host", "sbx1", "--playbook", str(book))
    assert rc == 0 and data["status"] == "ok" and "recovered" not in data, err[-2000:]


def test_two_deploys_at_once_on_one_host_never_overlap(sandbox, sandbox_inventory, tmp_path):
    a = llama_playbook(tmp_path, PLAIN, name="llama-race-a")
    b = llama_playbook(tmp_path, rung("plain-b", X="b"),
                       name="llama-race-b")
    procs = [inv(sandbox, "deploy", "--host", "sbx3", "--playbook", str(p), "--json", wait=False) for p in (a, b)]
    results = [(p.wait(timeout=300), json.loads(p.communicate()[0])) for p in procs]
    ok = [d for rc, d in results if rc == 0 and d["status"] == "ok"]
    refused = [d for rc, d in results if rc == 1]
    assert ok, results  # at least one served; a loser was refused naming the holder, never interleaved
    for d in refused:
        assert d["status"] == "failed" and re.search(r"host is locked .* for deploy llama-race-[ab]", d["error"])
    assert len(ok) + len(refused) == 2
    assert in_progress(sandbox_inventory, "sbx3") == [] and serving(sandbox_inventory, "sbx3")
    assert current(sandbox_inventory, "sbx3") in {d["release"] for d in ok}


def test_two_fleet_deploys_overlapping_on_one_host(sandbox, sandbox_inventory, tmp_path):
    a = llama_playbook(tmp_path, PLAIN, name="llama-fleet-a")
    b = llama_playbook(tmp_path, rung("plain-b", X="b"),
                       name="llama-fleet-b")
    first = inv(sandbox, "deploy", "--host", "sbx1", "--host", "sbx3", "--playbook", str(a), "--json", "--yes",
                wait=False)
    second = inv(sandbox, "deploy", "--host", "sbx3", "--host", "sbx4", "--playbook", str(b), "--json", "--yes",
                wait=False)
    one, two = (json.loads(p.communicate(timeout=300)[0]) for p in (first, second))
    by = {(run, h["host"]): h for run, doc in (("a", one), ("b", two)) for h in doc["hosts"]}
    assert by[("a", "sbx1")]["status"] == "ok" and by[("b", "sbx4")]["status"] == "ok"  # unaffected
    shared = [by[("a", "sbx3")], by[("b", "sbx3")]]
    assert any(h["status"] == "ok" for h in shared)
    for h in shared:
        assert h["status"] == "ok" or "host is locked" in h["error"]
    assert in_progress(sandbox_inventory, "sbx3") == [] and serving(sandbox_inventory, "sbx3")


def _take(conn, host, purpose, start, got, lock, errors) -> None:
    start.wait()
    try:
        held = hostlock.acquire(conn, host, purpose)
    except hostlock.HostLockError as exc:
        if "host is locked" not in str(exc):
            errors.append(f"{purpose}: {exc}")
        return
    except Exception as exc:  # noqa: BLE001 - reported by the test, not swallowed
        errors.append(f"{purpose}: {type(exc).__name__}: {exc}")
        return
    with lock:
        got.append((conn, held))


def test_eight_runs_taking_over_a_dead_lock_at_once_have_exactly_one_winner(sandbox, sandbox_inventory):
    """50 rounds: a dead run's lock (this machine, a pid that has exited), then 8 takers at the same instant:
    exactly one holds the lock after each round."""
    host = sandbox_inventory.hosts["sbx2"]
    conns = [open_connection(host) for _ in range(8)]
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid is free now: provably not running
    winners_per_round, errors = [], []
    try:
        for round_no in range(50):
            owner = {"owner": "gone@" + socket.gethostname(), "machine": socket.gethostname(), "pid": dead.pid,
                     "purpose": "deploy (crashed)", "time": "2026-12-01T00:00:00Z", "epoch": int(time.time()),
                     "token": f"dead-{round_no}"}
            sh(sandbox_inventory, "sbx2", "rm -rf /var/lib/fleet/lock")
            _plant_lock(sandbox_inventory, "sbx2", owner)
            start, got, lock = threading.Barrier(8), [], threading.Lock()
            threads = [threading.Thread(target=_take, args=(c, host, f"race {round_no}", start, got, lock, errors))
                       for c in conns]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            winners_per_round.append(len(got))
            # the dead lock was moved aside (by the run that recovered it); the winner is that run, or one that
            # found the place free just after the move, before the recovering run's own mkdir
            assert sh(sandbox_inventory, "sbx2", f"cat /var/lib/fleet/lock.dead-dead-{round_no}/owner.json")
            for conn, held in got:
                assert f"dead-{round_no}" not in held.token
                hostlock.release(conn, host, held)  # raises if another run's lock had replaced it
    finally:
        for c in conns:
            c.close()
        sh(sandbox_inventory, "sbx2", "rm -rf /var/lib/fleet/lock /var/lib/fleet/lock.dead-*")
    assert errors == [] and winners_per_round == [1] * 50, (errors[:5], winners_per_round)
