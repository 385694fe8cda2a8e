"""The fault-point harness for many hosts (test_fault_points.py's, extended): the remote steps of a rolling deploy of
two replicas behind the sandbox router (`--serial 1`), of their rolling rollback and a tune of one of them, and of
a 2-node deployment's deploy and rollback, are learnt from one clean traced run each (fleet.faulthook numbers
every remote step of the run, on every host); at a
point a kind is injected (the command fails; the link drops; the controller is SIGKILLed; that host's disks are
full from then on) into the real `inv` (forked: test_fault_points.ForkInv), and the invariant for many hosts is
checked:

  1. every replica and node serves what served before or what was asked for (its files are its current release's,
     that release served, its unit runs);
  2. the router lists exactly the replicas that serve (none missing, none dead), runs its current release's
     files, and a generation passes through it;
  3. the nodes of the deployment are on ONE release, and rank 0 answers the known question;
  4. no lock is left; after a kill, a lost link or anything left in progress, the next run (a deploy of the
     release that served) succeeds, recovers what the dead run left, and then 1-3 hold with nothing left over.

Runs start from the same snapshot of every host involved (state folders on small tmpfs mounts, put back in one
round trip per host, servers restarted only when their files changed or they do not serve) and each run gets a
fresh controller state folder (what the fleet learned), so one run's injected failures never steer the next.

Which runs: FLEET_FAULT_POINTS=all every point with every kind; `each` every point with one kind, rotating
(test_fault_points.kinds_of), `each/3` every third point so, `each/3:140-202` of those; a list (3-9,20) every
kind at those points. The suite's choice, within its time budget (5 min for this module: a run costs a two-host
deploy, 15-60 s here, and its next run as much) is SUITE_POINTS point a flow, deterministic, taken from the
steps only many hosts have (the router's calls, a multi-node step), the kinds rotating over the flows (fail,
drop, kill, late), and the targeted tests below (full; late at a node's move of `current`).
"""

from __future__ import annotations

import json
import os
import time
from hashlib import sha256
from pathlib import Path

import pytest
import yaml
from faultkit import NO_P2P, inventory_file
from fleetcli import BUDGETS, write_book
from manykit import (
    FILL,
    RESET,
    SNAP,
    UNFILL,
    Hosts,
    health_command,
    mount_command,
    parse_state,
    serving_command,
    state_command,
    store_broken,
    unmount_command,
)
from test_fault_points import ForkInv, kinds_of

from fleet.faulthook import KINDS

REPLICAS, ROUTER, NODES = ["sbx1", "sbx3"], "sbx0", ["sbx2", "sbx4"]
KEY = "many-fault-key"
UNIT, ENV = "/etc/systemd/system/sglang.service", "/etc/fleet/sglang.env"
R_UNIT, R_ENV = "/etc/systemd/system/sglang-router.service", "/etc/fleet/sglang-router.env"
SUITE_POINTS = 1  # a flow's points in the suite's run (kinds rotating over the flows; `full`, `late`: targeted tests)
ROTATION = tuple(k for k in KINDS if k != "full")  # the suite's kinds; `full` fills a host's disks for good
RESULTS: list[tuple[str, str, int, str, str]] = []  # (flow, kind, point, label, what broke), for the summary


def router_book(name: str, x: str, policy: str = "round_robin") -> dict:
    return {"name": name, "model": {"path": "/models/Llama-3.1-8B-Instruct"},
            "serve": {"host": "0.0.0.0", "port": 30000, "api_key": {"env": "SGLANG_API_KEY"}},
            "flags": {"tp-size": 1}, "ladder": [{"name": "plain", "env": {"X": x}}], "keep_releases": 10,
            "budgets": {**BUDGETS, "start": 12, "weight_load": 12},
            "router": {"host": ROUTER, "port": 30080, "policy": policy,
                       "flags": {"health-check-interval-secs": 2}}}


def nodes_book(name: str, x: str) -> dict:
    return {"name": name, "model": {"path": "/models/Llama-3.1-8B-Instruct"},
            "serve": {"unit": "sglang", "env": {**NO_P2P["env"], "X": x}}, "keep_releases": 10,
            "nodes": {"count": 2, "dist_port": 5757}, "flags": {"tp-size": 4, "dist-timeout": 600},
            "ladder": [{"name": "tp4-2nodes"}], "budgets": {**BUDGETS, "start": 40}}


@pytest.fixture(scope="module")
def many(_sandbox_session, tmp_path_factory):
    """Five sandbox hosts at a fast simulated start, their state folders on tmpfs, a fork server; the flows'
    fleets are set up on first use (replicas, nodes)."""
    from fleet import inventory as inventory_mod

    sandbox, profiles = _sandbox_session
    sandbox.up(len(profiles), profiles)
    tmp = tmp_path_factory.mktemp("fault-points-many")
    doc = yaml.safe_load(Path(sandbox.cfg.inventory_path).read_text())
    for name in doc["hosts"]:
        doc["hosts"][name].setdefault("vars", {}).setdefault("env", {})["SGLANG_SIM_TIME_SCALE"] = "0.004"
    inv_path = inventory_file(tmp)
    inv_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    books = tmp / "books"
    books.mkdir()
    c = {"inv": inv_path, "tmp": tmp, "fork": ForkInv(tmp), "runs": 0,
         "hosts": Hosts(inventory_mod.load(str(inv_path))),
         # B current and serving (for the nodes, A before it), B2 what the deploy flows deploy (B with other bytes:
         # an env value; for the router, another policy, so the router's own unit changes too)
         "rb": write_book(books, router_book("many-rb", "b")),
         "na": write_book(books, nodes_book("many-na", "a")), "nb": write_book(books, nodes_book("many-nb", "b"))}
    (books / "b2").mkdir()
    c["rb2"] = write_book(books / "b2", router_book("many-rb", "b2", "random"))
    c["nb2"] = write_book(books / "b2", nodes_book("many-nb", "b2"))
    hosts = [ROUTER, *REPLICAS, *NODES]
    c["hosts"].each(hosts, "systemctl stop sglang sglang-router 2>/dev/null; rm -rf /var/lib/fleet/* "
                           "/var/lib/fleet/.c*; " + mount_command())
    try:
        yield c
    finally:
        c["fork"].close()
        c["hosts"].each(hosts, unmount_command(["sglang", "sglang-router"]))
        c["hosts"].close()


def _inv(c, *args, state: Path | None = None, env=None):
    """The real `inv ARGS -i INVENTORY`, forked; `state`: the controller's state folder for this run."""
    return c["fork"]([args[0], "-i", str(c["inv"]), *args[1:]],
                     {**os.environ, **(env or {}), "SGLANG_API_KEY": KEY,
                      "FLEET_STATE_DIR": str(state or c["tmp"] / "state-setup"),
                      "FLEET_SANDBOX_INSTANCE": os.environ["FLEET_SANDBOX_INSTANCE"]})


def _ok(proc) -> dict:
    assert proc.returncode == 0, (proc.stdout[-1500:], proc.stderr[-3000:])
    return json.loads(proc.stdout)


# ---------------------------------------------------------------------- the flows


def picks(names: list[str]) -> list[str]:
    return [a for n in names for a in ("--host", n)]


FLOWS = {
    "rolling": lambda c: ("deploy", *picks(REPLICAS), "--playbook", str(c["rb2"]), "--serial", "1", "--force",
                          "--yes", "--json"),
    "nodes-deploy": lambda c: ("deploy", *picks(NODES), "--playbook", str(c["nb2"]), "--force", "--yes", "--json"),
    "nodes-rollback": lambda c: ("rollback", *picks(NODES), "--playbook", str(c["na"]), "--yes", "--json"),
    # replicas behind the router: a rolling rollback (to B2's releases, deployed before B), and a tune of one
    "replicas-rollback": lambda c: ("rollback", *picks(REPLICAS), "--playbook", str(c["rb"]), "--yes", "--json"),
    "replicas-tune": lambda c: ("tune", "--host", REPLICAS[0], "--playbook", str(c["rb"]), "--runs", "1", "--yes",
                                "--json"),
}
NEXT = {  # the next run: a deploy of the release that served before (recovers what a dead run left)
    "rolling": lambda c: ("deploy", *picks(REPLICAS), "--playbook", str(c["rb"]), "--serial", "1", "--yes", "--json"),
    "nodes-deploy": lambda c: ("deploy", *picks(NODES), "--playbook", str(c["nb"]), "--yes", "--json"),
}
NEXT["nodes-rollback"] = NEXT["nodes-deploy"]
NEXT["replicas-rollback"] = NEXT["replicas-tune"] = NEXT["rolling"]
GROUP = {"rolling": "replicas", "nodes-deploy": "nodes", "nodes-rollback": "nodes", "replicas-rollback": "replicas",
         "replicas-tune": "replicas"}


def _setup(c, group: str) -> None:
    """B serving on the group's hosts (and the router; for the nodes, release A before it, the rollback's
    target), and the snapshot of every host."""
    if f"set_{group}" in c:
        return
    names = [ROUTER, *REPLICAS] if group == "replicas" else NODES
    for book in ("b2", "b") if group == "replicas" else ("a", "b"):  # B2 before B: a rollback's target
        if group == "replicas":
            data = _ok(_inv(c, "deploy", *picks(REPLICAS), "--playbook", str(c[f"r{book}"]), "--serial", "1",
                            "--force", "--yes", "--json"))
            assert data["router"]["status"] in ("ok", "unchanged"), data["router"]
        else:
            data = _ok(_inv(c, "deploy", *picks(NODES), "--playbook", str(c[f"n{book}"]), "--force", "--yes",
                            "--json"))
        assert {h["status"] for h in data["hosts"]} == {"ok"}, data["hosts"]
        c[f"{group}_{book}"] = {h["host"]: h["release"] for h in data["hosts"]}
    c["hosts"].each(names, SNAP)
    c[f"set_{group}"] = names


def _sha(path: Path) -> str:
    return sha256(path.read_bytes()).hexdigest()


def _start(c, group: str, restart: set[str]) -> None:
    """After a reset: the servers whose files changed or that do not serve restarted, then waited for (the nodes
    together; the router after its replicas, and whenever its worker list is not both replicas)."""
    hosts = c["hosts"]
    if group == "nodes":
        if restart or hosts.sh(NODES[0], serving_command(30000, None)).strip() != "yes":
            hosts.each(NODES, "systemctl restart sglang")
        _wait(lambda: hosts.sh(NODES[0], serving_command(30000, None)).strip() == "yes", "rank 0 serving")
        return
    for name in REPLICAS:
        if name in restart or hosts.sh(name, serving_command(30000, KEY)).strip() != "yes":
            hosts.sh(name, "systemctl restart sglang")
    for name in REPLICAS:
        _wait(lambda n=name: hosts.sh(n, serving_command(30000, KEY)).strip() == "yes", f"{name} serving")
    if ROUTER in restart or _router(c)["workers"] != sorted(_urls(c)):
        hosts.sh(ROUTER, "systemctl restart sglang-router")
        _wait(lambda: _router(c)["workers"] == sorted(_urls(c)) and _router(c)["generates"], "the router serving")


def _wait(predicate, what: str, timeout: float = 90) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, f"reset: {what} not reached in {timeout:.0f}s"
        time.sleep(0.2)


def _reset(c, group: str) -> None:
    names = c[f"set_{group}"]
    outs = c["hosts"].each(names, RESET)
    assert all(o.strip().endswith("reset") for o in outs.values()), outs
    _start(c, group, {n for n, o in outs.items() if "changed" in o.split()})


def _urls(c) -> list[str]:
    return [f"http://{c['hosts'].inventory.hosts[h].address}:30000" for h in REPLICAS]


def _router(c) -> dict:
    """The router as its host sees it: its workers, whether a generation passes, which replicas answer /health."""
    urls = _urls(c)
    auth = f"-H 'Authorization: Bearer {KEY}'"
    out = c["hosts"].sh(ROUTER, f"echo \"workers $(curl -s -m 10 {auth} http://127.0.0.1:30080/list_workers)\"; "
                                f"echo \"generates $({serving_command(30080, KEY)})\"; "
                        + "; ".join(f"echo \"health {u} $({health_command(u, KEY)})\"" for u in urls))
    st: dict = {"workers": None, "generates": False, "serving": []}
    for line in out.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "workers":
            try:
                st["workers"] = sorted(json.loads(rest)["urls"])
            except (ValueError, KeyError, TypeError):
                st["workers"] = None
        elif kind == "generates":
            st["generates"] = rest.strip() == "yes"
        elif kind == "health" and rest.split()[-1:] == ["200"]:
            st["serving"].append(rest.split()[0])
    st["serving"].sort()
    return st


def _broken(c, flow: str, after_next: bool) -> list[str]:
    """What of the many-host invariant does not hold now (empty: all of it)."""
    hosts, group, bad, left = c["hosts"], GROUP[flow], [], []
    before = c[f"{group}_b"]
    if group == "replicas":
        shas = {_sha(c["rb"]), _sha(c["rb2"])}
        outs = hosts.each(REPLICAS, state_command("/var/lib/fleet", "sglang", UNIT, ENV)
                          + f"; echo \"serving $({serving_command(30000, KEY)})\"")
        for name, out in outs.items():
            st = parse_state(out)
            b, lft = store_broken(name, st, UNIT, ENV, lambda r, n=name: r.get("id") == before[n]
                                  or r.get("playbook_sha256") in shas, after_next)
            bad, left = bad + b, left + lft
            if st.get("serving") != "yes":
                bad.append(f"{name}: serves nothing")
        st = parse_state(hosts.sh(ROUTER, state_command("/var/lib/fleet/router", "sglang-router", R_UNIT, R_ENV)))
        b, lft = store_broken(ROUTER, st, R_UNIT, R_ENV, lambda r: r.get("playbook_sha256") in shas, after_next,
                              " (router)")
        bad, left = bad + b, left + lft
        r = _router(c)
        if r["workers"] != r["serving"]:
            bad.append(f"the router lists {r['workers']}, while {r['serving']} serve")
        if not r["generates"]:
            bad.append("no generation passes through the router")
    else:
        allowed = {"nodes-deploy": {_sha(c["nb"]), _sha(c["nb2"])}, "nodes-rollback": {_sha(c["na"]), _sha(c["nb"])}}
        shas = allowed[flow] if not after_next else allowed[flow] | {_sha(c["nb"])}
        outs = hosts.each(NODES, state_command("/var/lib/fleet", "sglang", UNIT, ENV))
        states = {n: parse_state(o) for n, o in outs.items()}
        for name, st in states.items():
            b, lft = store_broken(name, st, UNIT, ENV, lambda r, n=name: r.get("id") == before[n]
                                  or r.get("playbook_sha256") in shas, after_next)
            bad, left = bad + b, left + lft
        on = {n: st["current"] for n, st in states.items()}
        if len(set(on.values())) != 1:
            bad.append(f"the nodes are on different releases: {on}")
        if hosts.sh(NODES[0], serving_command(30000, None)).strip() != "yes":
            bad.append(f"{NODES[0]} (rank 0) does not answer the known question")
        if hosts.sh(NODES[1], health_command("http://127.0.0.1:30000", None)).strip() != "200":
            bad.append(f"{NODES[1]} (rank 1): /health does not answer")
    c["leftovers"] = left
    return bad


def _points(c, flow: str) -> list[tuple[int, str]]:
    """The flow's fault points: its remote steps in a clean traced run (then the hosts are put back)."""
    if f"points_{flow}" not in c:
        _setup(c, GROUP[flow])
        _reset(c, GROUP[flow])
        trace = c["tmp"] / f"trace-{flow}"
        _ok(_inv(c, *FLOWS[flow](c), state=c["tmp"] / f"state-trace-{flow}", env={"FLEET_FAULT_TRACE": str(trace)}))
        c[f"points_{flow}"] = [(int(n), label) for n, _, label in
                               (line.split("\t", 2) for line in trace.read_text().splitlines())]
        # the clean run itself keeps the invariant and leaves nothing behind (no lock, release or kept copy)
        c[f"clean_{flow}"] = _broken(c, flow, after_next=True)
    return c[f"points_{flow}"]


# what one host alone never runs: the router's calls; a deployment's steps over its nodes and their journals, followed
# together
MANY_HOST_STEPS = {"rolling": ("multihost.router",), "nodes-deploy": ("multihost.multinode", "logs.journal"),
                   "nodes-rollback": ("multihost.multinode", "logs.journal"),
                   "replicas-rollback": ("multihost.router",), "replicas-tune": ("multihost.router",)}


def suite_choice(points: list[tuple[int, str]], n: int = SUITE_POINTS, first: int = 0,
                 ours_are: tuple[str, ...] = MANY_HOST_STEPS["rolling"]) -> list[tuple[tuple[int, str], str]]:
    """The suite's (point, kind) runs for a flow, deterministic (pure): n points, half from the steps only many
    hosts have (the router's calls, a multi-node step, a journal of a peer) and half from the rest, each half
    spread evenly over the flow; the kinds rotate over them in flow order from ROTATION[first]."""
    if not points:
        return []
    ours = [p for p in points if any(s in p[1] for s in ours_are)]
    rest = [p for p in points if p not in ours]

    def spread(items: list, k: int) -> list:
        k = min(k, len(items))
        return [items[(2 * i + 1) * len(items) // (2 * k)] for i in range(k)] if k else []

    half = min(len(ours), (n + 1) // 2)
    chosen = sorted(set(spread(ours, half) + spread(rest, n - half)))
    chosen = sorted(set(chosen + spread([p for p in points if p not in chosen], n - len(chosen))))
    return [(p, ROTATION[(first + i) % len(ROTATION)]) for i, p in enumerate(chosen)]


def runs_of(points: list[tuple[int, str]], flow: str) -> list[tuple[tuple[int, str], str]]:
    spec = os.environ.get("FLEET_FAULT_POINTS")
    if spec == "all":
        return [(p, k) for p in points for k in KINDS]
    if not spec:
        return suite_choice(points, first=list(FLOWS).index(flow) * SUITE_POINTS, ours_are=MANY_HOST_STEPS[flow])
    if spec.startswith("each"):  # `each/N:LIST`: every N-th point (of LIST), one rotating kind each
        every, _, at = spec.removeprefix("each").removeprefix("/").partition(":")
        chosen = [p for p in points if not at or p[0] in _numbers(at)][::int(every or 1)]
        return [(p, kinds_of(i)[0]) for i, p in enumerate(chosen)]
    return [(p, k) for p in points if p[0] in _numbers(spec) for k in KINDS]


def _numbers(spec: str) -> set[int]:
    """`3-9,20` -> {3, ..., 9, 20}."""
    wanted: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.partition("-")
        wanted.update(range(int(low), int(high or low) + 1))
    return wanted


def _run_point(c, flow: str, n: int, label: str, kind: str) -> list[str]:
    """The flow with `kind` injected at point n, from the snapshot; what of the invariant broke (empty: none)."""
    t0 = time.monotonic()
    group = GROUP[flow]
    _reset(c, group)
    c["runs"] += 1
    state = c["tmp"] / f"state-{c['runs']}"  # what this run and its next run learn: theirs alone
    t1 = time.monotonic()
    proc = _inv(c, *FLOWS[flow](c), state=state, env={"FLEET_FAULT_AT": f"{n}:{kind}", "FLEET_FAULT_FILL": FILL})
    t2 = time.monotonic()
    c["last"] = proc
    c["hosts"].each(c[f"set_{group}"], UNFILL)
    if kind == "kill" and proc.returncode != -9:
        bad = [f"the run was not killed at its point (exit {proc.returncode})"]
    else:
        bad, c["leftovers"] = [], []
        if kind in ("fail", "full", "late"):  # the run ended by itself: the invariant holds now
            bad = [f"right after the run: {b}" for b in _broken(c, flow, after_next=False)]
            if bad:
                said = " ".join((proc.stdout[-1500:] + " " + proc.stderr[-2500:]).split())
                bad.append(f"the run said: {said[-1500:]}")
        if kind in ("kill", "drop") or bad or c["leftovers"]:  # the invariant relies on the next run's recovery
            nxt = _inv(c, *NEXT[flow](c), state=state)
            c["next"] = nxt
            if nxt.returncode != 0:
                bad.append(f"the next deploy failed (exit {nxt.returncode}): {nxt.stdout[-600:]} {nxt.stderr[-600:]}")
            bad += [f"after the next deploy: {b}" for b in _broken(c, flow, after_next=True)]
    RESULTS.append((flow, kind, n, label, "; ".join(bad)))
    if os.environ.get("FLEET_FAULT_LOG"):
        with open(os.environ["FLEET_FAULT_LOG"], "a") as f:
            f.write(f"{flow} {kind} {n} {label[:70]} :: {'; '.join(bad) or 'ok'} :: reset {t1 - t0:.1f} "
                    f"run {t2 - t1:.1f} rest {time.monotonic() - t2:.1f}\n")
    return bad


@pytest.mark.timeout(6 * 3600 if os.environ.get("FLEET_FAULT_POINTS") else 900)
@pytest.mark.parametrize("flow", list(FLOWS))
def test_every_fault_point_of_many_hosts_keeps_the_invariant(flow, many):
    points = _points(many, flow)
    failures = [(0, "the clean traced run", "none", b) for b in many[f"clean_{flow}"]]
    failures += [(n, label, kind, b) for (n, label), kind in runs_of(points, flow)
                 for b in _run_point(many, flow, n, label, kind)]
    assert not failures, "\n".join(f"{flow} {kind} point {n} ({label}): {b}" for n, label, kind, b in failures)


def test_a_disk_that_fills_on_a_node_after_the_rung_served_puts_every_node_back_together(many):
    """Found by this harness (nodes-deploy, full): both nodes served the new release, then writing its record on
    the full node failed, and so did closing that node's release as failed; the node counted as lost and the
    other was left stopped: the deployment served nothing. Now a release that cannot be closed stays in progress
    for the next run's recovery, and the node goes back with the others (by rename: no space needed)."""
    n, label = next(p for p in _points(many, "nodes-deploy") if "deploy.release_run.record" in p[1])
    assert not _run_point(many, "nodes-deploy", n, label, "full")
    last = many["last"]
    data = json.loads(last.stdout)
    assert [(h["host"], h["status"], h["release"]) for h in data["hosts"]] == \
        [(h, "rolled_back", many["nodes_b"][h]) for h in NODES], data["hosts"]
    assert "the next run's recovery closes it" in last.stderr and "No space left on device" in last.stderr


def test_a_move_of_current_whose_answer_is_lost_on_a_node_leaves_the_nodes_on_one_release(many):
    """`late` (the command runs, its answer is lost) at the last node's move of `current` in a 2-node rollback:
    the rename ran, so the rollback counts by what `current` names (ReleaseStore.mark_current) and every node is
    on the target, serving, nothing left over; before issue 31's read-back, the timeout counted as a failed move
    and the nodes were taken back while that node's `current` named the target."""
    points = [p for p in _points(many, "nodes-rollback") if "releases.mark_current" in p[1]]
    assert len(points) >= 2, points  # one move a node
    n, label = points[-1]
    assert not _run_point(many, "nodes-rollback", n, label, "late")
    data = json.loads(many["last"].stdout)
    assert [(h["host"], h["status"], h["release"]) for h in data["hosts"]] == \
        [(h, "ok", many["nodes_a"][h]) for h in NODES], data["hosts"]


def test_the_suite_s_choice_covers_every_kind_and_the_many_host_steps():
    labels = ["deploy.ladder.run: mkdir", "multihost.router.workers: curl", "host.probe_run.probe_on: sh",
              "multihost.router.take_out: curl", "deploy.restore.install: fleet-write", "logs.journal.cursor: x",
              "deploy.health.health_check: curl", "multihost.router.finish: curl", "deploy.ladder.run: rmdir"]
    points = [(i + 1, label) for i, label in enumerate(labels)]
    runs = [run for i, flow in enumerate(FLOWS) for run in suite_choice(points, first=i * SUITE_POINTS)]
    assert len(runs) == SUITE_POINTS * len(FLOWS)
    assert {k for _, k in runs} | {"full", "late"} == set(KINDS)  # `full`, `late`: the targeted tests
    for i in range(len(FLOWS)):
        mine = suite_choice(points, first=i * SUITE_POINTS)
        assert [p for p, _ in mine] == sorted({p for p, _ in mine})  # in flow order, no point twice
        assert sum("multihost.router" in label for (_, label), _ in mine) >= (SUITE_POINTS + 1) // 2
    assert suite_choice(points, 4) == suite_choice(points, 4)  # deterministic
    assert {k for _, k in suite_choice(points, 4)} == set(ROTATION) == set(KINDS) - {"full"}
    assert [p for p, _ in suite_choice(points, 4)] == [points[1], points[2], points[6], points[7]]  # 2 + 2, spread
    assert suite_choice(points[:1], 4) == [(points[0], ROTATION[0])]
    assert suite_choice([]) == []
