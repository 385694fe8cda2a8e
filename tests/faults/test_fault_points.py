"""The fault-point harness: every remote step of deploy, rollback and patch is a fault point (fleet.faulthook
numbers each command fleet.ssh.remote runs, and the journal's channel), learnt from one clean traced run of
each flow, so a new step is covered without anyone listing it. For every point (the suite: a sample, see
_selected) and every kind (the command fails; the link drops while it runs; the controller is SIGKILLed before
it; the host's disks are full from then on) the real flow runs (`inv`, a process of its own) on one sandbox host,
and the invariant is checked:

  1. the host serves the release that was current before, or the one asked for (byte for byte, healthy);
  2. no lock is left that the next run cannot take: after a kill or a lost link, the next run (a deploy of the
     release that served) recovers it and the host ends as in 1;
  3. the release that served before stays reachable by rollback (keep_releases is larger than a run can push);
  4. no file is left half-patched, no release in progress, no temp file, no patch run half done.

Each run starts from the same state (the releases, unit, env and patchable files put back from a snapshot;
the server restarted only when its files changed). /var/lib/fleet, /etc/fleet, /etc/systemd/system and the
patchable packages are small tmpfs mounts on that host, so `full` really fills them (ENOSPC) and nothing else.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml
from faultkit import NO_P2P, PATCHABLE, SITE, inventory_file
from fleetcli import inv_at, llama_playbook, sh

from fleet.faulthook import KINDS

HOST = "sbx0"  # SM120 (rtx-pro-6000-x8): the patch set really writes files there
PATCH_SET = "sm120-allreduce-fusion"
FOLDERS = ["/var/lib/fleet", "/etc/fleet", "/etc/systemd/system", f"{SITE}/sglang", f"{SITE}/flashinfer"]
FILL = "for d in " + " ".join(FOLDERS) + "; do head -c 64M /dev/zero > $d/.fleet-fault-fill 2>/dev/null; done; true"
UNFILL = "rm -f " + " ".join(f"{d}/.fleet-fault-fill" for d in FOLDERS)
SNAPSHOT = "/root/fleet-fault-snapshot.tar"
SNAPPED = ["var/lib/fleet", "etc/fleet", "etc/systemd/system/sglang.service", *(p.lstrip("/") for p in PATCHABLE)]
RESULTS: list[tuple[str, str, int, str, str]] = []  # (flow, kind, point, label, what broke) for the summary


def _sh(ctx, command: str) -> str:
    return sh(ctx["inventory"], HOST, command)


@pytest.fixture(scope="module")
def ctx(_sandbox_session, tmp_path_factory):
    """One host with tmpfs state folders, two releases (A older, B current and serving), and their snapshot."""
    from fleet import inventory as inventory_mod

    sandbox, profiles = _sandbox_session
    sandbox.up(len(profiles), profiles)
    tmp = tmp_path_factory.mktemp("fault-points")
    doc = yaml.safe_load(Path(sandbox.cfg.inventory_path).read_text())
    doc["hosts"] = {HOST: doc["hosts"][HOST]}
    doc["hosts"][HOST].setdefault("vars", {}).setdefault("env", {})["SGLANG_SIM_TIME_SCALE"] = "0.004"
    inv_path = inventory_file(tmp)
    inv_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    c = {"inv": inv_path, "inventory": inventory_mod.load(str(inv_path)), "tmp": tmp,
         "a": llama_playbook(tmp, [{"name": "plain", **NO_P2P}], name="fault-a", keep_releases=10),
         "b": llama_playbook(tmp, [{"name": "plain-b", "env": {**NO_P2P["env"], "X": "b"},
                                    "flags": dict(NO_P2P["flags"])}], name="fault-b", keep_releases=10)}
    mounts = "; ".join(f"mkdir -p {d} /root/.ffp{i} && cp -a {d}/. /root/.ffp{i}/ && "
                       f"mount -t tmpfs -o size=24m,mode=0755 tmpfs {d} && cp -a /root/.ffp{i}/. {d}/ && "
                       f"rm -rf /root/.ffp{i}" for i, d in enumerate(FOLDERS))
    _sh(c, f"systemctl stop sglang 2>/dev/null; rm -rf /var/lib/fleet/* /var/lib/fleet/.c*; {mounts}; "
           "systemctl daemon-reload")
    try:
        for book in ("a", "b"):
            proc = _inv(c, "deploy", "--host", HOST, "--playbook", str(c[book]), "--force", "--json")
            assert proc.returncode == 0, proc.stderr[-2000:]
            data = json.loads(proc.stdout)
            assert data["status"] == "ok", proc.stderr[-2000:]
            c[f"release_{book}"] = data["release"]
        _sh(c, f"cd / && tar -cpf {SNAPSHOT} {' '.join(SNAPPED)}")
        c["digest"] = _files_digest(c)
        yield c
    finally:
        _sh(c, f"{UNFILL}; systemctl stop sglang; " + "; ".join(f"umount -l {d}" for d in reversed(FOLDERS))
            + f"; rm -f {SNAPSHOT}; systemctl daemon-reload; true")


def _inv(c, *args, env=None):
    return inv_at(c["inv"], *args, env={**(env or {}), "FLEET_SANDBOX_INSTANCE": os.environ.get(
        "FLEET_SANDBOX_INSTANCE", "test")})


def _files_digest(c) -> str:
    return _sh(c, "sha256sum /etc/systemd/system/sglang.service /etc/fleet/sglang.env " + " ".join(PATCHABLE))


def _reset(c) -> None:
    """Back to the snapshot: B current and serving, A before it; restarted only when the files had changed."""
    changed = _files_digest(c) != c["digest"]
    state = _sh(c, f"{UNFILL}; rm -rf /var/lib/fleet/* /var/lib/fleet/.[!.]*; "
                   "rm -f /etc/systemd/system/.sglang.service.fleet-* /etc/fleet/.sglang.env.fleet-*; "
                   f"cd / && tar -xpf {SNAPSHOT} && systemctl daemon-reload && systemctl is-active sglang; true")
    if changed or state.strip() != "active" or not _serving(c):
        _sh(c, "systemctl restart sglang")
        deadline = time.monotonic() + 60
        while not _serving(c):
            assert time.monotonic() < deadline, "the reset server did not come up"
            time.sleep(0.2)


def _serving(c) -> bool:
    out = _sh(c, "curl -s -m 10 -d '{\"text\": \"2+2=\"}' http://127.0.0.1:30000/generate || true")
    try:
        return json.loads(out)["text"].strip().startswith("4")
    except (ValueError, KeyError, TypeError):
        return False


CHECK = r"""
cd /var/lib/fleet 2>/dev/null || exit 0
echo "lock $(test -d lock && cat lock/owner.json 2>/dev/null | head -c 300 || echo none)"
echo "current $(readlink current)"
echo "active $(systemctl is-active sglang)"
echo "unit $(sha256sum < /etc/systemd/system/sglang.service | cut -c1-64)"
echo "env $(sha256sum < /etc/fleet/sglang.env | cut -c1-64)"
for m in releases/*/manifest.json; do [ -f "$m" ] && echo "release $(dirname $m | cut -d/ -f2) $(tr -d '\n' < $m)"; done
for m in backups/runs/*/manifest.json; do [ -f "$m" ] && echo "patchrun $(tr -d '\n' < $m)"; done
find /etc/systemd/system /etc/fleet /var/lib/fleet PATCHDIRS -name '.*.fleet-*' 2>/dev/null | sed 's/^/temp /'
"""


def _state(c) -> dict:
    out = _sh(c, CHECK.replace("PATCHDIRS", f"{SITE}/sglang {SITE}/flashinfer"))
    st = {"releases": {}, "runs": [], "temp": []}
    for line in out.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "release":
            rid, _, text = rest.partition(" ")
            try:
                st["releases"][rid] = json.loads(text)
            except ValueError:
                st["releases"][rid] = {"status": "UNREADABLE"}
        elif kind == "patchrun":
            try:
                st["runs"].append(json.loads(rest))
            except ValueError:
                st["runs"].append({"status": "UNREADABLE"})
        elif kind == "temp":
            st["temp"].append(rest)
        else:
            st[kind] = rest.strip()
    st["current"] = st.get("current", "").rsplit("/", 1)[-1]
    return st


def _broken(c, allowed: set[str] | None, after_next: bool) -> list[str]:
    """What of the invariant does not hold now (empty: all of it). `allowed`: the releases the host may serve
    (None: any release the flow made, besides the one current before)."""
    st, bad = _state(c), []
    current = st["releases"].get(st["current"])
    lock = [f"a lock is left: {st.get('lock', '')[:120]}"] if st.get("lock") != "none" else []
    if current is None:
        bad.append(f"`current` ({st['current'] or 'none'}) is no readable release")
    else:
        if allowed is not None and st["current"] not in allowed:
            bad.append(f"current is {st['current']} ({current.get('playbook')}), not one of {sorted(allowed)}")
        files = current.get("files", {})
        unit = files.get("/etc/systemd/system/sglang.service", {}).get("sha256")
        env = files.get("/etc/fleet/sglang.env", {}).get("sha256")
        if (unit, env) != (st.get("unit"), st.get("env")):
            bad.append(f"the unit or env file is not release {st['current']}'s")
        if current.get("status") != "ok":
            bad.append(f"current release {st['current']} is {current.get('status')}")
    if st.get("active") != "active" or not _serving(c):
        bad.append(f"the host serves nothing (unit {st.get('active')})")
    for rid in (c["release_b"], *(() if st["current"] == c["release_b"] else (c["release_a"],))):
        if rid != st["current"] and st["releases"].get(rid, {}).get("status") != "ok":
            bad.append(f"release {rid}, which served, is no longer reachable by rollback")
    left = [f"release {rid} is still in progress" for rid, r in st["releases"].items()
            if r.get("status") == "in-progress"]
    c["leftovers"] = left + lock  # what a dead or cut run left for the next run (a lock: its owner has exited)
    if after_next:
        bad += left + lock
    bad += [f"patch run {r.get('run')} is {r.get('status')}" for r in st["runs"]
            if r.get("status") in ("applying", "reverting", "UNREADABLE")]
    bad += [f"release {rid}'s manifest is unreadable" for rid, r in st["releases"].items()
            if r.get("status") == "UNREADABLE"]
    if after_next:
        bad += [f"temp file left: {t}" for t in st["temp"]]
    return bad


FLOWS = {
    "deploy": lambda c: ("deploy", "--host", HOST, "--playbook", str(c["b"]), "--force", "--json"),
    "rollback": lambda c: ("rollback", "--host", HOST, "--playbook", str(c["a"]), "--json"),
    "patch": lambda c: ("patch", "--host", HOST, "--set", PATCH_SET, "--json"),
}


def _points(c, flow: str) -> list[tuple[int, str]]:
    """The flow's fault points: its remote steps in a clean traced run (then the state is put back)."""
    if f"points_{flow}" not in c:
        _reset(c)
        trace = c["tmp"] / f"trace-{flow}"
        proc = _inv(c, *FLOWS[flow](c), env={"FLEET_FAULT_TRACE": str(trace)})
        assert proc.returncode == 0, proc.stderr[-2000:]
        c[f"points_{flow}"] = [(int(n), label) for n, _, label in
                               (line.split("\t", 2) for line in trace.read_text().splitlines())]
    return c[f"points_{flow}"]


def _allowed(c, flow: str) -> set[str] | None:
    # deploy: B (current before) or the new release of B; rollback: B or A; patch: B or its patch release.
    return {c["release_b"], c["release_a"]} if flow == "rollback" else None


SAMPLE = 2  # points per flow in the suite's run, each with every kind; FLEET_FAULT_POINTS=all for every point


def _selected(points: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The suite's sample: SAMPLE points per flow, evenly spread over its steps, so CI stays inside its budget
    (every point x every kind is about 3.5 h here). FLEET_FAULT_POINTS=all runs every point; a list such as
    3-9 or 20,35,47 narrows a developer's run."""
    spec = os.environ.get("FLEET_FAULT_POINTS")
    if spec == "all":
        return points
    if not spec:
        step = len(points) / (SAMPLE + 1)
        return [points[int(step * (i + 1))] for i in range(SAMPLE)] if len(points) > SAMPLE else points
    wanted: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.partition("-")
        wanted.update(range(int(low), int(high or low) + 1))
    return [p for p in points if p[0] in wanted]


# Failures the harness found that are not fixed yet: a run of that flow and kind that hits them is an xfail naming
# them (the summary still lists them). A rollback whose disk fills between the unit and env writes cannot write the
# old unit back either, so the unit stays stopped until space is freed (the next run recovers it). The fix: keep
# the old files as hardlinks and put them back by rename, which needs no free space.
KNOWN = {("rollback", "full"): "a full disk between a rollback's unit and env writes leaves the unit stopped"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("flow", list(FLOWS))
def test_every_fault_point_keeps_the_invariant(flow, kind, ctx):
    c = ctx
    failures = []
    for n, label in _selected(_points(c, flow)):
        _reset(c)
        env = {"FLEET_FAULT_AT": f"{n}:{kind}", "FLEET_FAULT_FILL": FILL}
        proc = _inv(c, *FLOWS[flow](c), env=env)
        if kind == "kill" and proc.returncode != -9:
            failures.append((n, label, f"the run was not killed at its point (exit {proc.returncode})"))
            continue
        bad, c["leftovers"] = [], []
        if kind in ("fail", "full"):  # the run ended by itself: the invariant holds now, disks still full
            bad = [f"right after the run: {b}" for b in _broken(c, _allowed(c, flow), after_next=False)]
            if bad:  # what fleet said, for the failure's report
                said = " ".join((proc.stdout + " " + proc.stderr).split())
                bad.append(f"the run said: {said[-1200:]}")
        _sh(c, UNFILL)
        if kind in ("kill", "drop") or bad or c["leftovers"]:  # the invariant relies on the next run's recovery
            nxt = _inv(c, "deploy", "--host", HOST, "--playbook", str(c["b"]), "--json")
            if nxt.returncode != 0:
                bad.append(f"the next deploy failed (exit {nxt.returncode}): {nxt.stdout[-300:]} {nxt.stderr[-300:]}")
            bad += [f"after the next deploy: {b}" for b in _broken(c, None, after_next=True)]
        for b in bad:
            failures.append((n, label, b))
        RESULTS.append((flow, kind, n, label, "; ".join(bad)))
        if os.environ.get("FLEET_FAULT_LOG"):  # a long run's progress, point by point
            with open(os.environ["FLEET_FAULT_LOG"], "a") as f:
                f.write(f"{flow} {kind} {n} {label[:70]} :: {'; '.join(bad) or 'ok'}\n")
    said = "\n".join(f"{flow} {kind} point {n} ({label}): {b}" for n, label, b in failures)
    if (flow, kind) in KNOWN and failures:
        pytest.xfail(f"known: {KNOWN[flow, kind]}\n{said}")
    assert not failures, said

