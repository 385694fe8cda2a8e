"""fleet/host/programs/kcache.py run as fleet runs it (python -c TEXT ARGS) against folders that mimic a host's
caches: a bounded collect, a place refused unless whole and inside the cache folders, atomic folders."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from fleet.host import kcache, programs


def _run(*args: str, data: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", programs.text("kcache.py"), *args], input=data,
                          capture_output=True, timeout=60)


def _cache(root: Path) -> Path:
    ops = root / "home" / ".cache" / "flashinfer" / "0.6.3" / "120a" / "cached_ops"
    (ops / "batch_prefill").mkdir(parents=True)
    (ops / "batch_prefill" / "batch_prefill.so").write_bytes(b"\x7fELF" + b"k" * 100)
    (ops / "batch_prefill" / ".ninja_log").write_text("d" * 64 + "\n")
    return ops


def _collect(folder: Path, limit: int = 1 << 20) -> bytes:
    done = _run("collect", str(limit), str(folder), str(folder.parent / "absent"))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_collected_cache_is_placed_file_for_file_over_what_stood_there(tmp_path: Path) -> None:
    ops = _cache(tmp_path)
    tar = _collect(ops)
    (ops / "batch_prefill" / "batch_prefill.so").write_bytes(b"stale")
    (ops / "stale_module").mkdir()
    done = _run("place", hashlib.sha256(tar).hexdigest(), str(ops), data=tar)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().split() == [str(ops)]
    assert (ops / "batch_prefill" / "batch_prefill.so").read_bytes() == b"\x7fELF" + b"k" * 100
    assert sorted(p.name for p in ops.iterdir()) == ["batch_prefill"]  # the folder replaced whole
    assert not [p for p in ops.parent.iterdir() if ".fleet-kcache-" in p.name]


def test_a_cache_over_the_limit_is_not_collected(tmp_path: Path) -> None:
    ops = _cache(tmp_path)
    done = _run("collect", "10", str(ops))
    assert done.returncode == 3 and b"more than the 10 allowed" in done.stderr and done.stdout == b""


def test_a_truncated_tar_is_refused_and_the_folder_left_as_it_was(tmp_path: Path) -> None:
    ops = _cache(tmp_path)
    tar = _collect(ops)
    (ops / "batch_prefill" / "batch_prefill.so").write_bytes(b"mine")
    cut = tar[: len(tar) // 2]
    done = _run("place", hashlib.sha256(tar).hexdigest(), str(ops), data=cut)
    assert done.returncode == 4 and b"sha256" in done.stderr
    assert (ops / "batch_prefill" / "batch_prefill.so").read_bytes() == b"mine"


def test_a_member_outside_the_cache_folders_is_refused(tmp_path: Path) -> None:
    ops = _cache(tmp_path)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(str(tmp_path / "etc" / "passwd").lstrip("/"))
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    data = buf.getvalue()
    done = _run("place", hashlib.sha256(data).hexdigest(), str(ops), data=data)
    assert done.returncode == 4 and b"no plain file inside the cache folders" in done.stderr
    assert not (tmp_path / "etc").exists()


def test_a_symlink_member_is_refused(tmp_path: Path) -> None:
    ops = _cache(tmp_path)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(str(ops / "evil").lstrip("/"))
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/shadow"
        tar.addfile(info)
    data = buf.getvalue()
    assert _run("place", hashlib.sha256(data).hexdigest(), str(ops), data=data).returncode == 4
    assert not (ops / "evil").exists()


def test_clear_removes_the_folders(tmp_path: Path) -> None:
    ops = _cache(tmp_path)
    assert _run("clear", str(ops)).returncode == 0
    assert not ops.exists() and not list(ops.parent.iterdir())


def test_relative_or_root_folders_are_refused(tmp_path: Path) -> None:
    for bad in ("relative/x", "/", "/a/../etc"):
        done = _run("clear", bad)
        assert done.returncode == 2, bad


def test_modules_lists_each_compiled_module_and_place_keeps_their_mtimes(tmp_path: Path) -> None:
    ops = _cache(tmp_path)
    so = ops / "batch_prefill" / "batch_prefill.so"
    os.utime(so, (1_700_000_000, 1_700_000_000))
    tar = _collect(ops)
    shutil.rmtree(ops)
    assert _run("place", hashlib.sha256(tar).hexdigest(), str(ops), data=tar).returncode == 0
    assert so.stat().st_mtime == 1_700_000_000  # ninja's deps log holds the built mtime
    done = _run("modules", str(ops))
    assert kcache.parse_modules(done.stdout.decode()) == {str(so): hashlib.sha256(so.read_bytes()).hexdigest()}


def _second(root: Path) -> Path:
    triton = root / "home" / ".triton" / "cache"
    (triton / "ab12").mkdir(parents=True)
    (triton / "ab12" / "kernel.cubin").write_bytes(b"cubin")
    return triton


def test_a_place_that_fails_half_way_leaves_every_folder_as_it_stood_and_nothing_beside(tmp_path: Path) -> None:
    """Issue 49's fault points: the folders were swapped one by one, so a failure at the second (a full disk, here
    its parent turned into a file) left the first placed and the second the host's own: half a cache. Now every
    folder is built first and swapped only then (on the code before, the first folder was the placed one)."""
    ops, triton = _cache(tmp_path), _second(tmp_path)
    tar = _collect_all([ops, triton])
    (ops / "batch_prefill" / "batch_prefill.so").write_bytes(b"mine")
    shutil.rmtree(triton.parent)
    triton.parent.write_text("not a folder any more")
    done = _run("place", hashlib.sha256(tar).hexdigest(), str(ops), str(triton), data=tar)
    assert done.returncode != 0 and done.stdout == b""
    assert (ops / "batch_prefill" / "batch_prefill.so").read_bytes() == b"mine"
    assert not [p for p in (ops.parent, tmp_path / "home") for q in p.iterdir() if ".fleet-kcache-" in q.name]


def _collect_all(folders: list[Path]) -> bytes:
    done = _run("collect", str(1 << 20), *map(str, folders))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_what_a_dead_run_left_beside_the_folders_is_removed_by_the_next(tmp_path: Path) -> None:
    ops = _cache(tmp_path)
    dead = _dead_pid()
    left = [ops.parent / f"cached_ops.fleet-kcache-new-{dead}", ops.parent / f"cached_ops.fleet-kcache-old-{dead}"]
    for folder in left:
        (folder / "half").mkdir(parents=True)
    (ops.parent / f".fleet-kcache-in-{dead}").write_bytes(b"half a spool")
    live = ops.parent / f"cached_ops.fleet-kcache-new-{os.getpid()}"  # a run still under way: not touched
    live.mkdir()
    tar = _collect(ops)
    assert _run("place", hashlib.sha256(tar).hexdigest(), str(ops), data=tar).returncode == 0
    assert sorted(p.name for p in ops.parent.iterdir()) == sorted(["cached_ops", live.name])


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_place_marks_its_folders_until_a_start_proves_them_and_a_put_back_drops_unproven_ones(tmp_path: Path):
    """A warm start whose run died (or whose clearing failed) left its caches in place, and the release put back
    next (a dead run's recovery, the fall-back) started on them: a cache that had just killed a start killed
    that one too. Now place marks the folders it fills; reading the modules back after a start served (or
    clearing them) unmarks them; a put-back first removes what is still marked (kcache.drop_unproven)."""
    ops, triton = _cache(tmp_path), _second(tmp_path)
    mark = tmp_path / "fleet" / "kcache-placed"
    mark.parent.mkdir()
    tar = _collect_all([ops, triton])
    sha = hashlib.sha256(tar).hexdigest()
    assert _run(f"--mark={mark}", "place", sha, str(ops), str(triton), data=tar).returncode == 0
    assert mark.read_text().split() == [str(ops), str(triton)]
    assert _run(f"--mark={mark}", "modules", str(ops)).returncode == 0 and mark.read_text() == ""  # served
    assert _run(f"--mark={mark}", "place", sha, str(ops), str(triton), data=tar).returncode == 0
    assert _run(f"--mark={mark}", "clear", str(ops), str(triton)).returncode == 0 and mark.read_text() == ""
    assert _run(f"--mark={mark}", "place", sha, str(ops), str(triton), data=tar).returncode == 0
    mark.write_text(mark.read_text() + "/\n/etc/../x\n" + str(tmp_path / "home") + "/link\n")
    (tmp_path / "home" / "link").symlink_to(tmp_path / "home" / ".triton")
    done = subprocess.run(["sh", "-c", kcache.drop_unproven(str(mark))], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not ops.exists() and not triton.exists() and not mark.exists()
    assert (tmp_path / "home" / ".triton").is_dir() and (tmp_path / "home" / "link").is_symlink()
    assert not [p for p in (ops.parent, triton.parent) for q in p.iterdir() if ".fleet-kcache-" in q.name]
    again = subprocess.run(["sh", "-c", kcache.drop_unproven(str(mark))], capture_output=True, text=True)
    assert again.returncode == 0  # nothing marked: nothing done
