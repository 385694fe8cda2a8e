"""Canary rollouts on the sandbox, through `inv deploy --serial 1,3 --canary` as an operator runs it: 4 replicas
behind the real sglang router (sbx1..sbx4, the router on sbx0), the canary sbx1 judged against sbx2 (the same
hardware) by fleet's own traffic, then put back (a canary that did not pass) or followed by the rest.

Two cases, one rollout of each in turn from the same fleet, kept up between rollouts:
- p99: the new release plays the simulator's regression `SGLANG_SIM_SLOWER=0.10@99` (sandbox/sim/README.md:
  every delay of the requests at or above p99 of the release's spread 10% longer); it should fail;
- A/A: the new release differs only by a note in its environment (nothing the server reads); it should pass,
  and the rollout goes on to the other three, the next rollouts starting from it.
Both releases keep the old one's spread (`--jitter`, SGLANG_SIM_JITTER, 0.25 as tests/unit/judge_traffic.py).

The simulator's time scale: every host's server runs with SGLANG_SIM_TOKEN_TIME_SCALE=S (`--scale`: every
per-token delay times S) and its start-up phases at SGLANG_SIM_TIME_SCALE (`--start-scale`), both set in a copy
of the instance's inventory (the hosts' `vars.env`). The playbook's canary policy is the default one in simulated
time: looks of 120 s up to 600 s at 10 requests a second a host become 120·S s up to 600·S s at 10/S a second,
so each look judges as many requests, and a server as loaded, as the defaults would. The verdict's window is
reported in simulated seconds (its seconds / S).

Each rollout is one JSON line in --out, appended as it ends, so a partial run still gives figures (with the fleet
commit it ran, `+` for changes beside it, and `timeline`: each stderr line of the deploy with its second, where
the wall time went); the table at the end (or `--summary FILE` alone) gives each case's fail and pass counts
with 95% Wilson intervals, the median window to the verdict in simulated seconds and the wall seconds a rollout
took. After every rollout the router is asked which workers it lists, each replica's /health and one request
through the router: whether the rollout left every replica serving behind the router.

usage: FLEET_SANDBOX_INSTANCE=bench FLEET_STATE_DIR=/tmp/state-bench inv sandbox.up --hosts 5 \
           --profile rtx5090-x2-workstation
       FLEET_SANDBOX_INSTANCE=bench FLEET_STATE_DIR=/tmp/state-bench .venv/bin/python bench/bench_canary_sandbox.py \
           [--rollouts 100] [--scale 0.25] [--until 13:00] [--out /tmp/canary-sandbox.jsonl]   (a line a rollout)
       .venv/bin/python bench/bench_canary_sandbox.py --summary /tmp/canary-sandbox.jsonl   (the table, then JSON)

Measured 2026-12-06 (h-canary7: three fleets, each its own 5-host instance bench, lane5, lane6, --fleet 0 there;
rtx5090-x2-workstation, --scale 0.25, 2 cores shared, load 2.9-7.2), 00:30-01:58 UTC, stopped by --until 01:55:
  p99  60 rollouts: 56 fail, 4 pass  93.3% (95% Wilson 84.1-97.4%), median verdict at 240 simulated s, 87 s wall
  A/A  59 rollouts: 59 pass          100%  (93.9-100%),             at the 600 s cap,                  175 s wall
  Pooled with h-canary4 (d621af1 lines), 5, 5b, 6 (same judge; 1 left out, unchanged): p99 116/122 95.1%
  (89.7-97.7%), A/A 120/121 99.2% (95.5-99.9%). A look took 31.7-32.0 s wall (median), as with one or two fleets.
  The 4 passed p99s reached the cap or look 3 with TPOT p99 +4.5, +3.2, +6.2, -0.5% (the usual +9%); after every
  one of the 119 rollouts the router listed the 4 replicas, each healthy, and answered. The fails (h-canary3's 13
  counted: 6 tpot, 4 e2e, 3 both) come from the TPOT and end-to-end tails, never the TTFT tail: TTFTs of ~7 ms
  of wall time at this scale are within the busy machine's scheduling noise (TTFT p99.5, canary over baseline:
  1.03 sd 0.10 for p99, 1.01 for A/A; the judge's TTFT tail shift +1.8% sd 5.4%), while TPOT, averaged over a
  request's tokens, keeps the 10%.

Where a rollout's wall time goes (--summary's `wall s` line, from each line's timeline; h-canary5, one fleet,
2 cores shared, load 3-6, 17:59-19:30 UTC): a look is the window's 30 s of traffic (120 simulated s at --scale
0.25) and 1.5-1.8 s besides (the last requests' end, an SSH session a host and look, the canary's fault probe, the
judge: 0.15 s at 1200 requests a side to 1 s at 4800); before the traffic 2-3 s of `inv` starting and 7-8 s of the
canary's own deploy, back behind the router, and the numerics gate; after the verdict about 7 s (p99: the put-back)
or 12 s (A/A: the other three replicas, then the router). The traffic is 75-80% of a pair's wall time and is set by
the policy in simulated time: only --scale shortens it. Before 5fa88f2 the simulated server at times ignored SIGTERM
(systemd's and fleet-launch's, a few ms apart, deadlocked its handler): a stop ran to systemd's SIGKILL at the 30 s
budget, 3 times in 16 rollouts (--summary counts them: `stops that ran to the budget`).

Why no canary here fails on TTFT (bench/bench_canary_ttft.py over the recordings, h-canary5b's 13 p99 and 13 A/A):
the simulator does slow the release's TTFT (the factor multiplies the prefill and first step of a request with
u >= 0.99), but what the client records, per length stratum, is TTFT = a x factor(u) + b + rest: a 2.4 ms (64-token
prompts) to 16 ms (1024), b about 2 ms the release does not scale (connection, HTTP, the client's thread), and a
rest, the busy machine's scheduling, sd 1.5-2 ms, p99.9 11-15 ms, alike on both sides. 10% of a slowed request's
a x factor is 0.5-3 ms, so the pooled top 1% of TTFT residuals is mostly requests the machine delayed: 29% (sd 17%)
of the canary's slowed requests (its top 1% by TPOT residual) are in it (A/A 18%, the spread's own share), and the
judge's TTFT p99 estimate is +0.7% sd 1.5% (A/A -1.0% sd 3.0%) where TPOT's is +8.9% sd 2.4% (A/A -0.7% sd 1.0%).
With the release's part of TTFT 4x larger (the prefill at time scale 1: --part 4) it would be +3.9% sd 3.2%,
failing 2 of 13. The judge catches what the samples carry (bench_canary_judge, traffic without b or rest: 98%);
at this scale the sandbox's TTFTs do not carry 10% at p99.

Two fleets at once (--fleet 0 and 1, h-canary6, 21:14-22:35 UTC): during the window a fleet's canary and baseline
use about 0.1 core each (server and canary_load, summed over each host's netns), `inv` a few %, so a second fleet
costs about 0.2 of the 2 cores. Fleet 0's rollouts took as long alone (22:04-22:16, fleet 1 stopped: p99 126 s,
A/A 180 s, median of 2 each) as beside fleet 1 (p99 116 s, A/A 185 s, median of 10 each): two fleets gave 67
rollouts in 84 minutes (fleet 1 off for 12 of them), about twice one fleet's. The risk is the machine's: at load
12-16 (other helpers) stalls of 0.3-1 s hit one host of each fleet at 21:47-21:50: fleet 0's A/A #7 failed (e2e
p99 +45%, the canary's TTFT p99.5 10x the baseline's) and fleet 1's p99 #7 passed (the baseline's 5.6x the
canary's). The judge takes a window's requests as independent; one host's stall is not.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from fleet import inventory  # noqa: E402
from fleet.logs.proportion import wilson  # noqa: E402
from fleet.policy import Canary  # noqa: E402
from sandbox.config import config  # noqa: E402

ROUTER, REPLICAS = "sbx0", ["sbx1", "sbx2", "sbx3", "sbx4"]  # the canary first: --serial 1,3 (--fleet 1: sbx5..9)
PORT, ROUTER_PORT = 30000, 30080
BUDGETS = {"start": 20, "weight_load": 20, "jit_compile": 30, "autotune": 30, "graph_capture": 30, "ready": 30,
           "stop": 30}
SLOWER = {"SGLANG_SIM_SLOWER": "0.10@99"}
CASES = ("p99", "A/A")
COMMIT = "?"


def sim_inventory(folder: Path, start_scale: float, scale: float) -> Path:
    """The instance's inventory with the simulator's time scales in every host's environment."""
    doc = yaml.safe_load(Path(config().inventory_path).read_text())
    for name in doc["hosts"]:
        env = doc["hosts"][name].setdefault("vars", {}).setdefault("env", {})
        env.update(SGLANG_SIM_TIME_SCALE=str(start_scale), SGLANG_SIM_TOKEN_TIME_SCALE=str(scale))
    path = folder / "inventory" / "hosts.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def playbook(folder: Path, env: dict[str, str], scale: float) -> Path:
    """The replicas' playbook (one name: each rollout upgrades it in place) with `env`, the default canary
    policy in simulated time."""
    policy = Canary()
    book = {"name": "canary-bench", "model": {"path": "/models/Llama-3.1-8B-Instruct"},
            "serve": {"host": "0.0.0.0", "port": PORT, "api_key": {"env": "SGLANG_API_KEY"}, "env": env},
            "flags": {"tp-size": 1}, "ladder": [{"name": "plain"}], "budgets": BUDGETS, "bench": {"gate": False},
            "router": {"host": ROUTER, "port": ROUTER_PORT, "policy": "round_robin",
                       "flags": {"health-check-interval-secs": 2}},
            "canary": {"window": round(policy.window * scale, 3), "max_window": round(policy.max_window * scale, 3),
                       "rate": round(policy.rate / scale, 3)}}
    path = folder / "canary-bench.yaml"
    path.write_text(yaml.safe_dump(book, sort_keys=False))
    return path


def deploy(inv_path: Path, book: Path, key: str, *args: str) -> tuple[int, dict[str, Any], str, float]:
    """(exit status, --json, the end of stderr, wall seconds) of `inv deploy` on the replicas."""
    picks = [a for h in REPLICAS for a in ("--host", h)]
    cmd = [str(REPO / ".venv/bin/inv"), "deploy", "-i", str(inv_path), *picks, "--playbook", str(book), "--yes",
           "--serial", "1,3", *args, "--json"]
    t0 = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, subprocess.Popen(
            cmd, cwd=REPO, stdout=out, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
            env={**os.environ, "SGLANG_API_KEY": key}) as proc:
        assert proc.stderr is not None
        timeline = [(round(time.monotonic() - t0, 1), line.rstrip()) for line in proc.stderr]  # as it comes
        rc = proc.wait(timeout=1800)
        out.seek(0)
        stdout = out.read()
    seconds = time.monotonic() - t0
    stderr = "\n".join(line for _, line in timeline)
    try:
        data = json.loads(stdout)
    except ValueError:
        data = {}
    saved = re.search(r"its samples are in (\S+) ", stderr)
    if saved:
        data["recording"] = saved.group(1)
    data["timeline"] = [[t, line[:140]] for t, line in timeline if line.strip()]
    return rc, data, stderr[-1500:], seconds


def commit() -> str:
    """The fleet commit the rollouts run (`+` when the worktree has changes beside it)."""
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "fleet", "playbooks", "sandbox", "bench"],
                           cwd=REPO, capture_output=True, text=True).stdout.strip()
    return head.stdout.strip() + ("+" if dirty else "")


def measured(recording: str | None) -> dict[str, Any] | None:
    """What the window's TTFTs show, judge aside: each side's median TTFT (ms of wall time) and the canary's p50
    and p99.5 over the baseline's (p99.5: inside the slowed 1%, not on its edge), each request's TTFT taken over
    its length pair's pooled median (the load has six pairs): how much of the simulated 10% the sandbox kept."""
    if recording is None:
        return None
    try:
        rec = json.loads(Path(recording).read_text())
    except (OSError, ValueError):
        return None
    sides = {k: [(p, o, t) for _, p, o, t, _ in rec[k] if t is not None] for k in ("base", "canary")}
    pooled: dict[tuple[int, int], list[float]] = {}
    for p, o, t in sides["base"] + sides["canary"]:
        pooled.setdefault((p, o), []).append(t)
    mid = {k: statistics.median(v) for k, v in pooled.items()}
    norm = {k: sorted(t / mid[(p, o)] for p, o, t in v) for k, v in sides.items()}
    if min(len(v) for v in norm.values()) < 100:
        return None

    def q(v: list[float], f: float) -> float:
        return v[min(len(v) - 1, int(f * len(v)))]

    return {"ttft_ms": [round(statistics.median(t for *_, t in sides[k]) * 1000, 2) for k in ("base", "canary")],
            "p50_ratio": round(q(norm["canary"], 0.5) / q(norm["base"], 0.5), 4),
            "p995_ratio": round(q(norm["canary"], 0.995) / q(norm["base"], 0.995), 4)}


def _http(url: str, key: str, body: dict[str, Any] | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError as e:
        return 0, str(e)


def serving(inv: inventory.Inventory, key: str) -> dict[str, Any]:
    """What the router lists, which replicas answer /health, and whether a request through the router is
    answered: `every` when all four are listed and healthy and the routed request is answered."""
    router = f"http://{inv.hosts[ROUTER].address}:{ROUTER_PORT}"
    status, text = _http(f"{router}/workers", key)
    try:
        listed = sorted(w["url"] for w in json.loads(text)["workers"]) if status == 200 else []
    except (ValueError, KeyError, TypeError):
        listed = []
    want = sorted(f"http://{inv.hosts[h].address}:{PORT}" for h in REPLICAS)
    healthy = [h for h in REPLICAS if _http(f"http://{inv.hosts[h].address}:{PORT}/health", key)[0] == 200]
    status, text = _http(f"{router}/generate", key, {"text": "2+2=", "sampling_params": {"max_new_tokens": 4,
                                                                                        "temperature": 0}})
    try:
        routed = status == 200 and json.loads(text)["text"].strip().startswith("4")
    except (ValueError, KeyError, TypeError):
        routed = False
    return {"every": listed == want and len(healthy) == len(REPLICAS) and routed,
            "listed": len(set(listed) & set(want)), "healthy": healthy, "routed": routed}


def record(case: str, n: int, rc: int, data: dict[str, Any], err: str, wall: float, scale: float,
           after: dict[str, Any]) -> dict[str, Any]:
    """One rollout's JSON line."""
    judged = data.get("judged") or {}
    verdict = judged.get("verdict") or {}
    parts = verdict.get("metrics") or []
    tail = next((m for m in parts if m["metric"] == "ttft" and m["part"].startswith("p")), None)
    hosts = data.get("hosts") or []
    return {"case": case, "n": n, "router": ROUTER, "instance": config().instance, "commit": COMMIT,
            "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "rc": rc, "decision": verdict.get("decision"), "look": verdict.get("look"),
            "sim_s": round(verdict["seconds"] / scale, 1) if "seconds" in verdict else None,
            "numerics_ok": (judged.get("numerics") or {}).get("ok"), "faults": judged.get("faults"),
            "baselines": judged.get("baselines"),
            "failed": [f"{m['metric']} {m['part']} {m['estimate'] * 100:+.1f}%" for m in parts
                       if m["decision"] == "fail"],
            "ttft_tail": None if tail is None else {k: tail[k] for k in ("estimate", "low", "high", "n_base",
                                                                         "n_canary")},
            "hosts": [[h.get("host"), h.get("status"), (h.get("error") or "")[-120:]] for h in hosts],
            "stopped": data.get("stopped"), "wall_s": round(wall, 1), "serving": after,
            "measured": measured(data.get("recording")), "recording": data.get("recording"),
            "timeline": data.get("timeline"),
            **({"error": err[-600:]} if not verdict else {})}


LOOK = re.compile(r"canary: look \d+: ")
STOP_HANG = re.compile(r"phase stop: \d+s of \d+s budget")
PARTS = ("start", "to_traffic", "traffic", "per_look", "after")


def phases(row: dict[str, Any]) -> dict[str, float] | None:
    """Where a rollout's wall seconds went, from its `timeline`: `start` (until the deploy's first line: the
    command's start-up), `to_traffic` (the canary's own deploy, behind the router again, and the numerics gate),
    `traffic` (the looks: the window's traffic and each look's judging), `per_look` (traffic over the looks, the
    window's wall seconds included), `after` (after the last look: the verdict recorded, then the put-back or the
    other replicas, and the router's end); `stop_hangs`: stops that ran to the stop budget. None without a
    timeline or looks."""
    timeline = row.get("timeline") or []
    gate = next((t for t, line in timeline if "canary: numerics:" in line), None)
    looks = [t for t, line in timeline if LOOK.search(line)]
    if not timeline or gate is None or not looks:
        return None
    start = timeline[0][0]
    return {"start": start, "to_traffic": round(gate - start, 1), "traffic": round(looks[-1] - gate, 1),
            "per_look": round((looks[-1] - gate) / len(looks), 1), "after": round(row["wall_s"] - looks[-1], 1),
            "stop_hangs": sum(bool(STOP_HANG.search(line)) for _, line in timeline)}


def fair(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rollouts that started from the release before: an A/A one after a p99 one that passed, on the same
    fleet (instance and router: lines before `instance` all ran on `bench`) with no restore between (the bench
    before `restored`), started from the slower release; left out."""
    slow: set[tuple[str, str]] = set()
    out = []
    for r in rows:
        fleet = (r.get("instance", "bench"), r.get("router", ROUTER))
        if r["case"] == "p99" and r["rc"] == 0 and not r.get("restored"):
            slow.add(fleet)
        elif r["case"] == "A/A" and fleet in slow:
            if r["rc"] == 0:
                slow.discard(fleet)
            continue
        out.append(r)
    return out


def unchanged(row: dict[str, Any]) -> bool:
    """A rollout whose canary already served what it would install: no canary was deployed or judged (before
    328a9c7 a failed canary after a failed one was put back on the earlier failed release, so the next p99
    rollout found it serving: h-canary6's p99 #8 of fleet 0)."""
    hosts = row.get("hosts") or []
    return row["decision"] is None and bool(hosts) and hosts[0][1] == "unchanged"


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The table (printed) and its JSON: per case, verdict counts, the expected verdict's rate with its 95% Wilson
    interval, the median window to the verdict (simulated s), wall seconds a rollout (of the `fair` rollouts)."""
    left = len(rows) - len(rows := fair(rows))
    if left:
        print(f"# {left} A/A rollouts left out: they started from a slower release that had passed")
    vacuous = len(rows) - len(rows := [r for r in rows if not unchanged(r)])
    if vacuous:
        print(f"# {vacuous} rollouts left out: the canary already served the release, so nothing was judged")
    out: dict[str, Any] = {"left_out": left, "left_out_unchanged": vacuous}
    print(f"{'case':<5} {'n':>4} {'fail':>5} {'pass':>5} {'inc':>4} {'none':>5}  "
          f"{'expected verdict, rate (95% CI)':<34} {'median sim s':>12} {'wall s':>7} {'not all serving':>16}")
    for case in CASES:
        mine = [r for r in rows if r["case"] == case]
        if not mine:
            continue
        n = len(mine)
        count = {d: sum(r["decision"] == d for r in mine) for d in ("fail", "pass", "inconclusive")}
        count["none"] = sum(r["decision"] is None for r in mine)
        want = "fail" if case == "p99" else "pass"
        lo, hi = wilson(count[want], n)
        stops = [r["sim_s"] for r in mine if r["sim_s"] is not None]
        stop = statistics.median(stops) if stops else None
        wall = statistics.median(r["wall_s"] for r in mine)
        broken = sum(not r["serving"]["every"] for r in mine)
        print(f"{case:<5} {n:>4} {count['fail']:>5} {count['pass']:>5} {count['inconclusive']:>4} {count['none']:>5}  "
              f"{want} {count[want] / n:6.1%} ({lo:.1%}-{hi:.1%}){'':<12} {stop if stop is not None else '-':>12} "
              f"{wall:>7.1f} {broken:>16}")
        out[case] = {"rollouts": n, **count, "expected": want, "rate": count[want] / n, "ci95": [lo, hi],
                     "median_sim_s": stop, "median_wall_s": wall, "not_all_serving": broken}
        timed = [p for r in mine if (p := phases(r)) is not None]
        if timed:
            parts = {k: statistics.median(p[k] for p in timed) for k in PARTS}
            out[case]["wall_parts_median_s"] = parts
            out[case]["stop_hangs"] = sum(p["stop_hangs"] for p in timed)
            print(f"      wall s, median of {len(timed)}: " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items())
                  + f"; stops that ran to the budget: {out[case]['stop_hangs']}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rollouts", type=int, default=100, help="of each case")
    ap.add_argument("--scale", type=float, default=0.25, help="SGLANG_SIM_TOKEN_TIME_SCALE (0.1 to 1)")
    ap.add_argument("--start-scale", type=float, default=0.004, help="SGLANG_SIM_TIME_SCALE")
    ap.add_argument("--jitter", type=float, default=0.25, help="SGLANG_SIM_JITTER of every release")
    ap.add_argument("--until", help="HH:MM UTC: start no rollout after it")
    ap.add_argument("--out", type=Path, default=Path("/tmp/canary-sandbox.jsonl"))
    ap.add_argument("--summary", type=Path, nargs="+", help="only the table of these files' rollouts")
    ap.add_argument("--fleet", type=int, default=0, help="N: router sbx{5N}, replicas sbx{5N+1}..sbx{5N+4} "
                    "(another fleet of the instance, for a second bench beside the first; a fleet in an instance "
                    "of its own, 5 hosts, is 0 there)")
    ap.add_argument("--first", choices=CASES, default=CASES[0], help="the case of the first rollout")
    a = ap.parse_args()
    global ROUTER, REPLICAS, COMMIT
    COMMIT = commit()
    ROUTER, REPLICAS = f"sbx{5 * a.fleet}", [f"sbx{5 * a.fleet + k}" for k in range(1, 5)]
    if a.summary:
        print(json.dumps(summary([json.loads(ln) for f in a.summary for ln in f.read_text().splitlines()
                                  if ln.strip()])))
        return 0
    if not 0.1 <= a.scale <= 1:
        sys.exit(f"--scale {a.scale}: between 0.1 and 1 (the canary's load is at most 100 requests a second)")
    until = None
    if a.until:
        hh, mm = (int(x) for x in a.until.split(":"))
        now = datetime.datetime.now(datetime.UTC)
        until = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
    folder = Path(tempfile.mkdtemp(prefix="bench-canary-"))
    inv_path = sim_inventory(folder, a.start_scale, a.scale)
    inv = inventory.load(inv_path)
    missing = [h for h in (ROUTER, *REPLICAS) if h not in inv.hosts]
    if missing:
        sys.exit(f"the sandbox has no {', '.join(missing)}: inv sandbox.up --hosts 5 (see usage)")
    os.environ.setdefault("FLEET_SANDBOX_ONLY", "1")
    key = secrets.token_hex(16)
    base = {"NCCL_P2P_DISABLE": "1", "SGLANG_SIM_JITTER": str(a.jitter)}
    run = secrets.token_hex(3)
    note = f"{run}-0"
    rc, data, err, wall = deploy(inv_path, playbook(folder, {**base, "FLEET_BENCH_NOTE": note}, a.scale), key)
    if rc != 0:
        sys.exit(f"the first deploy failed (exit {rc}): {err}")
    print(f"# fleet up in {wall:.0f} s: {', '.join(REPLICAS)} behind {ROUTER}; scale {a.scale}, out {a.out}",
          flush=True)
    done = {c: 0 for c in CASES}
    rows: list[dict[str, Any]] = []
    i = 0
    while min(done.values()) < a.rollouts:
        case = CASES[(i + CASES.index(a.first)) % len(CASES)]
        i += 1
        if until is not None and datetime.datetime.now(datetime.UTC) >= until:
            break
        if done[case] >= a.rollouts:
            continue
        new = f"{run}-{i}" if case == "A/A" else note
        env = {**base, "FLEET_BENCH_NOTE": new, **(SLOWER if case == "p99" else {})}
        rc, data, err, wall = deploy(inv_path, playbook(folder, env, a.scale), key, "--canary")
        row = record(case, done[case] + 1, rc, data, err, wall, a.scale, serving(inv, key))
        if case == "A/A" and rc == 0:
            note = new  # every replica on it: the next rollouts start from it
        if case == "p99" and rc == 0:  # the slower release passed and went everywhere: the release before again
            back, _, _, took = deploy(inv_path, playbook(folder, {**base, "FLEET_BENCH_NOTE": note}, a.scale), key)
            row["restored"], row["restore_wall_s"] = back == 0, round(took, 1)
        done[case] += 1
        rows.append(row)
        with a.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"{case:<4} #{row['n']:<3} rc {rc} {row['decision']} look {row['look']} ({row['sim_s']} sim s) "
              f"{'; '.join(row['failed'])} wall {wall:.0f} s, serving {row['serving']['every']}, "
              f"measured {row['measured']}", flush=True)
    print(json.dumps({"scale": a.scale, "jitter": a.jitter, "policy": Canary().model_dump(exclude={"prompts"}),
                      "cases": summary(rows)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
