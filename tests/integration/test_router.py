"""Data-parallel replicas behind sglang's router on sandbox hosts: replicas sbx1 (8x H100) and sbx3 (8x B200)
serve Llama-3.1-8B-Instruct, the router runs on sbx0. Generations through the router reach the replicas in
turn, a rolling deploy keeps the router serving, a replica rolled back to a release that serves stays in, bad
input changes nothing."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from fleetcli import BUDGETS, inv, inv_json, sh, write_book

REPLICAS = ["sbx1", "sbx3"]
ROUTER = "sbx0"
KEY = "router-test-key"
ENV = {"SGLANG_API_KEY": KEY}


def book(name: str = "llama-dp", ladder: list[dict] | None = None, **router) -> dict:
    return {"name": name, "model": {"path": "/models/Llama-3.1-8B-Instruct"},
            "serve": {"host": "0.0.0.0", "port": 30000, "api_key": {"env": "SGLANG_API_KEY"}},
            "flags": {"tp-size": 1}, "ladder": ladder or [{"name": "plain"}],
            "budgets": {**BUDGETS, "start": 12, "weight_load": 12},
            "router": {"host": ROUTER, "port": 30080, "policy": "round_robin",
                       "flags": {"health-check-interval-secs": 2}, **router}}


def deploy(sandbox, state: Path, path: Path, *args):
    picks = [a for h in REPLICAS for a in ("--host", h)]
    return inv_json(sandbox, "deploy", *picks, "--playbook", str(path), "--yes", *args,
                    env={**ENV, "FLEET_STATE_DIR": str(state)})


def generate(inventory, text: str = "2+2=") -> tuple[int | None, str]:
    """One generation through the router, from outside the router's host, with the key."""
    address = inventory.hosts[ROUTER].address
    req = urllib.request.Request(f"http://{address}:30080/generate", method="POST",
                                 data=json.dumps({"text": text, "sampling_params": {"max_new_tokens": 4,
                                                                                    "temperature": 0}}).encode(),
                                 headers={"content-type": "application/json", "authorization": f"Bearer {KEY}"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())["text"]
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.read().decode(errors="replace")
    except OSError as e:
        return None, str(e)


def served_by(inventory, name: str) -> int:
    """/generate requests a replica answered for the router (its access log lines from the router's address)."""
    router_ip = inventory.hosts[ROUTER].address
    out = sh(inventory, name, f"journalctl -u sglang -o cat --no-pager | grep -F '{router_ip}:' | "
                              "grep -cF '\"POST /generate HTTP/1.1\" 200' || true")
    return int(out.strip() or 0)


def router_workers(inventory) -> list[str]:
    """The real router's workers (sglang-router 0.3.2: GET /workers), sorted: its listing has no set order."""
    out = sh(inventory, ROUTER, f"curl -s -H 'Authorization: Bearer {KEY}' http://127.0.0.1:30080/workers")
    return sorted(w["url"] for w in json.loads(out)["workers"])


def release_events(inventory, name: str, release: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in sh(inventory, name, f"cat /var/lib/fleet/releases/{release}/events.jsonl").splitlines():
        event = json.loads(line)
        out.setdefault(event["step"], event["t"])
    return out


def urls(inventory) -> list[str]:
    return [f"http://{inventory.hosts[h].address}:30000" for h in REPLICAS]


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("router-state")


@pytest.fixture(scope="module")
def first(_sandbox_session, state, tmp_path_factory):
    """The first deploy: both replicas, then the router on sbx0 with their URLs."""
    sandbox, profiles = _sandbox_session
    sandbox.up(len(profiles), profiles)
    path = write_book(tmp_path_factory.mktemp("books"), book())
    rc, data, err = deploy(sandbox, state, path, "--serial", "1")
    yield {"rc": rc, "data": data, "stderr": err, "path": path}
    from fleet import inventory as inventory_mod

    inv_ = inventory_mod.load(sandbox.cfg.inventory_path)
    # the other modules' tests do not expect it (nor a reboot of sbx0 to start it: fleet enables it)
    sh(inv_, ROUTER, "systemctl disable --now sglang-router 2>/dev/null || true")


def test_the_router_serves_and_sends_generations_to_the_replicas_in_turn(first, sandbox_inventory):
    data = first["data"]
    assert first["rc"] == 0, first["stderr"][-3000:]
    assert [(h["host"], h["status"]) for h in data["hosts"]] == [("sbx1", "ok"), ("sbx3", "ok")]
    r = data["router"]
    assert (r["host"], r["status"], r["workers"]) == (ROUTER, "ok", urls(sandbox_inventory))
    assert "a generation through the router: '2+2=' -> '4'" in r["evidence"]
    # its own release on sbx0, apart from the replicas' releases
    current = sh(sandbox_inventory, ROUTER, "readlink /var/lib/fleet/router/current").strip()
    assert current.endswith(r["release"])
    unit = sh(sandbox_inventory, ROUTER, "cat /etc/systemd/system/sglang-router.service")
    assert "sglang_router.launch_router" in unit and KEY not in unit and "NoNewPrivileges=yes" in unit
    assert sh(sandbox_inventory, ROUTER, "stat -c %a /etc/fleet/sglang-router.env").strip() == "600"

    before = {h: served_by(sandbox_inventory, h) for h in REPLICAS}
    answers = [generate(sandbox_inventory) for _ in range(4)]
    assert all(code == 200 and text.strip().startswith("4") for code, text in answers), answers
    assert {h: served_by(sandbox_inventory, h) - before[h] for h in REPLICAS} == {"sbx1": 2, "sbx3": 2}
    # the router wants the key, like the replicas
    address = sandbox_inventory.hosts[ROUTER].address
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(f"http://{address}:30080/generate", data=b'{"text": "hi"}',
                                                      method="POST"), timeout=30)
    refused.value.close()
    assert refused.value.code == 401


def test_status_shows_the_router_on_its_host_and_nowhere_else(first, sandbox):
    rc, data, err = inv_json(sandbox, "status", "--host", ROUTER, *[a for h in REPLICAS for a in ("--host", h)])
    rows = {r["host"]: r for r in data["hosts"]}
    router = rows[ROUTER]["router"]
    assert router is not None, err[-2000:]
    assert (router["unit"], router["state"], router["health"], router["workers"]) == \
        ("sglang-router", "active", 200, len(REPLICAS)), router
    assert router["release"] == first["data"]["router"]["release"]
    assert all(rows[h]["router"] is None for h in REPLICAS)


def test_a_rolling_deploy_keeps_the_router_serving_and_takes_each_replica_out_and_back(first, sandbox,
                                                                                    sandbox_inventory, state):
    assert first["rc"] == 0, first["stderr"][-3000:]
    results: list[tuple[int | None, str]] = []
    done = threading.Event()

    def traffic() -> None:
        while not done.is_set():
            results.append(generate(sandbox_inventory))

    worker = threading.Thread(target=traffic)
    worker.start()
    try:
        rc, data, err = deploy(sandbox, state, first["path"], "--serial", "1", "--force")
    finally:
        done.set()
        worker.join()
    assert rc == 0, err[-3000:]
    assert len(results) > 10 and all(code == 200 for code, _ in results), [r for r in results if r[0] != 200][:5]
    router = data["router"]
    assert router["status"] == "unchanged"  # same replicas: the router kept running
    steps = [(e["host"], e["step"]) for e in router["events"]]
    assert steps == [("sbx1", "removed"), ("sbx1", "added"), ("sbx3", "removed"), ("sbx3", "added")]
    t = {(e["host"], e["step"]): e["t"] for e in router["events"]}
    for h in data["hosts"]:
        assert h["status"] == "ok"
        events = release_events(sandbox_inventory, h["host"], h["release"])
        assert t[(h["host"], "removed")] < events["stop"]  # out of the router before its server stopped
        assert t[(h["host"], "added")] > events["current"]  # back once it served again
    # one replica at a time: the second left only after the first was back
    assert t[("sbx1", "added")] < t[("sbx3", "removed")]
    assert router_workers(sandbox_inventory) == urls(sandbox_inventory)
    assert "taken out of the router on sbx0 before its server stops" in err


def test_a_replica_given_up_by_host_timeout_is_reported_with_the_command_that_puts_it_back(first, sandbox,
                                                                                           sandbox_inventory, state):
    """Issue 52, 8: --host-timeout gives up on sbx1 mid-deploy (out of the router by then); the run says which
    command puts it back, and that command, run next, recovers what the abandoned deploy left and puts sbx1 back
    in the router once it serves."""
    assert first["rc"] == 0, first["stderr"][-3000:]
    rc, data, err = deploy(sandbox, state, first["path"], "--serial", "1", "--force", "--host-timeout", "0.5")
    assert rc == 1, err[-3000:]
    again = f"`inv deploy --host sbx1 --playbook {first['path']}` puts it back once it serves"
    said = data["hosts"][0]["error"] or ""
    assert "timed out after 0.5s" in said or "after --host-timeout gave up on it" in said, said
    told = again in said or f"sbx1: it may be out of the router on sbx0: {again}" in err
    # a deploy that still served within the grace (a loaded machine) is put back by this run itself
    back = "ended ok after --host-timeout gave up on it" in said and urls(sandbox_inventory)[0] in \
        router_workers(sandbox_inventory)
    assert told or back, (said, err[-2000:])
    rc, data, err = inv_json(sandbox, "deploy", "--host", "sbx1", "--playbook", str(first["path"]), "--yes",
                             env={**ENV, "FLEET_STATE_DIR": str(state)})
    assert rc == 0 and data["hosts"][0]["status"] in ("ok", "unchanged"), err[-3000:]
    assert sorted(router_workers(sandbox_inventory)) == sorted(urls(sandbox_inventory))
    assert generate(sandbox_inventory)[0] == 200


def test_a_replica_rolled_back_to_the_release_it_served_goes_back_into_the_router(first, sandbox,
                                                                                   sandbox_inventory, state,
                                                                                   tmp_path):
    """Membership follows what serves, not what the run did: sbx3's deploy fails and it rolls back to the
    release it served, so it is put back (before: left out while it served, the router down to sbx1)."""
    assert first["rc"] == 0, first["stderr"][-3000:]
    # B200 (SM 100) gets only a rung that runs out of memory; H100 (SM 90) a plain one
    ladder = [{"name": "h100", "when": {"sm": [90]}},
              {"name": "too-greedy", "when": {"sm": [100]}, "flags": {"mem-fraction-static": 0.99}}]
    doomed = write_book(tmp_path, book(name="llama-dp-doomed", ladder=ladder))
    rc, data, err = deploy(sandbox, state, doomed, "--serial", "1", "--max-fail", "1")
    assert rc == 1, err[-3000:]
    status = {h["host"]: h["status"] for h in data["hosts"]}
    assert status == {"sbx1": "ok", "sbx3": "rolled_back"}
    sbx1, sbx3 = urls(sandbox_inventory)
    router = data["router"]
    assert router["status"] in ("ok", "unchanged") and sorted(router["workers"]) == sorted([sbx1, sbx3]), router
    assert ("sbx3", "serves") in [(e["host"], e["step"]) for e in router["events"]]
    assert sorted(router_workers(sandbox_inventory)) == sorted([sbx1, sbx3])
    before = served_by(sandbox_inventory, "sbx3")
    answers = [generate(sandbox_inventory) for _ in range(4)]
    assert all(code == 200 for code, _ in answers), answers
    assert served_by(sandbox_inventory, "sbx3") > before  # round robin reaches the rolled-back replica

    # the original playbook again: sbx3 is unchanged and healthy, both stay in
    rc, data, err = deploy(sandbox, state, first["path"], "--serial", "1")
    assert rc == 0, err[-3000:]
    assert sorted(data["router"]["workers"]) == sorted(router_workers(sandbox_inventory)) == [sbx1, sbx3]


def test_the_router_rolls_back_to_an_earlier_release_and_forward_again(first, sandbox, sandbox_inventory, state):
    assert first["rc"] == 0, first["stderr"][-3000:]
    sbx1, sbx3 = urls(sandbox_inventory)
    releases = sh(sandbox_inventory, ROUTER, "ls /var/lib/fleet/router/releases").split()
    current = sh(sandbox_inventory, ROUTER, "readlink /var/lib/fleet/router/current").strip().rsplit("/", 1)[1]
    assert current == releases[-1] and len(releases) >= 2
    rollback = ("rollback", "--playbook", str(first["path"]), "--router")
    rc, report, err = inv_json(sandbox, *rollback, env={**ENV, "FLEET_STATE_DIR": str(state)})
    assert rc == 0, err[-2000:]
    # the newest known-good release before the current: the doomed playbook's router, with both replicas (sbx3
    # served the release it rolled back to)
    assert (report["status"], report["release"], sorted(report["workers"])) == ("ok", releases[-2], [sbx1, sbx3])
    assert sorted(router_workers(sandbox_inventory)) == [sbx1, sbx3]
    assert generate(sandbox_inventory)[0] == 200
    rc, report, err = inv_json(sandbox, *rollback, "--to", current, env={**ENV, "FLEET_STATE_DIR": str(state)})
    assert rc == 0 and report["release"] == current, err[-2000:]
    assert sorted(router_workers(sandbox_inventory)) == [sbx1, sbx3]
    # a release that does not exist: exit 1, the router as it was
    proc = inv(sandbox, *rollback, "--to", "20200101T000000Z-dead", env={**ENV, "FLEET_STATE_DIR": str(state)})
    assert proc.returncode == 1 and "no router release 20200101T000000Z-dead" in proc.stderr
    assert sorted(router_workers(sandbox_inventory)) == [sbx1, sbx3]


def test_ctrl_c_in_a_rolling_deploy_changes_no_later_batch_and_the_router_lists_every_serving_replica(
        first, sandbox, sandbox_inventory, state):
    """SIGINT to a real `inv deploy --serial 1` of both replicas while the first one's server starts: exit 130,
    the second replica (a later batch) never changed, the first ends serving its old release or the new one,
    and the router lists every replica that serves."""
    assert first["rc"] == 0, first["stderr"][-3000:]
    listing = "readlink /var/lib/fleet/current; ls /var/lib/fleet/releases"
    before = {h: sh(sandbox_inventory, h, listing) for h in REPLICAS}
    old = before["sbx1"].split()[0].rsplit("/", 1)[1]
    picks = [a for h in REPLICAS for a in ("--host", h)]
    proc = inv(sandbox, "deploy", *picks, "--playbook", str(first["path"]), "--yes", "--serial", "1", "--force",
               "--json", wait=False, env={**ENV, "FLEET_STATE_DIR": str(state)})
    seen = []
    for line in proc.stderr:  # interrupted once sbx1's new server has started
        seen.append(line)
        if line.startswith("sbx1") and "started; following the journal" in line:
            proc.send_signal(signal.SIGINT)
            break
    out, rest = proc.communicate(timeout=300)
    assert proc.returncode == 130, "".join(seen)[-2000:] + rest[-3000:]
    assert sh(sandbox_inventory, "sbx3", listing) == before["sbx3"]  # the later batch: not one file changed
    assert "sbx3 probing" not in "".join(seen) + rest  # never contacted
    now_on = sh(sandbox_inventory, "sbx1", "readlink /var/lib/fleet/current").strip().rsplit("/", 1)[1]
    new = sorted(set(sh(sandbox_inventory, "sbx1", "ls /var/lib/fleet/releases").split()) - set(before["sbx1"].split()))
    assert now_on in {old, *new}
    manifest = json.loads(sh(sandbox_inventory, "sbx1", f"cat /var/lib/fleet/releases/{now_on}/manifest.json"))
    assert manifest["status"] == "ok"
    serving = [u for h, u in zip(REPLICAS, urls(sandbox_inventory), strict=True)
               if "200" in sh(sandbox_inventory, h, "curl -s -o /dev/null -w '%{http_code}' -m 5 "
                                                    "http://127.0.0.1:30000/health || true")]
    assert sorted(router_workers(sandbox_inventory)) == sorted(serving) == sorted(urls(sandbox_inventory))
    assert generate(sandbox_inventory)[0] == 200


def test_a_dead_router_runs_leftovers_are_recovered_under_var_lib_fleet_router(first, sandbox, sandbox_inventory,
                                                                             state):
    """A router deploy killed mid-install left its release in progress, the unit file changed and the router
    stopped. The next deploy's recovery closes that release as interrupted and puts the current router release
    back, and removes the new `current` link and the unit's temp file it left; the router then serves with every
    replica (before: the release stayed in progress for ever, the link and the temp file too)."""
    assert first["rc"] == 0, first["stderr"][-3000:]
    root = "/var/lib/fleet/router"
    current = sh(sandbox_inventory, ROUTER, f"readlink {root}/current").strip().rsplit("/", 1)[1]
    dead = "20991231T235959Z-dead"
    sh(sandbox_inventory, ROUTER, f"""set -e
cp -a {root}/releases/{current} {root}/releases/{dead}
python3 - {root}/releases/{dead}/manifest.json {dead} <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m.update(id=sys.argv[2], status="in-progress", finished=None)
json.dump(m, open(sys.argv[1], "w"))
PY
echo '{{"step": "opened", "t": 0}}' > {root}/releases/{dead}/events.jsonl
echo '# written by a router deploy that died here' >> /etc/systemd/system/sglang-router.service
ln -s releases/{dead} {root}/.current.dead0001
echo half > /etc/systemd/system/.sglang-router.service.fleet-99-1
systemctl daemon-reload; systemctl stop sglang-router""")
    rc, data, err = deploy(sandbox, state, first["path"], "--serial", "1")
    assert rc == 0, err[-3000:]
    router = data["router"]
    assert any(f"release {dead}" in n and "marked interrupted" in n for n in router["recovered"]), router
    assert any(f"router release {current} put back" in n for n in router["recovered"]), router
    assert any(n.endswith(f"{root}/.current.dead0001") for n in router["recovered"]), router  # left for ever before
    assert sh(sandbox_inventory, ROUTER, f"ls -A {root} /etc/systemd/system | grep -c '^\\.' || true").strip() == "0"
    manifest = json.loads(sh(sandbox_inventory, ROUTER, f"cat {root}/releases/{dead}/manifest.json"))
    assert manifest["status"] == "interrupted"
    assert sh(sandbox_inventory, ROUTER, f"readlink {root}/current").strip().endswith(current)
    assert "died here" not in sh(sandbox_inventory, ROUTER, "cat /etc/systemd/system/sglang-router.service")
    assert sorted(router_workers(sandbox_inventory)) == sorted(urls(sandbox_inventory))
    assert generate(sandbox_inventory)[0] == 200
    sh(sandbox_inventory, ROUTER, f"rm -rf {root}/releases/{dead}")


@pytest.mark.parametrize("change,expected", [
    ({"host": "sbx9"}, r"llama-dp-bad\.yaml:\d+: router\.host: no host named 'sbx9' in the inventory"),
    ({"policy": "fastest"}, r"llama-dp-bad\.yaml:\d+: router\.policy: Input should be"),
    ({"port": 30000}, r"llama-dp-bad\.yaml:\d+: router\.port: 30000 is serve\.port too"),
])
def test_a_bad_router_section_exits_2_and_changes_nothing(first, sandbox, sandbox_inventory, state, tmp_path,
                                                          change, expected):
    hosts = [ROUTER, *REPLICAS]
    snapshot = "ls /var/lib/fleet/releases /var/lib/fleet/router/releases 2>/dev/null; " \
               "sha256sum /etc/systemd/system/sglang*.service"
    before = {h: sh(sandbox_inventory, h, snapshot) for h in hosts}
    path = write_book(tmp_path, book(name="llama-dp-bad", **change))
    proc = inv(sandbox, "deploy", "--host", "sbx1", "--host", "sbx3", "--yes", "--playbook", str(path),
               env={**ENV, "FLEET_STATE_DIR": str(state)})
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and re.search(expected, lines[0]), proc.stderr
    assert {h: sh(sandbox_inventory, h, snapshot) for h in hosts} == before


def test_dry_run_shows_the_router_unit_and_changes_nothing(first, sandbox, sandbox_inventory, state, tmp_path):
    changed = yaml.safe_load(first["path"].read_text())
    changed["router"]["policy"] = "random"
    path = write_book(tmp_path, changed)
    before = sh(sandbox_inventory, ROUTER, "sha256sum /etc/systemd/system/sglang-router.service")
    rc, data, err = deploy(sandbox, state, path, "--dry-run")
    assert rc == 0, err[-2000:]
    assert [h["status"] for h in data["hosts"]] == ["dry-run", "dry-run"]
    assert data["router"]["status"] == "dry-run"
    assert "-ExecStart=" in data["router"]["diff"] and "--policy random" in data["router"]["diff"]
    assert KEY not in json.dumps(data)
    assert sh(sandbox_inventory, ROUTER, "sha256sum /etc/systemd/system/sglang-router.service") == before


def test_a_replica_that_dies_is_skipped_by_the_router_until_it_is_back(first, sandbox_inventory):
    """Last in this module: the router's own health checks (every 2 s here), not fleet, notice the death."""
    assert first["rc"] == 0, first["stderr"][-3000:]
    sbx1, sbx3 = urls(sandbox_inventory)
    auth = f"-H 'Authorization: Bearer {KEY}'"

    def health() -> dict[str, bool]:
        out = sh(sandbox_inventory, ROUTER, f"curl -s {auth} http://127.0.0.1:30080/workers")
        return {w["url"]: w["is_healthy"] for w in json.loads(out)["workers"]}

    sh(sandbox_inventory, "sbx3", "systemctl stop sglang")
    before = served_by(sandbox_inventory, "sbx1")
    answers = [generate(sandbox_inventory) for _ in range(4)]  # retried on sbx1 until the checker marks sbx3
    assert all(code == 200 for code, _ in answers), answers
    assert served_by(sandbox_inventory, "sbx1") - before == 4
    assert sh(sandbox_inventory, ROUTER, "curl -s -o /dev/null -w '%{http_code}' "
                                         "http://127.0.0.1:30080/health") == "200"
    deadline = time.monotonic() + 60
    while health() != {sbx1: True, sbx3: False}:
        assert time.monotonic() < deadline, health()
        time.sleep(0.5)
    sh(sandbox_inventory, "sbx3", "systemctl start sglang")
    while health() != {sbx1: True, sbx3: True}:
        assert time.monotonic() < deadline + 120, health()
        time.sleep(0.5)
    before = {h: served_by(sandbox_inventory, h) for h in REPLICAS}
    assert all(generate(sandbox_inventory)[0] == 200 for _ in range(2))
    assert {h: served_by(sandbox_inventory, h) - before[h] for h in REPLICAS} == {"sbx1": 1, "sbx3": 1}
