"""Second adversarial review of issue 49's warm start (branch h-rev49b), after the fixes of the first (h-fix49):
each test reproduces one failure found; each was first committed as xfail(strict=True) and failed on the code
before its fix. The host side runs the real fleet/host/programs/kcache.py on local folders through the first
review's runner (test_warm_start_review._Here: fleet.ssh.remote's Runner hook, the command run here)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fakesession import HOST
from test_warm_start_review import _conn, _Here, _key, _ops, _program, _tar

from fleet.deploy import warmstart
from fleet.deploy.cachekey import CacheKey, NoKey
from fleet.deploy.cachestore import CacheStore, Entry
from fleet.deploy.warmstart import WarmStart
from fleet.host import kcache, programs
from fleet.host.facts import Gpu, HostFacts, Package
from fleet.ssh.remote import BytesResult, CommandTimedOut


def _dir_and_file(name: str) -> bytes:
    """A tar whose one name is a folder member, then a file member."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        info = tarfile.TarInfo(name)
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))
    return buf.getvalue()


# r1 -------------------------------------------------------------------------------------------------------------
# rev49b #1: a hostile host's tar naming one path twice, as a folder and as a file, passes the controller's
# not_whole and place's member checks; every host's place then fails writing it (exit 5, 'not placed here', not
# 'the tar is bad'), so the entry is never dropped nor replaced: the key starts cold on every host until pruned
# (was xfail strict; fixed: not_whole and place's _not_plain refuse a path named twice or inside a file)
def test_a_tar_naming_one_path_twice_is_never_the_keys_entry_for_good(tmp_path: Path) -> None:
    store, said = CacheStore(tmp_path / "store"), list[str]()
    ops = _ops(tmp_path / "h1")
    evil = _dir_and_file(str(ops / "m" / "x").lstrip("/"))
    hostile = WarmStart(store, _key(), [str(ops)], sys.prefix)
    hostile.after_serving(_conn(_Here(collect=evil)), replace(HOST, name="h0"), said.append)
    for _ in range(2):  # an honest host of the key starts, serves, starts again
        honest = WarmStart(store, _key(), [str(ops)], sys.prefix)
        honest.before_start(_conn(_Here()), HOST, said.append)
        honest.after_serving(_conn(_Here()), HOST, said.append)
    got = store.get(_key())
    assert not isinstance(got, Entry) or got.host == HOST.name, said


def test_place_refuses_a_path_named_twice_as_a_bad_tar(tmp_path: Path) -> None:
    """rev49b #1, the host's side (an entry stored before the fix): exit 4, so the controller drops it (was 5)."""
    ops = _ops(tmp_path)
    evil = _dir_and_file(str(ops / "m" / "x").lstrip("/"))
    done = _program("place", hashlib.sha256(evil).hexdigest(), str(ops), data=evil)
    assert (done.returncode, (ops / "m" / "m.so").exists()) == (4, True), done.stderr


# r2 -------------------------------------------------------------------------------------------------------------
# rev49b #2: the key does not hold the cache folders, yet a tar names them (absolute): two hosts of one key whose
# folders differ (another serve.user, so another home; SGLANG_CACHE_DIR or FLASHINFER_WORKSPACE_BASE set on one)
# each refuse the other's tar as bad and drop it: the entry flips between them and no start is ever warm (was
# xfail strict; fixed: the key holds the cache folders)
def _facts() -> HostFacts:
    return HostFacts(host="h", address="a", gpus=[Gpu(index=0, name="NVIDIA RTX PRO 6000", sm=120)],
                     driver_version="580.95.05", torch_cuda="13.0",
                     packages={"sglang": Package(version="0.5.9"), "flashinfer-python": Package(version="0.6.3")})


def test_hosts_whose_cache_folders_differ_never_share_a_key(tmp_path: Path) -> None:
    store = CacheStore(tmp_path / "store")
    root = WarmStart.of(store, _facts(), [], ["--tp-size", "2"], {}, "/opt/ml-env", "root", "/root")
    llm = WarmStart.of(store, _facts(), [], ["--tp-size", "2"], {}, "/opt/ml-env", "llm", "/home/llm")
    moved = WarmStart.of(store, _facts(), [], ["--tp-size", "2"], {"FLASHINFER_WORKSPACE_BASE": "/data"},
                         "/opt/ml-env", "root", "/root")
    assert isinstance(root, WarmStart) and isinstance(llm, WarmStart) and isinstance(moved, WarmStart)
    assert root.folders != llm.folders and root.folders != moved.folders
    assert len({root.key.digest, llm.key.digest, moved.key.digest}) == 3
    assert CacheKey.from_json(json.loads(json.dumps(llm.key.to_json()))) == llm.key  # as the store reads it back


def test_two_hosts_of_one_key_never_drop_each_others_entry(tmp_path: Path) -> None:
    store, said = CacheStore(tmp_path / "store"), list[str]()
    a, b = _ops(tmp_path / "root"), _ops(tmp_path / "home" / "llm")
    first = WarmStart.of(store, _facts(), [], [], {"HOME": str(tmp_path / "root")}, "/opt/ml-env", "root", "/root")
    second = WarmStart.of(store, _facts(), [], [], {"HOME": str(tmp_path / "home" / "llm")}, "/opt/ml-env", "llm",
                          "/home/llm")
    assert isinstance(first, WarmStart) and isinstance(second, WarmStart)
    assert [a] == [Path(f) for f in first.folders if f.endswith("cached_ops")]
    assert [b] == [Path(f) for f in second.folders if f.endswith("cached_ops")]
    for ws in (first, second):
        ws.venv = sys.prefix
    first.after_serving(_conn(_Here()), replace(HOST, name="h0"), said.append)
    second.before_start(_conn(_Here()), HOST, said.append)
    assert not [s for s in said if "dropped" in s], said


class _Marked(_Here):
    """_Here with the host's mark (kcache.PLACED) in a folder of the test's own."""

    def __init__(self, mark: Path, collect: bytes | None = None) -> None:
        super().__init__(collect)
        self.mark = mark

    def run_bytes(self, conn: Any, host: Any, command: str, data: Any, timeout: float,
                  max_output: int) -> BytesResult:
        return super().run_bytes(conn, host, command.replace(kcache.PLACED, str(self.mark)), data, timeout,
                                 max_output)


# r3 -------------------------------------------------------------------------------------------------------------
# rev49b #3: a rung's warm start places its key's caches and starts, then fails its health check (check_used never
# runs: the mark still names the folders, unproven). The ladder's next rung has another key (other kernel flags
# or patch sets) and the store none of it: it says 'cold start' and starts on the first key's placed caches, and
# a start that fails with them is not retried without them (placed is empty); only a put-back of a release
# (drop_unproven) removes them. (A controller killed there is recovered by the next run's put-back: sandbox, dev4.)
# (was xfail strict; fixed: a start with nothing placed for it first removes what the mark names, kcache.py unproven)
def test_caches_a_failed_rung_placed_never_start_another_keys_rung_unknown(tmp_path: Path) -> None:
    store, said, mark = CacheStore(tmp_path / "store"), list[str](), tmp_path / "kcache-placed"
    ops = _ops(tmp_path / "h1")
    first = _tar({str(ops / "m" / "m.so").lstrip("/"): b"compiled under the first key"})
    store.put(_key(), first, "h0")
    warm = WarmStart(store, _key(), [str(ops)], sys.prefix)
    warm.before_start(_conn(_Marked(mark)), HOST, said.append)
    assert warm.placed and mark.exists(), said  # it starts, serves, fails its health check: no modules, no clear
    other = WarmStart(store, replace(_key(), flags=(("--tp-size", "4"),)), [str(ops)], sys.prefix)
    other.before_start(_conn(_Marked(mark)), HOST, said.append)
    so = ops / "m" / "m.so"
    placed_there = so.exists() and so.read_bytes() == b"compiled under the first key"
    assert not placed_there or other.placed, said


class _SlowPlace(_Marked):
    """A host slow to place: the controller's deadline passes once the tar is sent (CommandTimedOut) while place
    goes on (it ignores SIGHUP; its input is whole); it is held until the controller's next command has run for
    `held` seconds."""

    def __init__(self, mark: Path, held: float = 1.0) -> None:
        super().__init__(mark)
        self.held = held
        self.place: subprocess.Popen[bytes] | None = None

    def run_bytes(self, conn: Any, host: Any, command: str, data: Any, timeout: float,
                  max_output: int) -> BytesResult:
        command = command.replace(kcache.PLACED, str(self.mark))
        if "place" in shlex.split(command):  # the verb: a word of its own (the program's text is one word)
            self.place = subprocess.Popen(["sh", "-c", "exec " + command], stdin=subprocess.PIPE,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            assert self.place.stdin is not None
            self.place.stdin.write(data[:-1])  # all but its last byte: place cannot end before it is stopped
            self.place.stdin.flush()
            spool = Path(shlex.split(command)[-1]).parent / f"{kcache_aside()}in-{self.place.pid}"
            while not (spool.exists() and spool.stat().st_size >= len(data) - (1 << 16)) and self.place.poll() is None:
                time.sleep(0.0005)
            os.kill(self.place.pid, signal.SIGSTOP)  # on the host's disk but its last byte; slow from here
            self.place.stdin.write(data[-1:])
            self.place.stdin.close()
            raise CommandTimedOut(f"{host.name}: `{command[:60]}` did not finish within {timeout:g}s")
        if self.place is None:
            return super().run_bytes(conn, host, command, data, timeout, max_output)
        running = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        time.sleep(self.held)
        os.kill(self.place.pid, signal.SIGCONT)
        out, err = running.communicate(data, timeout=60)
        self.place.wait(60)
        return BytesResult(running.returncode, out, err)


def kcache_aside() -> str:
    from fleet.host.programs import kcache as program
    return program.ASIDE


# r4 -------------------------------------------------------------------------------------------------------------
# rev49b #4: a place whose answer is late (the controller's 300 s deadline, a slow disk: it fsyncs every file)
# goes on on the host; the controller clears the folders (a cold start, it says) while place still builds, then
# place swaps its folders in: the server starts on caches the controller counts as cleared, and a start that fails
# with them is not retried without them (was xfail strict; fixed: place, clear and unproven hold the mark's lock to
# their end, so the clear waits for the late place and removes what it placed)
def test_a_place_that_outlives_its_deadline_never_lands_after_the_clear(tmp_path: Path) -> None:
    store, said, mark = CacheStore(tmp_path / "store"), list[str](), tmp_path / "kcache-placed"
    ops = _ops(tmp_path / "h1")
    store.put(_key(), _tar({str(ops / "m" / "big.so").lstrip("/"): b"\x7fELF" + b"k" * (32 << 20)}), "h0")
    runner = _SlowPlace(mark)
    warm = WarmStart(store, _key(), [str(ops)], sys.prefix)
    warm.before_start(_conn(runner), HOST, said.append)
    assert runner.place is not None and runner.place.returncode is not None, said
    assert warm.placed or not (ops / "m" / "big.so").exists(), said


def test_a_put_back_waits_for_a_place_still_at_work(tmp_path: Path) -> None:
    """rev49b #4, a put-back's side (kcache.drop_unproven before its restart): the late place's lock is waited
    for, so what it marks is dropped, never left to start the put-back release."""
    import fcntl
    mark, ops = tmp_path / "kcache-placed", _ops(tmp_path)
    mark.write_text(f"{ops}\n")
    with open(f"{mark}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the place at work
        drop = subprocess.Popen(["sh", "-c", kcache.drop_unproven(str(mark))])
        time.sleep(0.5)
        waited = drop.poll() is None and ops.exists()
    drop.wait(30)
    assert (waited, ops.exists(), mark.exists(), drop.returncode) == (True, False, False, 0)


# r5 -------------------------------------------------------------------------------------------------------------
# rev49b #5: the store's folder is made 0700 by put only; needed_by (which comes first at every warm start) makes
# it with the umask (0755) and writes needs.json 0644: a store whose key never got an entry (every collect refused,
# every start failed) stays readable by every local user, and needs.json always is (was xfail strict; fixed: Needs
# makes the folder 0700 and writes 0600)
def test_the_store_is_private_from_its_first_write(tmp_path: Path) -> None:
    store = CacheStore(tmp_path / "kcache")
    WarmStart(store, _key(), ["/root/.cache/x"], sys.prefix).needed_by(HOST, "r1", print)
    modes = {p.name: p.stat().st_mode & 0o777 for p in store.root.iterdir() if not p.name.startswith(".")}
    assert (store.root.stat().st_mode & 0o777, modes) == (0o700, {"needs.json": 0o600})


# r6 -------------------------------------------------------------------------------------------------------------
# rev49b #6: the first review's #7 fix refuses a cache folder that is a home or the venv or holds one; a cache
# variable naming another shared folder still makes it a cache folder, swapped out whole by place and removed by
# clear: SGLANG_DG_CACHE_DIR=~/.cache (its own example) holds the Hugging Face models (~/.cache/huggingface), and
# placing a store entry deletes them, and the flashinfer cache folder nested inside it. The server can't start
# then, nor the release put back: the host serves nothing because of fleet (was xfail strict; fixed: no key, and the
# host refuses, for a folder one level deep, a shared cache root, one holding models or another cache folder)
def test_a_cache_folder_holding_the_models_is_never_placed_nor_cleared(tmp_path: Path) -> None:
    home = tmp_path / "root"
    model = home / ".cache" / "huggingface" / "hub" / "models--x" / "model.safetensors"
    model.parent.mkdir(parents=True)
    model.write_bytes(b"weights")
    env = {"HOME": str(home), "SGLANG_DG_CACHE_DIR": str(home / ".cache")}
    ws = WarmStart.of(CacheStore(tmp_path / "store"), _facts(), [], [], env, "/opt/ml-env", "root", "/root")
    where = warmstart.folders(_facts(), env, "root", "/root")
    assert str(home / ".cache") in where
    tar = _tar({str(home / ".cache" / "k.cubin").lstrip("/"): b"cubin"})
    done = _program("place", hashlib.sha256(tar).hexdigest(), *where, data=tar)
    cleared = _program("clear", *where)
    assert (isinstance(ws, NoKey), model.exists()) == (True, True), (done.stderr, cleared.stderr)


def test_a_cache_folder_one_level_deep_or_holding_weights_is_refused(tmp_path: Path) -> None:
    """rev49b #6, the other shared folders: TRITON_CACHE_DIR=/data gives no key; a folder holding a model's
    weights is neither placed nor cleared on the host (place exited 0 and removed them before)."""
    assert warmstart.too_broad(["/data", "/root/.triton/cache"], {}, "/root", "/opt/ml-env") == "/data"
    models = tmp_path / "srv" / "models"
    models.mkdir(parents=True)
    (models / "model-00001.safetensors").write_bytes(b"weights")
    tar = _tar({str(models / "k.cubin").lstrip("/"): b"cubin"})
    done = _program("place", hashlib.sha256(tar).hexdigest(), str(models), data=tar)
    cleared = _program("clear", str(models))
    assert (done.returncode, cleared.returncode, (models / "model-00001.safetensors").exists()) == (5, 5, True)


# r7 -------------------------------------------------------------------------------------------------------------
# rev49b #7: place and clear run as root (fleet's SSH user or become) in folders of the server's user's home, and
# follow a cache folder that is a symlink (the first review's #13: a cache moved to a big disk). The server's user
# (serve.user, unprivileged: it runs the model's code) can point its ~/.cache/deep_gemm at any folder: the next
# place swaps that folder out, removes what stood there and gives the server's user the new one (chown); a cold
# retry's clear removes it. Here a stand-in for /etc/ssh: its sshd_config gone, the folder nobody's (was xfail
# strict; fixed: run as root, kcache.py refuses a folder whose path passes through a link root does not own)
@pytest.mark.skipif(os.geteuid() != 0, reason="places as root, as fleet does on a root or become host")
def test_a_link_the_servers_user_made_never_leads_root_out_of_its_folders(open_tmp: Path) -> None:
    etc_ssh = open_tmp / "etc" / "ssh"
    etc_ssh.mkdir(parents=True)
    (etc_ssh / "sshd_config").write_text("PermitRootLogin no\n")
    home = open_tmp / "home" / "llm"
    (home / ".cache").mkdir(parents=True)
    nobody = 65534
    os.chown(home, nobody, nobody)
    os.chown(home / ".cache", nobody, nobody)
    folder = home / ".cache" / "deep_gemm"
    os.symlink(etc_ssh, folder)
    os.lchown(folder, nobody, nobody)  # the server's user made it
    tar = _tar({str(folder / "k.cubin").lstrip("/"): b"cubin"})
    placed = _program("--user=nobody", "place", hashlib.sha256(tar).hexdigest(), str(folder), data=tar)
    after_place = ((etc_ssh / "sshd_config").exists(), etc_ssh.stat().st_uid)
    cleared = _program("clear", str(folder))
    assert (after_place, etc_ssh.exists()) == ((True, 0), True), (placed.stderr, cleared.stderr)


@pytest.mark.skipif(os.geteuid() != 0, reason="clears as root, as fleet does on a root or become host")
def test_a_link_above_the_cache_folder_never_leads_root_out_either(open_tmp: Path) -> None:
    """rev49b #7 through a folder above: ~/.triton linked to a stand-in for /var, so ~/.triton/cache is /var/cache
    (clear removed it before); a put-back's drop_unproven skips a marked folder whose path now holds a link."""
    var = open_tmp / "var"
    (var / "cache").mkdir(parents=True)
    (var / "cache" / "apt").write_text("kept")
    home = open_tmp / "home" / "llm"
    home.mkdir(parents=True)
    os.symlink(var, home / ".triton")
    os.lchown(home / ".triton", 65534, 65534)
    cleared = _program("clear", str(home / ".triton" / "cache"))
    mark = open_tmp / "kcache-placed"
    mark.write_text(f"{home / '.triton' / 'cache'}\n")
    subprocess.run(["sh", "-c", kcache.drop_unproven(str(mark))], check=True)
    assert (cleared.returncode, (var / "cache" / "apt").exists(), mark.exists()) == (5, True, False)


# r8 -------------------------------------------------------------------------------------------------------------
# rev49b #8: place spools its input to PARENT/.fleet-kcache-in-<its pid> beside the first cache folder, a folder of
# the server's user (~/.cache), opened by name (open 'wb': a link is followed). The server's user plants links of
# that name for the pids to come, pointing at any file; stale() removes those of dead pids and keeps the one of
# place's own pid, which root then truncates and fills with the tar. Here a stand-in for /etc/shadow (was xfail
# strict; fixed: the spool is unlinked if it stands, then made new, O_EXCL and O_NOFOLLOW; so is each file placed)
@pytest.mark.skipif(os.geteuid() != 0, reason="places as root, as fleet does on a root or become host")
def test_a_link_planted_as_the_spool_never_has_root_write_through_it(open_tmp: Path) -> None:
    shadow = open_tmp / "etc" / "shadow"
    shadow.parent.mkdir()
    shadow.write_text("root:$6$secret:20000:0:99999:7:::\n")
    cache = open_tmp / "home" / "llm" / ".cache"
    cache.mkdir(parents=True)
    os.chown(cache, 65534, 65534)
    first = os.getpid()
    for pid in range(first, first + 20000):  # the server's user's links, for the pids to come
        os.symlink(shadow, cache / f"{kcache_aside()}in-{pid}")
    folder = cache / "deep_gemm"
    tar = _tar({str(folder / "k.cubin").lstrip("/"): b"cubin"})
    done = _program("--user=nobody", "place", hashlib.sha256(tar).hexdigest(), str(folder), data=tar)
    assert shadow.read_text() == "root:$6$secret:20000:0:99999:7:::\n", done.stderr


# r9 -------------------------------------------------------------------------------------------------------------
# rev49b #9: #3 where the next rung's key has an entry: its tar fills fewer folders than the first key's (its giver
# had no Triton cache yet). place swaps only those; the first key's placed, unproven folder stays and is not in
# placed, so the start runs on it; a failed start's clear removes only the folders placed now and unmarks the rest,
# so the cold retry runs on it too, and nothing names it afterwards (was xfail strict; fixed: place first removes
# what the mark names)
def test_a_place_never_starts_on_an_earlier_keys_unproven_folder(tmp_path: Path) -> None:
    store, said, mark = CacheStore(tmp_path / "store"), list[str](), tmp_path / "kcache-placed"
    ops, triton = _ops(tmp_path / "h1"), tmp_path / "h1" / ".triton" / "cache"
    other = replace(_key(), flags=(("--tp-size", "4"),))
    store.put(_key(), _tar({str(ops / "m" / "m.so").lstrip("/"): b"first key",
                            str(triton / "k.cubin").lstrip("/"): b"first key"}), "h0")
    store.put(other, _tar({str(ops / "m" / "m.so").lstrip("/"): b"second key"}), "h2")
    first = WarmStart(store, _key(), [str(ops), str(triton)], sys.prefix)
    first.before_start(_conn(_Marked(mark)), HOST, said.append)  # it starts, fails its health check
    second = WarmStart(store, other, [str(ops), str(triton)], sys.prefix)
    second.before_start(_conn(_Marked(mark)), HOST, said.append)
    left = (triton / "k.cubin").exists() and (triton / "k.cubin").read_bytes() == b"first key"
    assert not left or str(triton) in second.placed, (said, second.placed)


# r10 ------------------------------------------------------------------------------------------------------------
# The checks of #7 and #8 are made by path, as root, inside folders the server's user writes: a process of that
# user that swaps a folder or plants a link between a check and its use (a TOCTOU race) passes them. kcache.py now
# drops to --user (the unit's User=) before it touches those folders, so what it does there is what that user could
# do. These run it with those checks off (as a race that won would leave them: passed): a root-owned stand-in is
# still neither written, removed, given away nor read (each failed on the code before, which did it all as root)
_UNCHECKED = """import sys
ns = {"__name__": "kcache"}
exec(compile(open(sys.argv[1]).read(), "kcache.py", "exec"), ns)
ns["_foreign_link"] = lambda folder: None  # a link swapped in after the check


def _spool(path):  # opened by name, following a link planted there after the check
    with open(path, "wb") as out:
        out.write(sys.stdin.buffer.read())


ns["_spool"] = _spool
"""


def _unchecked(where: Path, *args: str, data: bytes = b"", also: str = "") -> subprocess.CompletedProcess[bytes]:
    program = where / "kcache.py"
    program.write_text(programs.text("kcache.py"))
    return subprocess.run([sys.executable, "-c", _UNCHECKED + also + 'ns["main"](sys.argv[2:])\n', str(program),
                           *args], input=data, capture_output=True, timeout=60)


def _users_home(open_tmp: Path) -> Path:
    cache = open_tmp / "home" / "llm" / ".cache"
    cache.mkdir(parents=True)
    for p in (cache.parent, cache):
        os.chown(p, 65534, 65534)
    return cache


@pytest.mark.skipif(os.geteuid() != 0, reason="runs kcache.py as root, as fleet does on a root or become host")
def test_a_folder_swapped_for_a_link_after_the_check_leads_nowhere_root_owns(open_tmp: Path) -> None:
    etc_ssh = open_tmp / "etc" / "ssh"
    etc_ssh.mkdir(parents=True)
    (etc_ssh / "sshd_config").write_text("PermitRootLogin no\n")
    folder = _users_home(open_tmp) / "deep_gemm"
    os.symlink(etc_ssh, folder)
    os.lchown(folder, 65534, 65534)
    tar = _tar({str(folder / "k.cubin").lstrip("/"): b"cubin"})
    sha = hashlib.sha256(tar).hexdigest()
    placed = _unchecked(open_tmp, "--user=nobody", "place", sha, str(folder), data=tar)
    after_place = ((etc_ssh / "sshd_config").exists(), etc_ssh.stat().st_uid, (etc_ssh / "k.cubin").exists())
    cleared = _unchecked(open_tmp, "--user=nobody", "clear", str(folder))
    assert (after_place, (etc_ssh / "sshd_config").exists()) == ((True, 0, False), True), (placed, cleared)
    assert (placed.returncode, cleared.returncode) != (0, 0)


@pytest.mark.skipif(os.geteuid() != 0, reason="runs kcache.py as root, as fleet does on a root or become host")
def test_a_spool_link_planted_after_the_check_writes_no_root_file(open_tmp: Path) -> None:
    shadow = open_tmp / "etc" / "shadow"
    shadow.parent.mkdir()
    shadow.write_text("root:$6$secret:20000:0:99999:7:::\n")
    cache = _users_home(open_tmp)
    first = os.getpid()
    for pid in range(first, first + 20000):  # the server's user's links, for the pids to come
        os.symlink(shadow, cache / f"{kcache_aside()}in-{pid}")
    folder = cache / "deep_gemm"
    tar = _tar({str(folder / "k.cubin").lstrip("/"): b"cubin"})
    done = _unchecked(open_tmp, "--user=nobody", "place", hashlib.sha256(tar).hexdigest(), str(folder), data=tar)
    assert shadow.read_text() == "root:$6$secret:20000:0:99999:7:::\n", done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="runs kcache.py as root, as fleet does on a root or become host")
def test_a_folder_swapped_for_a_link_is_never_collected_into_the_store(open_tmp: Path) -> None:
    """collect skips a link, by path: a folder swapped after that (or a file swapped for a hard link) had root read
    a root-only file into the store, placed on every host of the key. As the user: unreadable."""
    secret = open_tmp / "root" / "keys"
    secret.mkdir(parents=True)
    secret.chmod(0o700)
    (secret / "id_ed25519").write_text("PRIVATE KEY")
    folder = _users_home(open_tmp) / "deep_gemm"
    os.symlink(secret, folder)
    os.lchown(folder, 65534, 65534)
    won = 'ns["os"].path.islink = lambda path: False\n'  # every link check passed: a race won
    got = _unchecked(open_tmp, "--user=nobody", "collect", "1048576", str(folder), also=won)
    assert b"PRIVATE KEY" not in got.stdout, got.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="runs a put-back's removal as root, as fleet does")
def test_a_put_back_removes_a_marked_folder_only_as_far_as_the_units_user_may(open_tmp: Path) -> None:
    """A put-back's drop_unproven checks each marked path (no link on it), then removes it: a folder of root's
    swapped in at that path after the check (the user may rename a folder into its own, not empty it) was emptied
    by root before. As the unit's user, root's file in it stays."""
    cache = _users_home(open_tmp)
    swapped = cache / "ops"
    swapped.mkdir()
    (swapped / "root-only").write_text("root's")  # root's folder and file, standing where the mark points
    mark = open_tmp / "kcache-placed"
    mark.write_text(f"{swapped}\n")
    done = subprocess.run(["sh", "-c", kcache.drop_unproven(str(mark), "nobody")], capture_output=True, text=True)
    left = [p.name for p in cache.rglob("root-only")]
    assert (left, mark.exists()) == (["root-only"], False), done.stderr
