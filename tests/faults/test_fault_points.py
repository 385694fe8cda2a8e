"""The fault-point harness: every remote step of deploy, rollback, patch, bench and recover is a fault point
(fleet.faulthook numbers each command fleet.ssh.remote runs, and the journal's channel), learnt from one clean
traced run of each flow, so a new step is covered without anyone listing it. At a point, a kind (the command
fails; the link drops while it runs; the controller is SIGKILLed before it; the host's disks are full from then
on) is injected into the real flow (`inv`, a process of its own) on a sandbox host, and the invariant is checked:

  1. the host serves the release that was current before, or the one asked for (byte for byte, healthy, and
     the server runs that release's env: X);
  2. no lock is left that the next run cannot take: after a kill or a lost link, the next run (a deploy of the
     release that served; after recover, recover again) recovers it and the host ends as in 1;
  3. the release that served before stays reachable by rollback (keep_releases is larger than a run can push);
  4. no file is left half-patched, no release in progress, no temp, kept or `current` link, no patch run half
     done.

The suite runs every point with every kind; FLEET_FAULT_POINTS=rotate one kind a point (kinds_of), a list
(3-9,20) every kind at those points. The deploy flow deploys B's playbook with other bytes (an env value), so a
host can run new files while `current` still names B.

A flow's points are spread over three sandbox hosts (lanes, LANE_HOSTS), one run on each at a time: a run mostly
waits on round trips and the server's start, so three overlap even on 2 cores. Each lane learns the flow's points
from its own traced run, and runs only if its steps are the first lane's. Each run starts from the same state in
one round trip (the releases, unit, env and patchable files put back from a snapshot; systemd reloaded and the
server restarted only when needed), and `inv` runs forked from a process that imported fleet once (forkinv.py:
the same program, argv and environment, its own pid). /var/lib/fleet, /etc/fleet, /etc/systemd/system and the
patchable packages are small tmpfs mounts on each lane's host, so `full` really fills them (ENOSPC) and nothing
else. FLEET_FAULT_LOG=<file> writes a line a run: where its time went (reset, run, check, next) and its CPU
(the inv's, the host's).
"""

from __future__ import annotations

import json
import os
import select
import shlex
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from faultkit import NO_P2P, PATCHABLE, SITE, WANTS_RESET, inventory_file
from fleetcli import REPO, break_module, llama_playbook

from fleet.deploy.cachestore import CacheStore, Entry
from fleet.deploy.warmstart import not_whole
from fleet.faulthook import KINDS
from fleet.host import kcache
from fleet.ssh.connect import open_connection
from fleet.ssh.remote import run, run_bytes

# Each test (a flow with a kind at every point) may run on any worker of a parallel suite, on that worker's own
# fleet: the matrix is spread over the workers as its points are over the lanes (tests/conftest.py).
SPREAD_OVER_WORKERS = True
HOST = "sbx0"  # SM120 (rtx-pro-6000-x8): the patch set really writes files there
# The hosts a flow's points are spread over, one run on each at a time (lanes): the SM120 hosts, where the patch
# set writes files too. A run mostly waits (round trips, the server's start), so on 2 cores three at once take
# about half the time of one after the other (bench/bench_fault_lanes.py). FLEET_FAULT_LANES=1: sbx0 alone.
LANE_HOSTS = ("sbx0", "sbx2", "sbx4")
PATCH_SET = "sm120-allreduce-fusion"
FOLDERS = ["/var/lib/fleet", "/etc/fleet", "/etc/systemd/system", f"{SITE}/sglang", f"{SITE}/flashinfer"]
FILL = "for d in " + " ".join(FOLDERS) + "; do head -c 64M /dev/zero > $d/.fleet-fault-fill 2>/dev/null; done; true"
UNFILL = "rm -f " + " ".join(f"{d}/.fleet-fault-fill" for d in FOLDERS)
# The folders' small disks are tmpfs mounts that a unit of the lane's host makes at boot and saves at shutdown
# (into the root disk under them, seen through a bind mount of /), so they outlive a reboot as a disk does:
# recover reboots a host whose GPU reset is refused. Stopped outside a shutdown, it only unmounts them.
DISKS_SCRIPT = "/usr/local/lib/fleet-fault-disks"
DISKS = f"""set -e
u=/run/fleet-fault-under; mkdir -p $u  # / as the root disk holds it: no mount made on / after reaches here
mountpoint -q $u || {{ mount --bind / $u && mount --make-private $u; }}
case "$1" in
mount) for d in {' '.join(FOLDERS)}; do
         mountpoint -q $d && continue
         mkdir -p $d; mount -t tmpfs -o size=24m,mode=0755 tmpfs $d; cp -a $u$d/. $d/
       done ;;
save) if [ "$(systemctl is-system-running)" = stopping ]; then
        for d in {' '.join(FOLDERS)}; do
          find $u$d -mindepth 1 -maxdepth 1 -exec rm -rf {{}} +
          tar -C $d --exclude=./.fleet-fault-fill -cf - . | tar -C $u$d -xpf -
        done
      fi
      for d in {' '.join(reversed(FOLDERS))}; do umount -l $d; done ;;
esac
umount $u
"""
DISKS_UNIT = f"""[Unit]
Description=fleet's fault harness: small state disks that outlive a reboot
DefaultDependencies=no
After=local-fs.target
Before=sysinit.target shutdown.target
Conflicts=shutdown.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh {DISKS_SCRIPT} mount
ExecStop=/bin/sh {DISKS_SCRIPT} save

[Install]
WantedBy=sysinit.target
"""
DISKS_UP = (f"printf '%s' {shlex.quote(DISKS)} > {DISKS_SCRIPT} && "
            f"printf '%s' {shlex.quote(DISKS_UNIT)} > /usr/lib/systemd/system/fleet-fault-disks.service && "
            "systemctl daemon-reload && systemctl enable -q --now fleet-fault-disks")
DISKS_DOWN = ("systemctl disable -q --now fleet-fault-disks; rm -f /usr/lib/systemd/system/fleet-fault-disks.service "
              f"{DISKS_SCRIPT}")
SNAPSHOT = "/root/fleet-fault-snapshot.tar"
SNAPPED = ["var/lib/fleet", "etc/fleet", "etc/systemd/system/sglang.service", *(p.lstrip("/") for p in PATCHABLE)]
RESULTS: list[tuple[str, str, int, str, str]] = []  # (flow, kind, point, label, what broke) for the summary


def _sh(c, command: str) -> str:
    """One command on the host over the harness's own connection (opened once; again if it broke)."""
    host = c["inventory"].hosts[c.get("host", HOST)]
    for again in (False, True):
        try:
            if c.get("conn") is None:
                c["conn"] = open_connection(host)
            return run(c["conn"], host, command, timeout=180).stdout
        except Exception:
            if c.get("conn") is not None:
                c["conn"].close()
            c["conn"] = None
            if again:
                raise
    raise AssertionError("unreachable")


class ForkInv:
    """`inv` runs forked from one process that imported everything once (tests/faults/forkinv.py)."""

    def __init__(self, tmp: Path):
        self.tmp, self.n, self.cpu = tmp, 0, 0.0  # cpu: the CPU seconds all its runs used (user and system)
        self.proc = subprocess.Popen([str(REPO / ".venv/bin/python"), str(Path(__file__).with_name("forkinv.py"))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)

    def __call__(self, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        self.n += 1
        out, err = self.tmp / f"inv-{self.n}.out", self.tmp / f"inv-{self.n}.err"
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"id": self.n, "argv": ["inv", *argv], "env": env, "out": str(out),
                                          "err": str(err)}) + "\n")
        self.proc.stdin.flush()
        answer: dict = {}
        while answer.get("id") != self.n:  # an answer to a run a timed-out test gave up on is passed over
            ready, _, _ = select.select([self.proc.stdout], [], [], 600)
            assert ready, "an inv run took over 600 s"
            line = self.proc.stdout.readline()
            assert line, f"the fork server died (exit {self.proc.poll()})"
            answer = json.loads(line.removeprefix("forkinv: ")) if line.startswith("forkinv: ") else {}
        rc, self.cpu = answer["rc"], self.cpu + answer.get("cpu", 0.0)
        done = subprocess.CompletedProcess(argv, rc, out.read_text(errors="replace"), err.read_text(errors="replace"))
        out.unlink()
        err.unlink()
        return done

    def close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        try:
            self.proc.wait(timeout=30)  # it ends when its stdin does, once the run under way has ended
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# The files earlier tests patched on this host (test_fault_kill patches sbx2) put back from fleet's own backups,
# newest run first, before the lane wipes /var/lib/fleet: a patch left behind with its backups gone is "applied but
# not by fleet", and every deploy's preflight refuses it.
PRISTINE = "python3 -c " + shlex.quote(
    "import glob,json,os,shutil\n"
    "for r in sorted(glob.glob('/var/lib/fleet/backups/runs/*/manifest.json'), reverse=True):\n"
    "    m = json.load(open(r))\n"
    "    if m.get('status') != 'applied': continue\n"
    "    for f in m['files']:\n"
    "        o = '/var/lib/fleet/backups/objects/' + str(f.get('sha_before'))\n"
    "        if os.path.isfile(o): shutil.copyfile(o, f['path'] + '.t'); os.chmod(f['path'] + '.t', f['mode']); "
    "os.replace(f['path'] + '.t', f['path'])\n")


def _lane(sandbox, host: str, tmp: Path) -> dict:
    """One lane: `host` with tmpfs state folders, two releases (A older, B current and serving), their snapshot,
    an inventory of that host alone and a fork server of its own."""
    from fleet import inventory as inventory_mod

    doc = yaml.safe_load(Path(sandbox.cfg.inventory_path).read_text())
    doc["hosts"] = {host: doc["hosts"][host]}
    doc["hosts"][host].setdefault("vars", {}).setdefault("env", {})["SGLANG_SIM_TIME_SCALE"] = "0.004"
    inv_path = inventory_file(tmp)
    inv_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    (tmp / "b2").mkdir()
    c = {"host": host, "inv": inv_path, "inventory": inventory_mod.load(str(inv_path)), "tmp": tmp,
         "cpu_stat": sandbox.cfg.cgroups(host)[1] / "cpu.stat",
         "a": llama_playbook(tmp, [{"name": "plain", **NO_P2P}], name="fault-a", keep_releases=10),
         "b": llama_playbook(tmp, [{"name": "plain-b", "env": {**NO_P2P["env"], "X": "b"},
                                    "flags": dict(NO_P2P["flags"])}], name="fault-b", keep_releases=10),
         # what the deploy flow deploys: B's playbook with other bytes (an env), so a host can run new files
         # while `current` still names B (the `committing` state)
         "b2": llama_playbook(tmp / "b2", [{"name": "plain-b", "env": {**NO_P2P["env"], "X": "b2"},
                                            "flags": dict(NO_P2P["flags"])}], name="fault-b", keep_releases=10),
         "fork": ForkInv(tmp)}
    try:
        _sh(c, f"systemctl stop sglang 2>/dev/null; {PRISTINE}; rm -rf /var/lib/fleet/* /var/lib/fleet/.c*; "
               f"{DISKS_UP}; systemctl daemon-reload")
        for book in ("a", "b"):
            proc = _inv(c, "deploy", "--host", host, "--playbook", str(c[book]), "--force", "--json")
            assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-3000:]
            data = json.loads(proc.stdout)
            assert data["status"] == "ok", proc.stderr[-2000:]
            c[f"release_{book}"] = data["release"]
        _sh(c, f"cd / && tar -cpf {SNAPSHOT} {' '.join(SNAPPED)} && {FILES_DIGEST} > {DIGEST}")
    except BaseException:
        _end_lane(c)
        raise
    return c


def _end_lane(c: dict) -> None:
    c["fork"].close()
    try:
        _sh(c, f"{UNFILL}; systemctl stop sglang; {DISKS_DOWN}; "
               f"rm -f {SNAPSHOT} {DIGEST}; systemctl daemon-reload; true")
    finally:
        if c.get("conn") is not None:
            c["conn"].close()


@pytest.fixture(scope="module")
def ctx(_sandbox_session, tmp_path_factory):
    """The first lane (HOST): what the targeted tests and the sibling harnesses use."""
    sandbox, profiles = _sandbox_session
    sandbox.up(len(profiles), profiles)
    c = _lane(sandbox, HOST, tmp_path_factory.mktemp("fault-points"))
    try:
        yield c
    finally:
        _end_lane(c)


@pytest.fixture(scope="module")
def lanes(ctx, _sandbox_session, tmp_path_factory):
    """Every lane, ctx first (FLEET_FAULT_LANES of LANE_HOSTS), the others set up at once."""
    sandbox, _ = _sandbox_session
    count = max(1, min(len(LANE_HOSTS), int(os.environ.get("FLEET_FAULT_LANES", len(LANE_HOSTS)))))
    others = LANE_HOSTS[1:count]
    with ThreadPoolExecutor(max(1, len(others))) as pool:
        futures = [pool.submit(_lane, sandbox, host, tmp_path_factory.mktemp(f"fault-points-{host}"))
                   for host in others]
    made = [f.result() for f in futures if f.exception() is None]
    try:
        for f in futures:
            f.result()  # a lane that could not be set up fails the tests that need it, with its reason
        yield [ctx, *made]
    finally:
        for c in made:
            _end_lane(c)


def _inv(c, *args, env=None):
    """The real `inv ARGS -i INVENTORY`, forked from the harness's fork server (same argv, environment, folder)."""
    return c["fork"]([args[0], "-i", str(c["inv"]), *args[1:]],
                     {**os.environ, **(env or {}),
                      "FLEET_SANDBOX_INSTANCE": os.environ["FLEET_SANDBOX_INSTANCE"]})


DIGEST = "/root/fleet-fault-digest"
FILES_DIGEST = "sha256sum /etc/systemd/system/sglang.service /etc/fleet/sglang.env " + " ".join(PATCHABLE)
# The host answers the known question "2+2=" with 4 (what the harness calls serving).
SERVING = ("curl -s -m 10 -d '{\"text\": \"2+2=\"}' http://127.0.0.1:30000/generate 2>/dev/null "
           "| grep -qE '\"text\": *\"[[:space:]]*4'")
# The X value the unit's main process runs with (the env file's X, which tells B, B2 and A apart).
RUNNING_X = ("tr '\\0' '\\n' < /proc/$(systemctl show -p MainPID --value sglang)/environ 2>/dev/null "
             "| sed -n 's/^X=//p'")
# Back to the snapshot in one round trip: B current and serving, A before it; systemd reloaded only when its
# loaded unit is not the file's (a daemon-reload runs every generator: about 0.2 s of the host's CPU), the server
# restarted only when its files had changed, it does not serve, or it runs other files (X), then waited for.
RESET = f"""{UNFILL}; rm -f /run/fleet-sim/kmsg /run/fleet-sim/gpustate
changed=0; [ "$({FILES_DIGEST} 2>&1)" = "$(cat {DIGEST})" ] || changed=1
rm -rf /var/lib/fleet/* /var/lib/fleet/.[!.]*
rm -f /etc/systemd/system/.sglang.service.fleet-* /etc/fleet/.sglang.env.fleet-* \
  /etc/systemd/system/.sglang.service.kept-by-fleet.* /etc/fleet/.sglang.env.kept-by-fleet.*
cd / && tar -xpf {SNAPSHOT} || {{ echo "reset failed"; exit 0; }}
if [ $changed = 1 ] || [ "$(systemctl show -p NeedDaemonReload --value sglang)" != no ]; then
  systemctl daemon-reload || {{ echo "reset failed"; exit 0; }}
fi
if [ $changed = 1 ] || [ "$({RUNNING_X})" != b ] || ! systemctl is-active -q sglang || ! {SERVING}; then
  systemctl reset-failed sglang 2>/dev/null; systemctl restart sglang; i=0
  until {SERVING}; do
    i=$((i+1)); [ $i -lt 600 ] || {{ echo "the reset server did not come up"; exit 0; }}; sleep 0.1
  done
fi
echo reset"""


def _reset(c, flow: str = "") -> None:
    out = _sh(c, RESET + (f"\n{BEFORE[flow]} || echo 'its setting up failed'" if flow in BEFORE else "")).strip()
    assert out.endswith("reset"), out[-500:]


CHECK = r"""
cd /var/lib/fleet 2>/dev/null || exit 0
# a server started at the run's end (recover starts what it stopped, and does not wait) is given 10 s to serve
i=0; while [ $i -lt 100 ] && ! SERVING; do
  case $(systemctl is-active sglang) in active|activating|reloading) ;; *) break ;; esac; i=$((i+1)); sleep 0.1
done
echo "lock $(test -d lock && cat lock/owner.json 2>/dev/null | head -c 300 || echo none)"
echo "current $(readlink current)"
echo "active $(systemctl is-active sglang)"
echo "unit $(sha256sum < /etc/systemd/system/sglang.service | cut -c1-64)"
echo "env $(sha256sum < /etc/fleet/sglang.env | cut -c1-64)"
for m in releases/*/manifest.json; do [ -f "$m" ] && echo "release $(dirname $m | cut -d/ -f2) $(tr -d '\n' < $m)"; done
for m in backups/runs/*/manifest.json; do [ -f "$m" ] && echo "patchrun $(tr -d '\n' < $m)"; done
echo "serving $(SERVING && echo yes)"
echo "xfile $(sed -n 's/^X="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/fleet/sglang.env)"
echo "xrun $(RUNNING_X)"
find /etc/systemd/system /etc/fleet /var/lib/fleet PATCHDIRS \( -name '.*.fleet-*' -o -name '.*.kept-by-fleet.*' \
  -o -name '.current.*' \) \
  2>/dev/null | sed 's/^/temp /'
"""


def _state(c) -> dict:
    out = _sh(c, CHECK.replace("PATCHDIRS", f"{SITE}/sglang {SITE}/flashinfer").replace("SERVING", SERVING)
              .replace("RUNNING_X", RUNNING_X))
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
    if st.get("active") != "active" or st.get("serving") != "yes":
        bad.append(f"the host serves nothing (unit {st.get('active')})")
    elif st.get("xfile", "") != st.get("xrun", ""):  # what serves was started from other files than stand there
        bad.append(f"the server runs X={st.get('xrun', '')!r}, its env file (release {st['current']}'s) says "
                   f"X={st.get('xfile', '')!r}")
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
    "deploy": lambda c: ("deploy", "--host", c.get("host", HOST), "--playbook", str(c["b2"]), "--force", "--json"),
    "rollback": lambda c: ("rollback", "--host", c.get("host", HOST), "--playbook", str(c["a"]), "--json"),
    "patch": lambda c: ("patch", "--host", c.get("host", HOST), "--set", PATCH_SET, "--json"),
    # measures what serves and stores the record in the current release: it must never change what serves
    "bench": lambda c: ("bench", "--host", c.get("host", HOST), "--playbook", str(c["b"]), "--yes", "--json"),
    # GPU 0's driver asks for a reset (BEFORE): the unit stopped, the GPU reset, the unit started and probed again
    "recover": lambda c: ("recover", "--host", c.get("host", HOST), "--json"),
}
# What a flow needs on the host after the reset (and before its traced run).
BEFORE = {"recover": "mkdir -p /run/fleet-sim && " + WANTS_RESET}

# The warm start's remote steps (issue 49): B2's files deployed with serve.warm_start, the lane's own controller
# state holding an entry of the host's key whose prefill module is cut short (made once per lane: a cold deploy,
# its collected entry broken), so the run places it, the start dies, the folders are cleared, the server starts
# cold and its caches are collected: fleet.host.kcache's place, clear and collect. Only those points run (every
# kind): the flow's other steps are the deploy flow's.
# The `warm-serves` flow: the same deploy with the entry whole, so the start serves with the placed caches and
# reads their modules back (kcache's modules step, which the broken entry's start never reaches).
# The `warm-unproven` flow: the store holds nothing for the key, and the host holds what a place whose run died
# left and no start served with (the broken entry's caches, named by the mark): the warm start's cold path first
# removes them (kcache's unproven step), the server starts cold and its caches are collected. A fault that leaves
# them in place must still never leave the host serving nothing: a start that dies on them is retried cold.
WARM, WARM_SERVES, WARM_UNPROVEN = "warm", "warm-serves", "warm-unproven"
WARM_FLOWS = (WARM, WARM_SERVES, WARM_UNPROVEN)
RUNS = {**FLOWS, **{f: lambda c: ("deploy", "--host", c.get("host", HOST), "--playbook", str(c["w"]), "--force",
                                  "--json") for f in WARM_FLOWS}}
CACHES = "/root/.cache/flashinfer /root/.cache/deep_gemm /root/.triton /tmp/torchinductor_root"
for _flow in WARM_FLOWS:
    BEFORE[_flow] = f"rm -rf {CACHES}"  # the host's own caches gone, as on a fresh host
KCACHE_LEFT = ("find /root/.cache /root/.triton /tmp /var/lib/fleet -maxdepth 6 -name '*.fleet-kcache-*' "
               "2>/dev/null; true")


def _flow_env(c, flow: str) -> dict[str, str]:
    """What a run of the flow needs on the controller (after the host's reset): the warm flow's state."""
    if flow == WARM_UNPROVEN:
        env = _warm_state(c)
        _leave_unproven(c)
        return env
    return _warm_state(c, whole=flow == WARM_SERVES) if flow in WARM_FLOWS else {}


def _leave_unproven(c) -> None:
    """The broken entry's caches on the host, named by the mark as a place names what it fills (a run that died
    after its place), and the store emptied of them: the next warm start of the key finds no entry."""
    entry = c["tmp"] / "warm-state" / "kcache" / c["warm_entry"].name
    folders = json.loads((entry / "key.json").read_text())["folders"]
    data = (entry / "cache.tar").read_bytes()
    shutil.rmtree(entry)
    marked = " ".join(shlex.quote(f) for f in folders)
    _sh(c, "true")  # the harness's connection opened
    host = c["inventory"].hosts[c.get("host", HOST)]
    done = run_bytes(c["conn"], host, f"tar -x -C / && mkdir -p /var/lib/fleet && printf '%s\\n' {marked} "
                     f">> {kcache.PLACED} && echo planted", data, timeout=120, max_output=1 << 16)
    assert done.stdout.strip() == b"planted", done


def _warm_state(c, whole: bool = False) -> dict[str, str]:
    """The lane's controller state for the warm flows, made again for each run (what one run's faults taught never
    steers the next), its store holding the host's entry with the broken module (`whole`: as collected)."""
    state = c["tmp"] / "warm-state"
    env = {"FLEET_STATE_DIR": str(state)}
    if "warm_entry" not in c:
        (c["tmp"] / "w").mkdir(exist_ok=True)
        c["w"] = llama_playbook(c["tmp"] / "w", [{"name": "plain-b", "env": {**NO_P2P["env"], "X": "b2"},
                                                  "flags": dict(NO_P2P["flags"])}], name="fault-b", keep_releases=10,
                                serve={"warm_start": True})
        shutil.rmtree(state, ignore_errors=True)
        proc = _inv(c, *RUNS[WARM](c), env=env)  # cold: the host's caches collected into the store
        assert proc.returncode == 0, proc.stderr[-2000:]
        [entry] = [p for p in (state / "kcache").iterdir() if p.is_dir()]
        c["warm_whole"] = c["tmp"] / "warm-whole" / entry.name
        shutil.copytree(entry, c["warm_whole"])
        break_module(entry)
        c["warm_entry"] = c["tmp"] / "warm-entry" / entry.name
        shutil.copytree(entry, c["warm_entry"])
        _reset(c, WARM)
    shutil.rmtree(state, ignore_errors=True)
    given = c["warm_whole" if whole else "warm_entry"]
    shutil.copytree(given, state / "kcache" / given.name)
    return env


def _warm_broken(c) -> list[str]:
    """The warm flow's own invariant: nothing a place built, set aside or spooled left beside the cache folders,
    and the store holds only whole tars of them."""
    bad = [f"left beside the cache folders: {p}" for p in _sh(c, KCACHE_LEFT).split()]
    store = CacheStore(c["tmp"] / "warm-state" / "kcache")
    for e in store.entries():
        got = store.get(e.key) if e.key else None
        if not isinstance(got, Entry) or not_whole(got.data, ["/root", "/tmp"]):
            bad.append(f"the store holds {e.digest[:12]}, no whole tar of the caches")
    return bad


def _next(c, flow: str):
    """The next run an operator makes after a cut one: recover again (the GPU may still want its reset), else a
    deploy of the release that served."""
    host = c.get("host", HOST)
    if flow == "recover":
        return _inv(c, "recover", "--host", host, "--json")
    return _inv(c, "deploy", "--host", host, "--playbook", str(c["b"]), "--json")


def _points(c, flow: str) -> list[tuple[int, str]]:
    """The flow's fault points: its remote steps in a clean traced run (then the state is put back)."""
    if f"points_{flow}" not in c:
        _reset(c, flow)
        env = _flow_env(c, flow)
        trace = c["tmp"] / f"trace-{flow}"
        proc = _inv(c, *RUNS[flow](c), env={**env, "FLEET_FAULT_TRACE": str(trace)})
        assert proc.returncode == 0, proc.stderr[-2000:]
        c[f"points_{flow}"] = [(int(n), label) for n, _, label in
                               (line.split("\t", 2) for line in trace.read_text().splitlines())]
    return c[f"points_{flow}"]


def _allowed(c, flow: str) -> set[str] | None:
    # deploy: B (current before) or the new release of B; rollback: B or A; patch: B or its patch release;
    # bench and recover: B, whatever happens to its record.
    if flow == "rollback":
        return {c["release_b"], c["release_a"]}
    return {c["release_b"]} if flow in ("bench", "recover") else None


PER_POINT = 1  # kinds each point gets with FLEET_FAULT_POINTS=rotate (rotating over the points)


def kinds_of(index: int, per_point: int = PER_POINT) -> tuple[str, ...]:
    """The kinds a quick run (FLEET_FAULT_POINTS=rotate) injects at a flow's index-th point: `per_point` of them,
    the first rotating with the index, so neighbouring steps get different kinds and every point gets at least
    one. Pure."""
    return tuple(KINDS[(index + k * len(KINDS) // per_point) % len(KINDS)] for k in range(per_point))


def _selected(points: list[tuple[int, str]], kind: str) -> list[tuple[int, str]]:
    """The points this kind runs at. By default (or FLEET_FAULT_POINTS=all) every point: the suite runs every
    point with every kind. FLEET_FAULT_POINTS=rotate, a developer's quick run: every point with PER_POINT
    kind(s) (kinds_of); a list such as 3-9 or 20,35,47: every kind at those points."""
    spec = os.environ.get("FLEET_FAULT_POINTS", "all")
    if spec == "all":
        return points
    if spec == "rotate":
        return [p for i, p in enumerate(points) if kind in kinds_of(i)]
    wanted: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.partition("-")
        wanted.update(range(int(low), int(high or low) + 1))
    return [p for p in points if p[0] in wanted]


def _host_cpu(c) -> float:
    """CPU seconds the lane's host has used (its sshd, shells, systemd, server), from its cgroup; 0 without one."""
    try:
        text = Path(c["cpu_stat"]).read_text() if c.get("cpu_stat") else ""
    except OSError:
        return 0.0
    return next((int(line.split()[1]) / 1e6 for line in text.splitlines() if line.startswith("usage_usec")), 0.0)


def _run_point(c, flow: str, n: int, label: str, kind: str) -> list[str]:
    """The flow with `kind` injected at point n, from the snapshot; what of the invariant broke (empty: none)."""
    t0, cpu0, host0 = time.monotonic(), c["fork"].cpu, _host_cpu(c)
    _reset(c, flow)
    env = _flow_env(c, flow)
    t1 = time.monotonic()
    proc = _inv(c, *RUNS[flow](c), env={**env, "FLEET_FAULT_AT": f"{n}:{kind}", "FLEET_FAULT_FILL": FILL})
    t2 = time.monotonic()
    c["last"] = proc
    if kind == "kill" and proc.returncode != -9:
        return [f"the run was not killed at its point (exit {proc.returncode})"]
    bad, c["leftovers"] = [], []
    if kind in ("fail", "full", "late"):  # the run ended by itself: the invariant holds now, disks still full
        bad = [f"right after the run: {b}" for b in _broken(c, _allowed(c, flow), after_next=False)]
        if bad:  # what fleet said, for the failure's report
            said = " ".join((proc.stdout + " " + proc.stderr).split())
            bad.append(f"the run said: {said[-1200:]}")
    _sh(c, UNFILL)
    t3 = time.monotonic()
    if kind in ("kill", "drop") or bad or c["leftovers"]:  # the invariant relies on the next run's recovery
        nxt = c["next"] = _next(c, flow)
        if nxt.returncode != 0:
            bad.append(f"the next deploy failed (exit {nxt.returncode}): {nxt.stdout[-300:]} {nxt.stderr[-300:]}")
        bad += [f"after the next deploy: {b}" for b in _broken(c, None, after_next=True)]
    if flow in WARM_FLOWS:
        bad += _warm_broken(c)
    RESULTS.append((flow, kind, n, label, "; ".join(bad)))
    if os.environ.get("FLEET_FAULT_LOG"):  # a long run's progress, point by point, with where its time went
        with open(os.environ["FLEET_FAULT_LOG"], "a") as f:
            f.write(f"{c.get('host', HOST)} {flow} {kind} {n} {label[:70]} :: {'; '.join(bad) or 'ok'} :: reset "
                    f"{t1 - t0:.1f} run {t2 - t1:.1f} check {t3 - t2:.1f} next {time.monotonic() - t3:.1f} "
                    f"inv-cpu {c['fork'].cpu - cpu0:.1f} host-cpu {_host_cpu(c) - host0:.1f}\n")
    return bad


@pytest.mark.timeout(1800)  # deploy's 59 points of one kind over 3 lanes: about 4 min at load 10
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("flow", list(FLOWS))
def test_every_fault_point_keeps_the_invariant(flow, kind, lanes):
    failures = _spread(lanes, flow, kind)
    assert not failures, "\n".join(f"{flow} {kind} point {n} ({label}): {b}" for n, label, b in failures)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("kind", KINDS)
def test_every_warm_start_step_keeps_the_invariant(kind, lanes):
    """Each remote step of the warm start (place, clear, collect; and modules, in the flow whose start serves with
    the placed caches) with each kind: the host serves what it served or the new release (or starts cold), no lock
    or release in progress is left, nothing half-placed stays beside the cache folders, and the store keeps only
    whole caches (_warm_broken). 3 points x 5 kinds: 15 runs, 84 s on one instance with 3 lanes (2026-12-05, load
    6-16 on 2 cores; 20 s of it each lane's traced run and entry); the modules point: 5 runs more, on the last
    lane while the others run the warm flow's."""
    # the modules point on a lane of its own (the last), beside the warm flow's points on the others
    warm, serves = (lanes[:-1], lanes[-1:]) if len(lanes) > 1 else (lanes, lanes)
    with ThreadPoolExecutor(2 if len(lanes) > 1 else 1) as pool:
        placing = pool.submit(_spread, warm, WARM, kind, ("host.kcache.",))
        reading = pool.submit(_spread, serves, WARM_SERVES, kind, ("host.kcache.", " modules"))
        failures = [(WARM, *f) for f in placing.result()] + [(WARM_SERVES, *f) for f in reading.result()]
    assert not failures, "\n".join(f"{flow} {kind} point {n} ({label}): {b}" for flow, n, label, b in failures)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("kind", KINDS)
def test_the_warm_starts_unproven_step_keeps_the_invariant(kind, lanes):
    """The warm start's cold path (no entry for the key) with caches a dead run placed and no start proved, poison to
    the start (the broken prefill module): its unproven step and its collect with each kind; the host serves (a start
    that dies on what was left is retried cold), nothing is left beside the cache folders, the store keeps only
    whole caches. The flow's points are checked to hold the unproven step."""
    points = _points(lanes[0], WARM_UNPROVEN)
    unproven = [(n, label) for n, label in points if "python --mark=" in label and label.endswith(" unproven")]
    assert unproven, points
    failures = _spread(lanes, WARM_UNPROVEN, kind, ("host.kcache.",))
    assert not failures, "\n".join(f"{WARM_UNPROVEN} {kind} point {n} ({label}): {b}" for n, label, b in failures)
    if kind == "fail":  # what was left is poison indeed: kept by the failed step, it kills a start, retried cold
        assert not _run_point(lanes[0], WARM_UNPROVEN, *unproven[0], kind)
        said = lanes[0]["last"].stdout + lanes[0]["last"].stderr
        assert "may be in place" in said and "starting again without them" in said, said[-2000:]


def _steps(points: list[tuple[int, str]]) -> list[str]:
    """Who asked for each step (`module.function`), what a flow's points must share on every lane."""
    return [label.split(":", 1)[0] for _, label in points]


def _spread(lanes: list[dict], flow: str, kind: str, only: tuple[str, ...] = ()) -> list[tuple[int, str, str]]:
    """The flow with `kind` at each selected point (`only`: those whose label holds each), the points spread over the
    lanes (each takes the next point when its run is done); what broke, by the first lane's point. A lane whose
    traced flow has other steps than the first lane's (another host, another path) runs none of it: the first
    lane's points are the flow's."""
    with ThreadPoolExecutor(len(lanes)) as pool:
        traced = list(pool.map(lambda c: _points(c, flow), lanes))
    usable = [(c, pts) for c, pts in zip(lanes, traced, strict=True) if _steps(pts) == _steps(traced[0])]
    where = {p: i for i, p in enumerate(traced[0])}
    matching = [p for p in traced[0] if all(o in p[1] for o in only)]
    assert matching, f"{flow}: no point's label holds each of {only}: {[label for _, label in traced[0]]}"
    todo = [where[p] for p in _selected(traced[0], kind) if p in matching]
    failures: list[tuple[int, str, str]] = []
    lock = threading.Lock()

    def work(c: dict, pts: list[tuple[int, str]]) -> None:
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            n, label = pts[i]
            broke = _run_point(c, flow, n, label, kind)
            with lock:
                failures.extend((traced[0][i][0], traced[0][i][1], f"[{c.get('host', HOST)}] {b}") for b in broke)

    with ThreadPoolExecutor(len(usable)) as pool:
        for f in [pool.submit(work, c, pts) for c, pts in usable]:
            f.result()
    return sorted(failures)


def _after(points: list[tuple[int, str]], text: str) -> tuple[int, str]:
    """The point right after the flow's first step whose label contains `text`."""
    i = next(i for i, (_, label) in enumerate(points) if text in label)
    return points[i + 1]


@pytest.mark.parametrize("flow", ["rollback", "deploy"])
def test_a_disk_that_fills_between_the_unit_and_env_writes_leaves_the_release_that_served_serving(flow, ctx):
    """Found by this harness: writing the unit went through, then the disk was full, so writing the env failed and
    putting the old unit back (a write too) failed as well: the unit stayed stopped. Now the old unit is kept as a
    hardlink beside it and put back by rename, which needs no free space."""
    n, label = _after(_points(ctx, flow), "fleet-write /etc/systemd/system/sglang.service")
    assert not _run_point(ctx, flow, n, label, "full")
    st = _state(ctx)
    assert st["current"] == ctx["release_b"] and st["serving"] == "yes"  # B served before: B serves now
    said = ctx["last"].stdout + ctx["last"].stderr
    assert "No space left on device" in said or "no space left on device" in said, said[-1500:]


def test_a_rollback_whose_move_of_current_fails_puts_back_what_served(ctx):
    """Found by this harness (rollback, fail, at `current`'s swap): the target served but `current` still named B,
    and the run ended with the host on A's files under B's name. Now B goes back, as when the target fails."""
    (n, label), = [p for p in _points(ctx, "rollback") if "host.releases.mark_current" in p[1]][:1]
    assert not _run_point(ctx, "rollback", n, label, "fail")
    assert _state(ctx)["current"] == ctx["release_b"]
    assert "making it current failed" in ctx["last"].stdout, ctx["last"].stdout[-1500:]


def test_a_deploy_killed_between_its_commit_and_current_is_made_current_by_the_next_run(ctx):
    """The deploy flow deploys other bytes than B's, so a run killed after its release served and was saved
    `committing`, before `current` moved, leaves the host running the new files with `current` naming B. The next
    run's recovery sees the host runs them and makes that release current (rather than putting B back)."""
    points = _points(ctx, "deploy")
    (n, label), = [p for p in points if "host.releases.mark_current" in p[1]][-1:]
    _reset(ctx)
    proc = _inv(ctx, *FLOWS["deploy"](ctx), env={"FLEET_FAULT_AT": f"{n}:kill"})
    assert proc.returncode == -9
    st = _state(ctx)
    (killed,) = [rid for rid, r in st["releases"].items() if r.get("committing")]
    assert st["current"] == ctx["release_b"] and killed != ctx["release_b"]  # new files, old `current`
    nxt = _inv(ctx, "deploy", "--host", HOST, "--playbook", str(ctx["b2"]), "--json")
    assert nxt.returncode == 0, nxt.stderr[-2000:]
    data = json.loads(nxt.stdout)
    assert f"release {killed} served but its run died before making it current: made current" in data["recovered"]
    assert data["status"] == "unchanged" and data["release"] == killed
    assert not _broken(ctx, {killed}, after_next=True)


def test_the_suite_runs_every_point_with_every_kind_by_default(monkeypatch):
    monkeypatch.delenv("FLEET_FAULT_POINTS", raising=False)
    points = [(i + 1, f"step {i}") for i in range(53)]
    assert all(_selected(points, kind) == points for kind in KINDS)
    monkeypatch.setenv("FLEET_FAULT_POINTS", "3-5,9")
    assert all([n for n, _ in _selected(points, kind)] == [3, 4, 5, 9] for kind in KINDS)


def test_a_quick_rotating_run_gives_every_point_a_kind_and_neighbouring_points_different_ones(monkeypatch):
    monkeypatch.setenv("FLEET_FAULT_POINTS", "rotate")
    points = [(i + 1, f"step {i}") for i in range(53)]
    chosen = {kind: {n for n, _ in _selected(points, kind)} for kind in KINDS}
    assert set().union(*chosen.values()) == {n for n, _ in points}  # every point, at least one kind
    assert all(kinds_of(i) != kinds_of(i + 1) for i in range(52))
    assert max(map(len, chosen.values())) - min(map(len, chosen.values())) <= 1  # kinds spread evenly
    assert all(len(set(kinds_of(i, 2))) == 2 for i in range(8))  # two kinds a point, when the budget allows


def test_a_patch_closes_what_a_dead_patch_run_left_before_patching(ctx, tmp_path):
    """`inv patch` took the lock and patched without recovery: a patch run killed half-way stayed `applying`, and
    the next deploy's recovery would have undone it over what the later patch had written. Now a patch first
    closes it, with the playbook the current release names (refusing, nothing changed, when that is not in
    playbooks/)."""
    _reset(ctx)
    killed = _inv(ctx, *FLOWS["patch"](ctx), env={"FLEET_FAULT_KILL_AT": "mid-patch"})
    assert killed.returncode == -9
    assert [r.get("status") for r in _state(ctx)["runs"]].count("applying") == 1
    refused = _inv(ctx, *FLOWS["patch"](ctx))  # fault-b is no shipped playbook
    assert refused.returncode == 1, refused.stdout[-1500:]
    error = json.loads(refused.stdout)["hosts"][0]["error"]
    assert "needs the playbook of release" in error and "nothing was changed" in error, error
    assert [r.get("status") for r in _state(ctx)["runs"]].count("applying") == 1  # untouched
    site = tmp_path / "site"
    (site / "playbooks").mkdir(parents=True)
    (site / "playbooks/fault-b.yaml").write_text(Path(ctx["b"]).read_text())
    done = _inv(ctx, *FLOWS["patch"](ctx), env={"FLEET_SITE": str(site)})
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
    result = json.loads(done.stdout)["hosts"][0]
    assert any("reverted" in note or "undone" in note or "put back" in note for note in result["recovered"]), result
    assert result["release"] and not _broken(ctx, None, after_next=True)
