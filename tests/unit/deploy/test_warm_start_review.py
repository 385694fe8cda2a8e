"""Adversarial review of issue 49's warm start (branch h-rev49): each test reproduces one failure found (each was
xfail(strict=True) and failed on the code before; fixed on h-fix49, the comment above each says what it was). The
host side runs
the real fleet/host/programs/kcache.py on local folders; the controller side drives fleet.deploy.warmstart
through fleet.ssh.remote's own Runner hook (use_runner) with a runner that runs the command here."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import tracemalloc
from dataclasses import replace
from pathlib import Path, PosixPath
from types import SimpleNamespace
from typing import Any

import pytest
from fakesession import HOST

from fleet.deploy import warmstart
from fleet.deploy.cachekey import CacheKey
from fleet.deploy.cachestore import CacheStore, Entry
from fleet.deploy.warmstart import WarmStart
from fleet.host import kcache, programs
from fleet.host.facts import Gpu, HostFacts, Package
from fleet.ssh.remote import BytesResult, use_runner


def _key() -> CacheKey:
    return CacheKey(sm="120", gpu="NVIDIA RTX PRO 6000", driver="580.95.05", cuda="13.0",
                    packages=(("flashinfer-python", "0.6.3"), ("sglang", "0.5.9")), patches=(),
                    flags=(("--tp-size", "2"),), env=(), venv="/root/ml-env")


def _program(*args: str, data: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", programs.text("kcache.py"), *args], input=data,
                          capture_output=True, timeout=60)


def _tar(files: dict[str, bytes | None]) -> bytes:
    """A tar of plain files (None: a folder), names as given."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, body in files.items():
            info = tarfile.TarInfo(name)
            if body is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


def _sparse_tar(name: str, realsize: int) -> bytes:
    """One old-GNU sparse member (type S, as `tar --sparse` writes): 512 stored bytes that read back as
    `realsize` bytes (the rest a hole)."""
    info = tarfile.TarInfo(name)
    info.type, info.size = tarfile.GNUTYPE_SPARSE, 512
    blocks = info.tobuf(format=tarfile.GNU_FORMAT)  # a long name comes first, in its own ././@LongLink member
    head = bytearray(blocks[-512:])
    head[386:398] = b"%011o\0" % 0  # sparse[0].offset
    head[398:410] = b"%011o\0" % 512  # sparse[0].numbytes
    head[483:495] = b"%011o\0" % realsize  # realsize
    head[148:156] = b" " * 8
    head[148:156] = b"%06o\0 " % sum(head)
    return blocks[:-512] + bytes(head) + b"k" * 512 + b"\0" * 1024


class _Here:
    """fleet.ssh.remote's Runner that runs the command on this machine (the host is a folder here); `collect`:
    what a hostile host answers to `kcache.py collect` instead of running it."""

    def __init__(self, collect: bytes | None = None) -> None:
        self.collect = collect
        self.commands: list[str] = []

    def run_bytes(self, conn: Any, host: Any, command: str, data: Any, timeout: float,
                  max_output: int) -> BytesResult:
        command = command.replace(kcache.PLACED, str(_MARK))  # this machine is no host: its /var/lib stays as is
        self.commands.append(command)
        if self.collect is not None and " collect " in command:
            return BytesResult(0, self.collect, b"")
        done = subprocess.run(["sh", "-c", command], input=data, capture_output=True, timeout=timeout)
        return BytesResult(done.returncode, done.stdout, done.stderr)


_MARK = Path(tempfile.mkdtemp(prefix="rev49-")) / "kcache-placed"


def _conn(runner: _Here) -> Any:
    conn = SimpleNamespace(transport=SimpleNamespace())
    use_runner(conn, runner)  # type: ignore[arg-type]
    return conn


def _ops(root: Path) -> Path:
    ops = root / ".cache" / "flashinfer" / "0.6.3" / "120a" / "cached_ops"
    (ops / "m").mkdir(parents=True)
    (ops / "m" / "m.so").write_bytes(b"\x7fELF" + b"k" * 100)
    return ops


# 1 --------------------------------------------------------------------------------------------------------------
# rev49 #1 (was xfail strict; fixed on h-fix49): a sparse member (type S is isfile()) passes place's checks and is
# written out whole: a 4 KiB tar from a hostile host writes any size on every host of its key
# (programs/kcache.py:95,114-117; no size bound at place)
def test_a_tiny_tar_is_not_expanded_into_a_huge_file_on_the_host(tmp_path: Path) -> None:
    ops = _ops(tmp_path)
    tar = _sparse_tar(str(ops / "m" / "bomb.so").lstrip("/"), 16 << 20)
    done = _program("place", hashlib.sha256(tar).hexdigest(), str(ops), data=tar)
    written = sum(p.stat().st_size for p in ops.rglob("*") if p.is_file())
    assert len(tar) <= 4096 and written <= len(tar), (done.returncode, written)


# rev49 #1b (was xfail strict; fixed on h-fix49): modules_in reads each .so member whole into the controller's
# memory: a sparse member of a 4 KiB stored tar costs its full size at every warm start (warmstart.py:143-145)
def test_the_controller_never_holds_more_than_the_tar_to_hash_its_modules() -> None:
    tar = _sparse_tar("root/ops/m/bomb.so", 16 << 20)
    tracemalloc.start()
    try:
        warmstart.modules_in(tar)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak


# 2 --------------------------------------------------------------------------------------------------------------
# rev49 #2 (was xfail strict; fixed on h-fix49): place checks names, not that members can be written: a file member
# named as a cache folder crashes it (exit 1, IsADirectoryError) after earlier folders were swapped; the controller
# is told 'refused' (nothing changed) and its -new- folder is left (programs/kcache.py:94-123 swaps folder by
# folder, host/kcache.py:17-20,53-54, warmstart.py:86-88)
def test_a_refused_place_changes_nothing_on_the_host(tmp_path: Path) -> None:
    first, second = _ops(tmp_path / "a"), _ops(tmp_path / "b")
    (first / "mine.so").write_bytes(b"mine")
    tar = _tar({str(first / "m" / "m.so").lstrip("/"): b"placed", str(second).lstrip("/"): b"a file, not a folder"})
    done = _program("place", hashlib.sha256(tar).hexdigest(), str(first), str(second), data=tar)
    left = sorted(p.name for p in second.parent.iterdir() if ".fleet-kcache-" in p.name)
    assert (done.returncode, (first / "mine.so").exists(), left) == (4, True, []), done.stderr.decode()[-200:]



# rev49 #2b (was xfail strict; fixed on h-fix49): the same through WarmStart: it says 'cold start: the host refused
# the caches' and keeps placed=[] though a folder was replaced, so a start that then fails gets no cold retry
# (warmstart.py:86-88, 94-95)
def test_a_warm_start_that_changed_a_folder_knows_it(tmp_path: Path) -> None:
    first, second = _ops(tmp_path / "a"), _ops(tmp_path / "b")
    (first / "mine.so").write_bytes(b"mine")
    tar = _tar({str(first / "m" / "m.so").lstrip("/"): b"placed", str(second).lstrip("/"): b"a file, not a folder"})
    store, said = CacheStore(tmp_path / "store"), list[str]()
    giver = WarmStart(store, _key(), [str(first), str(second)], sys.prefix)
    giver.after_serving(_conn(_Here(collect=tar)), replace(HOST, name="h0"), said.append)
    warm = WarmStart(store, _key(), [str(first), str(second)], sys.prefix)
    warm.before_start(_conn(_Here()), HOST, said.append)
    assert (first / "mine.so").exists() or warm.placed, said
    assert "a file named as the cache folder" in said[1], said  # [0]: the collect said; never stored

# 3 --------------------------------------------------------------------------------------------------------------
# rev49 #3 (was xfail strict; fixed on h-fix49): the store takes any bytes a host sends (put never opens the tar)
# and an entry every host refuses is never dropped nor replaced (cachestore.py:48, warmstart.py:86-88 drops nothing,
# 120-121 keeps it): one hostile or foreign-HOME host makes its key cold for good
def test_an_entry_the_hosts_refuse_is_replaced_by_a_host_that_serves(tmp_path: Path) -> None:
    store, said = CacheStore(tmp_path / "store"), list[str]()
    ops = _ops(tmp_path / "host1")
    hostile = WarmStart(store, _key(), [str(tmp_path / "host0" / "ops")], sys.prefix)
    hostile.after_serving(_conn(_Here(collect=b"not a tar at all")), replace(HOST, name="h0"), said.append)
    for _ in range(2):  # host1 starts, is refused, serves cold, collects; then starts again
        honest = WarmStart(store, _key(), [str(ops)], sys.prefix)
        honest.before_start(_conn(_Here()), HOST, said.append)
        honest.after_serving(_conn(_Here()), HOST, said.append)
    got = store.get(_key())
    assert isinstance(got, Entry) and got.host == HOST.name and got.data != b"not a tar at all", said


# 4 --------------------------------------------------------------------------------------------------------------
class _Racing(PosixPath):
    """The store's folder, another deploy dropping (or pruning) the entry right after this one read its tar."""

    other: CacheStore

    def read_bytes(self) -> bytes:
        data = super().read_bytes()
        if self.name == "cache.tar":
            _Racing.other.drop(_key(), "another deploy's prune")
        return data


# rev49 #4 (was xfail strict; fixed on h-fix49): get() touches meta.json outside its try: an entry pruned or dropped
# by a concurrent deploy raises FileNotFoundError out of before_start, which ends the whole climb (ladder.py:217
# falls back) instead of a cold start (cachestore.py:89)
def test_a_concurrent_prune_means_a_cold_start_not_an_exception(tmp_path: Path) -> None:
    CacheStore(tmp_path).put(_key(), b"tar", "h0")
    _Racing.other = CacheStore(tmp_path)
    said: list[str] = []
    warm = WarmStart(CacheStore(_Racing(tmp_path)), _key(), ["/nowhere/ops"], sys.prefix)
    warm.before_start(_conn(_Here()), HOST, said.append)
    assert said and said[0].startswith("cold start")


# 5 --------------------------------------------------------------------------------------------------------------
# rev49 #5 (was xfail strict; fixed on h-fix49): what a controller killed inside put() or _drop() left (.tmp-*, up
# to 2 GiB each) is never removed nor counted against TOTAL: the store is not bounded
# (cachestore.py:57-64,97-101,110-111)
def test_what_a_killed_put_left_is_cleaned_or_counted(tmp_path: Path) -> None:
    store = CacheStore(tmp_path, total=1000)
    for left in (".tmp-0123456789abcdef-77-1", ".tmp-drop-" + "e" * 64 + "-2"):  # killed mid-put, mid-drop
        (tmp_path / left).mkdir(parents=True)
        (tmp_path / left / "cache.tar").write_bytes(b"x" * 900)
    store.put(_key(), b"y" * 900, "h0")
    used = sum(p.stat().st_size for p in tmp_path.rglob("cache.tar"))
    assert used <= 1000, used


# 6 --------------------------------------------------------------------------------------------------------------
# rev49 #6 (was xfail strict; fixed on h-fix49): store entries are written with the umask (0755 folders, 0644
# files): compiled code, inductor graphs and key.json (model path, flags) readable by every local user
# (cachestore.py:56,58,127-131)
def test_the_store_is_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        CacheStore(tmp_path / "kcache").put(_key(), b"tar", "h0")
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o077 for p in (tmp_path / "kcache").rglob("*")}
    modes["kcache"] = (tmp_path / "kcache").stat().st_mode & 0o077
    assert not any(modes.values()), {k: oct(v) for k, v in modes.items()}


# 7 --------------------------------------------------------------------------------------------------------------
# rev49 #7 (was xfail strict; fixed on h-fix49): a cache variable naming a shared folder (TRITON_CACHE_DIR=$HOME,
# SGLANG_DG_CACHE_DIR=~/.cache) makes that whole folder a cache folder: place swaps it out and removes what stood
# there (~/.ssh, the HF models), clear too (warmstart.py:37-48 takes env as is, programs/kcache.py:127-141)
def test_placing_a_cache_never_removes_files_that_are_no_cache(tmp_path: Path) -> None:
    home = tmp_path / "home" / "llm"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA operator\n")
    facts = HostFacts(host="h", address="a", gpus=[Gpu(index=0, name="G", sm=120)],
                      packages={"sglang": Package(version="0.5.9"), "flashinfer-python": Package(version="0.6.3")})
    where = warmstart.folders(facts, {"HOME": str(home), "TRITON_CACHE_DIR": str(home)}, "llm", "/home/llm")
    assert str(home) in where  # the folder fleet would place and clear
    tar = _tar({str(home / "ab12").lstrip("/"): None, str(home / "ab12" / "k.cubin").lstrip("/"): b"cubin"})
    done = _program("place", hashlib.sha256(tar).hexdigest(), str(home), data=tar)
    assert done.returncode != 0 or (home / ".ssh" / "authorized_keys").exists()


def test_the_review_fakes_are_sound(tmp_path: Path) -> None:
    """The repros' own tools: the sparse tar reads back at its full size; the here-runner places a real cache."""
    with tarfile.open(fileobj=io.BytesIO(_sparse_tar("a/b.so", 4096)), mode="r:") as t:
        (m,) = t.getmembers()
        assert m.isfile() and m.size == 4096 and len(t.extractfile(m).read()) == 4096  # type: ignore[union-attr]
    store, said = CacheStore(tmp_path / "s"), list[str]()
    ops = _ops(tmp_path / "h0")
    WarmStart(store, _key(), [str(ops)], sys.prefix).after_serving(_conn(_Here()), HOST, said.append)
    (ops / "m" / "m.so").unlink()
    WarmStart(store, _key(), [str(ops)], sys.prefix).before_start(_conn(_Here()), HOST, said.append)
    assert (ops / "m" / "m.so").read_bytes().startswith(b"\x7fELF"), said
    assert json.loads((tmp_path / "s" / _key().digest / "meta.json").read_text())["host"] == HOST.name


# 8 --------------------------------------------------------------------------------------------------------------
# rev49 #8 (was xfail strict; fixed on h-fix49): a host whose cache folders hold nothing (yet) gives an empty tar
# (10 KiB of end blocks) that is stored as its key's entry and never replaced: every later host of the key is 'warm'
# with 0 folders, cold for good (programs/kcache.py:43-50 writes it, host/kcache.py:43 passes it,
# warmstart.py:120-121 keeps it)
def test_an_empty_collection_does_not_become_the_keys_entry(tmp_path: Path) -> None:
    store, said = CacheStore(tmp_path / "store"), list[str]()
    first = WarmStart(store, _key(), [str(tmp_path / "h0" / "not-built-yet")], sys.prefix)
    first.after_serving(_conn(_Here()), replace(HOST, name="h0"), said.append)
    ops = _ops(tmp_path / "h1")  # the next host of the key serves with its caches built
    WarmStart(store, _key(), [str(ops)], sys.prefix).after_serving(_conn(_Here()), HOST, said.append)
    got = store.get(_key())
    assert got is None or (isinstance(got, Entry) and warmstart.modules_in(got.data)), said


# 9 --------------------------------------------------------------------------------------------------------------
# rev49 #9 (was xfail strict; fixed on h-fix49): the folders placed are read back from the host's stdout with
# split(): a cache folder with a space (SGLANG_CACHE_DIR) comes back in pieces, clear is refused and a start that
# failed with the caches gets no cold retry (host/kcache.py:55)
def test_a_cache_folder_with_a_space_is_cleared_for_the_cold_retry(tmp_path: Path) -> None:
    store, said = CacheStore(tmp_path / "store"), list[str]()
    ops = _ops(tmp_path / "my cache")
    WarmStart(store, _key(), [str(ops)], sys.prefix).after_serving(_conn(_Here()), HOST, said.append)
    warm = WarmStart(store, _key(), [str(ops)], sys.prefix)
    warm.before_start(_conn(_Here()), HOST, said.append)
    assert warm.placed == [str(ops)], warm.placed
    assert warm.without_cache(_conn(_Here()), HOST, said.append) and not ops.exists(), said


# 10 -------------------------------------------------------------------------------------------------------------
# rev49 #10 (was xfail strict; fixed on h-fix49): collect writes a second link to a file (or a file of two nested
# cache folders) as a hard-link member, which place refuses whole: such a host's cache is stored, then refused on
# every host (programs/kcache.py:48-50 vs 95)
def test_what_collect_writes_place_accepts(tmp_path: Path) -> None:
    ops = _ops(tmp_path)
    os.link(ops / "m" / "m.so", ops / "m" / "same.so")
    tar = _program("collect", str(1 << 20), str(ops)).stdout
    done = _program("place", hashlib.sha256(tar).hexdigest(), str(ops), data=tar)
    assert done.returncode == 0, done.stderr.decode()


# 11 -------------------------------------------------------------------------------------------------------------
# rev49 #11 (was xfail strict; fixed on h-fix49): every unit has PrivateTmp=yes (render.py:29), so a release before
# 0.5.18 keeps inductor's cache in the unit's own /tmp; fleet collects and places the host's
# /tmp/torchinductor_<user>, which the server never reads, and ships whatever another process left there
# (warmstart.py:46, caches.yaml inductor <0.5.18)
def test_no_cache_folder_is_in_a_tmp_the_unit_does_not_see() -> None:
    from fleet.host.render import HARDENING
    facts = HostFacts(host="h", address="a", gpus=[Gpu(index=0, name="G", sm=120)],
                      packages={"sglang": Package(version="0.5.9"), "flashinfer-python": Package(version="0.6.3")})
    assert "PrivateTmp=yes" in HARDENING["service"]
    assert not [f for f in warmstart.folders(facts, {}, "root", "/root") if f.startswith("/tmp/")]


# 12 -------------------------------------------------------------------------------------------------------------
@pytest.mark.skipif(os.geteuid() != 0, reason="places as root, as fleet does on a root or become host")
# rev49 #12 (was xfail strict; fixed on h-fix49): place runs as root (fleet's SSH user or become) and leaves the
# placed folder and the parents it made root's, 0755: a server with serve.user other than root cannot write a new
# kernel there, nor after the cold retry's clear (programs/kcache.py:62-63,102-106). Now place works as --user (the
# unit's User=): what it makes is that user's because that user makes it
def test_placed_folders_belong_to_the_user_whose_home_they_are_in(open_tmp: Path) -> None:
    home = open_tmp / "home" / "llm"
    mine = home / ".cache" / "sglang"
    mine.mkdir(parents=True)
    for p in (home, home / ".cache", mine):
        os.chown(p, 65534, 65534)
    target = str(mine / "flashinfer" / "autotune" / "0.6.3" / "sm120")  # its parents not made yet
    renamed = _tar({target.lstrip("/") + "/m.json": b"{}"})
    done = _program("--user=nobody", "place", hashlib.sha256(renamed).hexdigest(), target, data=renamed)
    assert done.returncode == 0, done.stderr
    owners = {str(p): p.stat().st_uid for p in [Path(target), *Path(target).parents] if str(p).startswith(str(mine))}
    assert set(owners.values()) == {65534}, owners


# 13 -------------------------------------------------------------------------------------------------------------
# rev49 #13 (was xfail strict; fixed on h-fix49): a cache folder that is a symlink (a cache moved to a big disk) is
# renamed aside and replaced by a real folder where the link stood; rmtree refuses the link, which is left as
# <folder>.fleet-kcache-old-PID (programs/kcache.py:127-132; collect skips such a folder, programs/kcache.py:44)
def test_a_cache_folder_that_is_a_symlink_stays_one(tmp_path: Path) -> None:
    ops = _ops(tmp_path / "h0")
    tar = _program("collect", str(1 << 20), str(ops)).stdout
    big = tmp_path / "nvme" / "cached_ops"
    big.mkdir(parents=True)
    moved = _ops(tmp_path / "h1")
    os.rename(moved, tmp_path / "gone")
    os.symlink(big, moved)
    tar = _tar({m.name.replace(str(ops).lstrip("/"), str(moved).lstrip("/")): None if m.isdir() else b"so"
                for m in tarfile.open(fileobj=io.BytesIO(tar)).getmembers()})
    done = _program("place", hashlib.sha256(tar).hexdigest(), str(moved), data=tar)
    left = [p.name for p in moved.parent.iterdir() if ".fleet-kcache-" in p.name]
    assert (done.returncode, moved.is_symlink(), left) == (0, True, []), (done.stderr, left)


# fixes beyond the repros -------------------------------------------------------------------------------------------
def test_an_entry_a_host_refuses_as_bad_is_dropped_and_replaced(tmp_path: Path) -> None:
    """rev49 #3: an entry already stored (by an older fleet, or altered) that place refuses for what it holds (a
    sparse member) is dropped, so the host that then serves cold gives the key its entry."""
    store, said = CacheStore(tmp_path / "store"), list[str]()
    ops = _ops(tmp_path / "h1")
    store.put(_key(), _sparse_tar(str(ops / "m" / "bomb.so").lstrip("/"), 1 << 20), "h0")
    warm = WarmStart(store, _key(), [str(ops)], sys.prefix)
    warm.before_start(_conn(_Here()), HOST, said.append)
    warm.after_serving(_conn(_Here()), HOST, said.append)
    got = store.get(_key())
    assert isinstance(got, Entry) and got.host == HOST.name and not warm.placed, said
    assert "dropped from the store" in said[1], said  # [0]: the place said


def test_a_cache_folder_that_is_the_home_or_holds_the_venv_gives_no_key() -> None:
    """rev49 #7, the controller's side: one clear line, a cold start, before anything is sent to the host."""
    home, venv = "/home/llm", "/home/llm/ml-env"
    assert warmstart.too_broad(["/home/llm/.cache/sglang", "/home/llm"], {}, "/home/llm", venv) == "/home/llm"
    assert warmstart.too_broad(["/home"], {"HOME": home}, "/home/llm", venv) == "/home"
    assert warmstart.too_broad(["/home/llm/ml-env/lib"], {}, "/home/llm", venv) is None
    assert warmstart.too_broad(["/home/llm/.cache/triton"], {}, "/home/llm", venv) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="places as root, as fleet does on a root or become host")
def test_placed_folders_belong_to_the_server_user_named(open_tmp: Path) -> None:
    """rev49 #12 with --user (the unit's User=): the placed folder and the parents made are its, and its group's;
    where that user could not make them (a folder of root's), nothing is placed (its server could not write there
    either)."""
    import pwd
    nobody = pwd.getpwnam("nobody")
    (open_tmp / "srv").mkdir()
    os.chown(open_tmp / "srv", nobody.pw_uid, nobody.pw_gid)
    target = str(open_tmp / "srv" / "cache" / "ops")
    tar = _tar({target.lstrip("/") + "/m.so": b"so"})
    done = _program("--user=nobody", "place", hashlib.sha256(tar).hexdigest(), target, data=tar)
    assert done.returncode == 0, done.stderr
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in (Path(target).parent, Path(target), Path(target) / "m.so")}
    assert owners == {(nobody.pw_uid, nobody.pw_gid)}
    assert (open_tmp.stat().st_uid, (open_tmp / "srv").stat().st_uid) == (0, nobody.pw_uid)
    roots = str(open_tmp / "opt" / "ops")
    tar = _tar({roots.lstrip("/") + "/m.so": b"so"})
    refused = _program("--user=nobody", "place", hashlib.sha256(tar).hexdigest(), roots, data=tar)
    assert (refused.returncode, (open_tmp / "opt").exists()) == (5, False), refused.stderr
