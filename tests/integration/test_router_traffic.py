"""A client sending through the router sees no failed request while fleet stops or loads a replica (issue 52):
a rolling rollback, a tune, a bench, a patch whose put-back restarts the server, a GPU reset by `inv recover`.
Replicas sbx1 and sbx3 behind the real sglang-router 0.3.2 on sbx0, as in test_router.

The router here runs with its retries off (`--disable-retries`, "Disable retries" in the real 0.3.2 wheel's
`launch_router --help`), so the clients see every request the router sends to a replica that is stopped or
starting. With retries on, the router resends such a request to the other replica and the client never knows,
so the same checks held with the replica never taken out (a test that proved nothing). Retries cannot save a
streamed answer cut mid-way, nor a router whose every replica is down: the count with them off is the one that
says whether a replica was out first. Its circuit breaker is off too (`--disable-circuit-breaker`): after 10
failures it keeps the router off a replica for 60 s (0.3.2's defaults), which hid the next test's restarts."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from fleetcli import WANTS_RESET, inv_json, sh, write_book
from test_router import ENV, REPLICAS, ROUTER, book, generate, router_workers, urls

# long enough (a few seconds at the simulator's pace) for clients through the router to reach the replica while
# it is measured, were it still in the router
BENCH = {"gate": False, "input_len": 32, "output_len": 64, "num_prompts": 32, "max_concurrency": 4,
         "timeout": 120, "runs": 1}
CLIENTS = 2  # generations in flight at once through the router, one after the other on each


class Traffic:
    """CLIENTS clients sending generations through the router, each one after the other, while an operation runs."""

    def __init__(self, inventory):
        self.inventory, self.results = inventory, []
        self.done = threading.Event()
        self.workers = [threading.Thread(target=self._loop) for _ in range(CLIENTS)]

    def _loop(self) -> None:
        while not self.done.is_set():
            self.results.append(generate(self.inventory))

    def __enter__(self) -> Traffic:
        for w in self.workers:
            w.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        for w in self.workers:
            w.join()

    def failed(self) -> list[tuple[int | None, str]]:
        return [r for r in self.results if r[0] != 200]


def picks(hosts=REPLICAS) -> list[str]:
    return [a for h in hosts for a in ("--host", h)]


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("router-traffic-state")


@pytest.fixture(scope="module")
def strict(_sandbox_session, state, tmp_path_factory):
    """Both replicas, then the router on sbx0 with its retries and its circuit breaker off (a breaker opened by
    one test's failures would keep the router off that replica during the next test)."""
    sandbox, profiles = _sandbox_session
    sandbox.up(len(profiles), profiles)
    doc = book(name="llama-dp-strict", flags={"health-check-interval-secs": 2, "disable-retries": True,
                                              "disable-circuit-breaker": True})
    doc["bench"] = dict(BENCH)
    path = write_book(tmp_path_factory.mktemp("books"), doc)
    rc, data, err = inv_json(sandbox, "deploy", *picks(), "--playbook", str(path), "--yes", "--serial", "1",
                             env={**ENV, "FLEET_STATE_DIR": str(state)})
    yield {"rc": rc, "data": data, "stderr": err, "path": path, "env": {**ENV, "FLEET_STATE_DIR": str(state)}}
    from fleet import inventory as inventory_mod

    inv_ = inventory_mod.load(sandbox.cfg.inventory_path)
    # the other modules' tests do not expect it (nor a reboot of sbx0 to start it: fleet enables it)
    sh(inv_, ROUTER, "systemctl disable --now sglang-router 2>/dev/null || true")


def served(strict, inventory) -> None:
    """The module's deploy served, the router runs without retries, and both replicas are in it."""
    assert strict["rc"] == 0, strict["stderr"][-3000:]
    unit = sh(inventory, ROUTER, "cat /etc/systemd/system/sglang-router.service")
    assert "--disable-retries" in unit and "--disable-circuit-breaker" in unit
    assert router_workers(inventory) == sorted(urls(inventory))


def test_a_rollback_of_the_replicas_is_rolling_each_out_of_the_router_and_drained_first(strict, sandbox,
                                                                                       sandbox_inventory):
    """Issue 52, 1: `inv rollback -p <router playbook>` on both replicas rolls back one at a time (--serial 1 by
    default), each taken out of the router before its server stops and put back once it serves; the clients
    through the router see no failed request (before: both at once, never out of the router)."""
    served(strict, sandbox_inventory)
    rc, data, err = inv_json(sandbox, "deploy", *picks(), "--playbook", str(strict["path"]), "--yes",
                             "--serial", "1", "--force", env=strict["env"])  # a release to go back from
    assert rc == 0, err[-3000:]
    with Traffic(sandbox_inventory) as traffic:
        rc, back, err = inv_json(sandbox, "rollback", *picks(), "--playbook", str(strict["path"]), "--yes",
                                 env=strict["env"])
    assert len(traffic.results) > 10 and traffic.failed() == [], (len(traffic.failed()), traffic.failed()[:5])
    assert rc == 0, err[-3000:]
    assert [(h["host"], h["status"]) for h in back["hosts"]] == [("sbx1", "ok"), ("sbx3", "ok")]
    assert [b["hosts"] for b in back["batches"]] == [["sbx1"], ["sbx3"]]
    t = {(e["host"], e["step"]): e["t"] for e in back["router"]["events"]}
    assert [(e["host"], e["step"]) for e in back["router"]["events"]] == [
        ("sbx1", "removed"), ("sbx1", "added"), ("sbx3", "removed"), ("sbx3", "added")]
    assert t[("sbx1", "added")] < t[("sbx3", "removed")]  # one replica out at a time
    for h in back["hosts"]:
        assert h["release"] != next(d["release"] for d in data["hosts"] if d["host"] == h["host"])
    assert router_workers(sandbox_inventory) == sorted(urls(sandbox_inventory))
    assert "taken out of the router on sbx0 before its server stops" in err


def test_tune_takes_the_replica_out_of_the_router_and_puts_it_back_once_it_serves(strict, sandbox,
                                                                                   sandbox_inventory):
    """Issue 52, 7: `inv tune` of sbx1 restarts its server for each rung; it is out of the router (and drained)
    before, back once it serves, and the clients through the router see no failed request (before: the tune's
    restarts were served to clients)."""
    served(strict, sandbox_inventory)
    with Traffic(sandbox_inventory) as traffic:
        rc, tuned, err = inv_json(sandbox, "tune", "--host", "sbx1", "--playbook", str(strict["path"]), "--yes",
                                  "--runs", "1", env=strict["env"])
    assert len(traffic.results) > 5 and traffic.failed() == [], (len(traffic.failed()), traffic.failed()[:5])
    assert rc == 0, err[-3000:]
    assert "sbx1 taken out of the router on sbx0 before its server stops" in err
    assert router_workers(sandbox_inventory) == sorted(urls(sandbox_inventory))


def client_requests_during_bench(inventory, name: str, since: float) -> tuple[int, int]:
    """(the benchmark's generations, the router's generations between its first and last) in the replica's access
    log since `since`: the benchmark sends from 127.0.0.1 on the host, the router from its own address."""
    router_ip = inventory.hosts[ROUTER].address
    lines = sh(inventory, name, f"journalctl -u sglang -o cat --no-pager --since @{int(since)} | "
                                "grep -F '\"POST /generate HTTP/1.1\"' || true").splitlines()
    bench = [i for i, line in enumerate(lines) if "127.0.0.1:" in line]
    if not bench:
        return 0, 0
    return len(bench), sum(f"{router_ip}:" in line for line in lines[bench[0]:bench[-1] + 1])


def test_bench_measures_each_replica_alone_out_of_the_router(strict, sandbox, sandbox_inventory):
    """Issue 52, 7: `inv bench` of both replicas, one at a time: no client's generation reaches the replica while
    its benchmark runs (its figures are its own), and the clients see no failed request (before: the benchmark
    ran under live traffic)."""
    served(strict, sandbox_inventory)
    # the window opens after what came before: the health check's /generate from 127.0.0.1 that ended the previous
    # test's tune, read as the first of the benchmark's, counted every client request up to the take-out (42)
    time.sleep(2)
    since = time.time()  # journalctl --since @int(since): from up to 1 s before, still after the sleep's start
    with Traffic(sandbox_inventory) as traffic:
        rc, benched, err = inv_json(sandbox, "bench", *picks(), "--playbook", str(strict["path"]), "--yes",
                                    env=strict["env"])
    assert traffic.failed() == [], (len(traffic.failed()), traffic.failed()[:5])
    assert rc == 0, err[-3000:]
    for h in REPLICAS:
        measured, from_clients = client_requests_during_bench(sandbox_inventory, h, since)
        assert measured >= BENCH["num_prompts"] and from_clients == 0, (h, measured, from_clients)
        assert f"{h} taken out of the router on sbx0" in err and f"{h} back in the router on sbx0" in err
    assert err.index("sbx1 back in the router") < err.index("sbx3 taken out of the router")  # one at a time
    assert router_workers(sandbox_inventory) == sorted(urls(sandbox_inventory))


def test_a_patch_whose_put_back_restarts_the_replica_takes_it_out_of_the_router_first(strict, sandbox,
                                                                                      sandbox_inventory):
    """`inv patch --playbook P` on sbx1, where a dead rollback left its mark: the patch's recovery puts the
    current release back (a restart) before patching. sbx1 is out of the router before that restart and back once
    it serves; the clients see no failed request (before: patch knew no router, the restart was served to
    clients)."""
    served(strict, sandbox_inventory)
    current = sh(sandbox_inventory, "sbx1", "readlink /var/lib/fleet/current").strip().rsplit("/", 1)[1]
    pid = sh(sandbox_inventory, "sbx1", "systemctl show -p MainPID --value sglang").strip()
    sh(sandbox_inventory, "sbx1", f"echo '{{\"to\": \"{current}\", \"from\": \"{current}\"}}' "
                                  "> /var/lib/fleet/rollback.json")
    with Traffic(sandbox_inventory) as traffic:
        rc, patched, err = inv_json(sandbox, "patch", "--host", "sbx1", "--set", "sm120-allreduce-fusion",
                                    "--playbook", str(strict["path"]), "--yes", env=strict["env"])
    assert len(traffic.results) > 5 and traffic.failed() == [], (len(traffic.failed()), traffic.failed()[:5])
    assert rc == 0, err[-3000:]
    [host] = patched["hosts"]
    assert any(n.startswith("a rollback was interrupted") for n in host["recovered"]), host
    assert sh(sandbox_inventory, "sbx1", "systemctl show -p MainPID --value sglang").strip() != pid  # restarted
    assert "sbx1 taken out of the router on sbx0 before its server stops" in err
    assert "sbx1 back in the router on sbx0" in err
    assert router_workers(sandbox_inventory) == sorted(urls(sandbox_inventory))


def test_recover_takes_the_replica_out_of_the_router_for_a_gpu_reset_and_puts_it_back(strict, sandbox,
                                                                                    sandbox_inventory):
    """`inv recover --host sbx1 --playbook P` where GPU 0's driver asks for a reset: the reset stops the server;
    sbx1 is out of the router before and back once it serves again; the clients see no failed request (before:
    recover knew no router)."""
    served(strict, sandbox_inventory)
    sh(sandbox_inventory, "sbx1", "mkdir -p /run/fleet-sim && " + WANTS_RESET)
    try:
        with Traffic(sandbox_inventory) as traffic:
            rc, done, err = inv_json(sandbox, "recover", "--host", "sbx1", "--playbook", str(strict["path"]),
                                     env=strict["env"])
        assert len(traffic.results) > 5 and traffic.failed() == [], (len(traffic.failed()), traffic.failed()[:5])
        assert rc == 0 and done["action"] == "gpu-reset" and done["ok"], (done, err[-3000:])
        assert "sbx1 taken out of the router on sbx0 before its server stops" in err
        assert "sbx1 back in the router on sbx0" in err
        assert router_workers(sandbox_inventory) == sorted(urls(sandbox_inventory))
        assert generate(sandbox_inventory)[0] == 200
    finally:
        sh(sandbox_inventory, "sbx1", "rm -f /run/fleet-sim/kmsg /run/fleet-sim/gpustate")
