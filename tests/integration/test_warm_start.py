"""Warm starts on sandbox hosts (issue 49): the first deploy of a key builds flashinfer's attention modules (the
seed profile's modelled 240 s) and fleet collects the caches into the controller's store; a host of the same key
without caches of its own (its caches removed: a fresh host of the kind) gets them placed and reaches READY in at
most 30% of the first start's modelled time. A host of another GPU gets none, nor a rung with a patch set; a
truncated store entry is refused and the host starts cold; a cache that kills the start is removed and the server
started once more without it. A warm start says what it expects of its phases, and names the phase where a cache
that the release rebuilt did not take (the giver's cold phases are kept with its entry)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import yaml
from fleetcli import break_module, inv_at, llama_playbook, sh

from fleet import inventory as fleet_inventory
from fleet.deploy.cachekey import CacheKey
from fleet.deploy.cachestore import CacheStore, Entry, Refused
from fleet.host import kcache
from fleet.ssh.connect import open_connection
from fleet.ssh.remote import run_bytes

HOST, OTHER_GPU = "sbx0", "sbx2"  # 8x RTX PRO 6000 (SM 120, 240 s modelled JIT); 2x RTX 5090 (SM 120 too)
SCALE = 0.05
LADDER = [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}}]
OPS = "/root/.cache/flashinfer/0.6.3/120a/cached_ops"
READY_LINE = "The server is fired up"
SOURCE = "/root/ml-env/lib/python3.11/site-packages/flashinfer/data/csrc/batch_attention.cu"  # the modules' source


def _inventory(sandbox, tmp_path: Path) -> Path:
    doc = yaml.safe_load(Path(sandbox.cfg.inventory_path).read_text())
    doc["hosts"] = {n: doc["hosts"][n] for n in (HOST, OTHER_GPU)}
    for name in doc["hosts"]:
        doc["hosts"][name].setdefault("vars", {}).setdefault("env", {})["SGLANG_SIM_TIME_SCALE"] = str(SCALE)
    path = tmp_path / "inventory" / "hosts.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _modelled_start(inv, host: str, since: float) -> float:
    """Modelled seconds from the server's first line to READY in its last start (journal times / the scale)."""
    out = sh(inv, host, f"journalctl -q --no-pager -o short-unix _SYSTEMD_UNIT=sglang.service --since @{since:.0f}")
    lines = [(float(line.split(" ", 1)[0]), line) for line in out.splitlines() if line[:1].isdigit()]
    ready = max(i for i, (_, text) in enumerate(lines) if READY_LINE in text)
    first = max((i for i in range(ready) if "Attention backend" in lines[i][1]), default=0)
    return (lines[ready][0] - lines[first][0]) / SCALE


def test_a_second_host_of_a_key_starts_warm_and_nothing_foreign_or_broken_is_placed(sandbox, tmp_path):
    path = _inventory(sandbox, tmp_path)
    inv = fleet_inventory.load(path)
    state = tmp_path / "state"
    store = state / "kcache"
    book = llama_playbook(tmp_path, LADDER, name="llama-warm", serve={"warm_start": True})

    def deploy(host: str, playbook: Path = book) -> tuple[dict, str, float]:
        since = time.time() - 1
        proc = inv_at(path, "deploy", "--host", host, "--playbook", str(playbook), "--force", "--json",
                      env={"FLEET_STATE_DIR": str(state)})
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout), proc.stderr, since

    def fresh(host: str) -> None:  # the host's own caches gone, as on a new host of its kind
        sh(inv, host, "rm -rf /root/.cache/flashinfer /root/.triton /tmp/torchinductor_root")

    fresh(HOST)
    first, said, since = deploy(HOST)
    assert "cold start: no caches stored for key" in said and "caches collected for key" in said, said[-2000:]
    assert "warm start:" not in said, said[-2000:]  # a cold start expects nothing of its phases
    cold = _modelled_start(inv, HOST, since)
    assert cold > 240, cold  # the attention modules' build is in it
    [entry] = [p for p in store.iterdir() if p.is_dir() and not p.name.startswith(".")]
    phases = dict(json.loads((entry / "meta.json").read_text())["phases"])  # the giver's cold phases, kept
    assert phases["graph_capture"] > 240 * SCALE, phases  # 0.6.3 builds its attention modules in the capture
    needs = json.loads((store / "needs.json").read_text())["hosts"][HOST]
    assert needs[first["release"]] == entry.name  # kept while a release kept on a host started under its key

    fresh(HOST)
    _, said, since = deploy(HOST)
    assert f"warm start: caches of {HOST} placed" in said, said[-2000:]
    assert "placed modules were used as placed (no JIT build)" in said, said[-2000:]
    assert f"jit_compile, autotune, graph_capture expected short or skipped (caches of {HOST} placed)" in said
    assert "warm start: graph_capture took " in said and "did not take" not in said, said[-2000:]
    warm = _modelled_start(inv, HOST, since)
    assert warm <= 0.3 * cold, (warm, cold)
    assert "batch_prefill" in sh(inv, HOST, f"ls {OPS}")

    # another GPU (SM 120 too): another key, nothing placed, its own entry
    _, said, _ = deploy(OTHER_GPU)
    assert "warm start" not in said and "cold start: no caches stored for key" in said, said[-2000:]
    assert len([p for p in store.iterdir() if p.is_dir() and not p.name.startswith(".")]) == 2

    # a truncated entry: refused by its checksum, dropped, the host starts cold (and gives a new entry)
    tar = entry / "cache.tar"
    whole = tar.read_bytes()
    tar.write_bytes(whole[: len(whole) // 2])
    fresh(HOST)
    _, said, since = deploy(HOST)
    assert "cold start: the stored caches were dropped: its tar's sha256" in said, said[-2000:]
    assert _modelled_start(inv, HOST, since) > 240
    assert "caches collected for key" in said

    # a whole entry whose module is broken (the giver's own cache was): placed, the start dies, retried cold
    break_module(entry)
    fresh(HOST)
    data, said, _ = deploy(HOST)
    assert f"warm start: caches of {HOST} placed" in said, said[-2000:]
    assert "the start failed with placed caches: starting again without them" in said, said[-2000:]
    assert [a["outcome"] for a in data["attempts"]] == ["READY"]
    assert "replaced by this host's" in said
    # the seed's patch set applied: another key (never a kernel built from other sources), nothing placed
    patched = llama_playbook(tmp_path, [{**LADDER[0], "name": "patched", "patches": ["sm120-allreduce-fusion"]}],
                             name="llama-warm-patched", serve={"warm_start": True})
    _, said, _ = deploy(HOST, patched)
    assert "warm start" not in said and "cold start: no caches stored for key" in said, said[-2000:]
    assert len([p for p in store.iterdir() if p.is_dir() and not p.name.startswith(".")]) == 3

    # patches reverted: the replaced entry serves. A source the key does not hold was changed behind fleet's back:
    # the release rebuilds the placed modules, and the watch names the phase the cache did not take in
    sh(inv, HOST, f"cp -p {SOURCE} {SOURCE}.keep && echo '// changed' >> {SOURCE}")
    try:
        _, said, _ = deploy(HOST)
    finally:
        sh(inv, HOST, f"mv -f {SOURCE}.keep {SOURCE}")
    assert f"warm start: caches of {HOST} placed" in said and "starting again" not in said, said[-2000:]
    assert "warm start: the cache did not take in graph_capture" in said, said[-2000:]
    assert "placed modules were rebuilt by the release" in said


def _one_file_tar(folder: str) -> bytes:
    """A store entry of one two-byte file, m.so, in `folder`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(folder.lstrip("/") + "/m.so")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"so"))
    return buf.getvalue()


def test_a_units_user_has_its_caches_worked_on_as_itself(sandbox, tmp_path):
    """serve.user other than root (the image's `fleet`): fleet's root session runs kcache.py, which drops to that
    user before it touches its folders (its uid, gid and groups on this Debian); what it places is that user's,
    the mark stays root's, a put-back removes what the mark names as that user, and a host without the user
    refuses, nothing changed."""
    inv = fleet_inventory.load(_inventory(sandbox, tmp_path))
    host, py, folder = inv.hosts[HOST], "/root/ml-env", "/home/fleet/.cache/drop49/ops"
    sh(inv, HOST, "rm -rf /home/fleet/.cache/drop49 && runuser -u fleet -- mkdir -p /home/fleet/.cache && "
                  "mkdir -p /var/lib/fleet")  # as a deploy's lock makes it
    data = _one_file_tar(folder)
    conn = open_connection(host)
    try:
        placed = kcache.place(conn, host, py, data, hashlib.sha256(data).hexdigest(), [folder], "fleet")
        owners = sh(inv, HOST, f"stat -c %U:%G {folder}/.. {folder} {folder}/m.so {kcache.PLACED}").split()
        collected = kcache.collect(conn, host, py, [folder], 1 << 20, "fleet")
        sh(inv, HOST, kcache.drop_unproven(user="fleet"))  # a put-back's removal, as the user (runuser)
        dropped = sh(inv, HOST, f"test -e {folder} || echo gone; test -e {kcache.PLACED} || echo unmarked").split()
        cleared = kcache.clear(conn, host, py, [folder], "fleet")
        none = kcache.clear(conn, host, py, [folder], "nosuchuser")
    finally:
        conn.close()
        sh(inv, HOST, "rm -rf /home/fleet/.cache/drop49")
    assert placed == [folder] and owners == ["fleet:fleet"] * 3 + ["root:root"], (placed, owners)
    assert isinstance(collected, bytes) and b"m.so" in collected and cleared is None
    assert dropped == ["gone", "unmarked"], dropped
    assert none == "no user 'nosuchuser' on this host"


def test_a_venv_the_units_user_owns_never_runs_as_root(sandbox, tmp_path):
    """serve.venv may be the server's user's own (a venv in its home): kcache.py runs as root until it drops to that
    user, so it must not start as that user's interpreter, nor run that venv's site hooks (a .pth line) as root: the
    user would be root. Each verb, with the venv's python given, runs no hook as root, and still does its work."""
    inv = fleet_inventory.load(_inventory(sandbox, tmp_path))
    host, venv, folder = inv.hosts[HOST], "/home/fleet/venv49", "/home/fleet/.cache/venv49/ops"
    seen = "/home/fleet/venv49-hook"  # each uid the venv's site hook ran as, one a line
    sh(inv, HOST, f"rm -rf {venv} {seen} /home/fleet/.cache/venv49 && runuser -u fleet -- python3 -m venv "
                  f"--without-pip {venv} && runuser -u fleet -- sh -c \"echo 'import os; open(\\\"{seen}\\\", "
                  f"\\\"a\\\").write(str(os.geteuid()) + chr(10))' > $(echo {venv}/lib/python3*/site-packages)"
                  "/hook49.pth\" && runuser -u fleet -- mkdir -p /home/fleet/.cache && mkdir -p /var/lib/fleet")
    data = _one_file_tar(folder)
    sh(inv, HOST, f"runuser -u fleet -- {venv}/bin/python -c pass")  # the hook works: it runs as the venv's owner
    conn = open_connection(host)
    try:
        placed = kcache.place(conn, host, venv, data, hashlib.sha256(data).hexdigest(), [folder], "fleet")
        mods = kcache.modules(conn, host, venv, [folder], "fleet")
        collected = kcache.collect(conn, host, venv, [folder], 1 << 20, "fleet")
        gone = kcache.unproven(conn, host, venv, "fleet")
        cleared = kcache.clear(conn, host, venv, [folder], "fleet")
        # a unit with no User= given this venv (preflight refuses such a deploy; a cache step never runs its code)
        root_side = kcache.collect(conn, host, venv, [f"/root/.cache/venv49-{os.getpid()}"], 1 << 20, "")
        uids = sh(inv, HOST, f"cat {seen}; stat -c %U /home/fleet/.cache/venv49 2>/dev/null; true").split()
    finally:
        conn.close()
        sh(inv, HOST, f"rm -rf {venv} {seen} /home/fleet/.cache/venv49")
    assert "0" not in uids, f"the user's venv hook ran as root: {uids}"
    assert isinstance(root_side, bytes) and tarfile.open(fileobj=io.BytesIO(root_side)).getnames() == [], root_side
    assert placed == [folder] and isinstance(collected, bytes) and b"m.so" in collected, (placed, collected)
    assert mods == {f"{folder}/m.so": hashlib.sha256(b"so").hexdigest()} and gone == [] and cleared is None
    assert uids[-1:] == ["fleet"], uids


def test_the_store_never_fills_the_controllers_disk(tmp_path):
    """The store's bound (32 GiB) is no promise about the disk it is on: entries of new keys (each host kind, patch
    set, flag set; or a host that reports new facts each time) are stored while they fit under it, and the
    controller's state (its runs, releases, locks) shares that disk. On a 64 MiB filesystem, 15 MiB entries of
    distinct keys: the store stops before the disk is nearly full, refusing (never raising), and what it keeps
    reads back. Run as root (a tmpfs of its own)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(disk)], check=True)
    try:
        store = CacheStore(disk / "kcache")
        keys = [CacheKey(sm="120", gpu="g", driver=f"580.{i}", cuda="13.0", packages=(), patches=(), flags=(),
                         env=(), venv="/v") for i in range(6)]
        got = [store.put(k, os.urandom(15 << 20), "sbx0") for k in keys]
        free = shutil.disk_usage(disk).free
        kept = [k for k in keys if isinstance(store.get(k), Entry)]
    finally:
        subprocess.run(["umount", str(disk)], check=True)
    assert free >= 16 << 20, f"{free >> 20} MiB left on the store's disk: {got}"
    assert isinstance(got[-1], Refused) and "disk" in got[-1].reason, got[-1]
    assert kept and all(isinstance(g, Entry) for g in got[:len(kept)]), got


def test_a_put_back_that_outwaits_a_place_never_loses_what_it_marks(sandbox, tmp_path):
    """A place still at work (its run's controller gone past its deadline) holds the mark's lock; a put-back's
    drop_unproven that waited its time for it goes on without it. What that place fills must stay named by the
    mark (a later put-back or warm start removes it): the put-back never removes the mark file the place writes
    through. Here the place waits on its stdin, lock held, while the put-back's removal runs (its wait cut to 2 s)."""
    inv = fleet_inventory.load(_inventory(sandbox, tmp_path))
    folder, mark = "/root/.cache/outwait49/ops", "/var/lib/fleet/outwait49-placed"
    data = _one_file_tar(folder)
    place = kcache.command("/root/ml-env", "", f"--mark={mark}", "place",
                           hashlib.sha256(data).hexdigest(), folder)
    sh(inv, HOST, f"rm -rf /root/.cache/outwait49 {mark} {mark}.lock /root/outwait49.tar && mkdir -p /var/lib/fleet")
    conn = open_connection(inv.hosts[HOST])
    try:
        run_bytes(conn, inv.hosts[HOST], "cat > /root/outwait49.tar", data, timeout=30, max_output=1 << 10)
    finally:
        conn.close()
    try:  # the place: lock taken at once, its tar sent 6 s later
        sh(inv, HOST, "(sleep 6; cat /root/outwait49.tar) 2>/dev/null </dev/null | "
                      f"setsid {place} > /root/outwait49.out 2>&1 & "
                      f"i=0; while flock -n {mark}.lock true 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; "
                      "i=$((i+1)); done")
        sh(inv, HOST, kcache.drop_unproven(mark, wait_s=2))
        after = sh(inv, HOST, f"flock -w 30 {mark}.lock true; cat /root/outwait49.out; ls {folder}; "
                              f"echo mark:; cat {mark} 2>/dev/null; true")
    finally:
        sh(inv, HOST, f"rm -rf /root/.cache/outwait49 {mark} {mark}.lock /root/outwait49.tar /root/outwait49.out")
    assert f"{folder}\nm.so\n" in after, after  # placed
    assert after.split("mark:\n", 1)[1].split() == [folder], after  # and still named by the mark


def test_the_warm_starts_home_is_the_accounts_own(sandbox, tmp_path):
    """The home the warm start places a non-root server's caches under is the one systemd gives the unit (User=
    sets HOME from the passwd entry), as the host's getent says: a service account's (useradd -r -d
    /var/lib/NAME) is not /home/NAME. Before (h-adv15, stop 54): warmstart.home_of guessed /home/NAME, so such a
    server's caches were never placed where it looks, nor collected from where it wrote them."""
    inv = fleet_inventory.load(_inventory(sandbox, tmp_path))
    sh(inv, HOST, "id fxsvc >/dev/null 2>&1 || useradd -r -d /var/lib/fxsvc -s /usr/sbin/nologin fxsvc")
    conn = open_connection(inv.hosts[HOST])
    try:
        got = {u: kcache.home(conn, inv.hosts[HOST], u) for u in ("fxsvc", "fleet", "root", "nosuchuser")}
    finally:
        conn.close()
        sh(inv, HOST, "userdel fxsvc 2>/dev/null; true")
    assert got == {"fxsvc": "/var/lib/fxsvc", "fleet": "/home/fleet", "root": "/root", "nosuchuser": None}, got
