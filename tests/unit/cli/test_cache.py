"""`inv cache` (fleet.cli.cache): the controller's cache store listed as a table that fits the terminal or as pure
JSON, pruned on purpose (--prune, --dry-run saying what would go); bad options one line, exit 2, nothing
changed; help reads nothing. The real task, on a store fleet's own CacheStore wrote."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.cli.cache import plan
from fleet.deploy.cachekey import CacheKey
from fleet.deploy.cachestore import CacheStore

REPO = Path(__file__).resolve().parents[3]
INV = Path(sys.executable).parent / "inv"
RELEASE = "20261205T101500Z-ab12"


def _key(sm: str, patches: tuple[tuple[str, str], ...] = ()) -> CacheKey:
    return CacheKey(sm=sm, gpu="NVIDIA RTX PRO 6000 Blackwell Server Edition", driver="580.95.05", cuda="13.0",
                    packages=(("flashinfer-python", "0.6.3"), ("sglang", "0.5.9")), patches=patches,
                    flags=(("--tp-size", "8"),), env=(), venv="/root/ml-env")


NEEDED, PATCHED, ORPHAN = _key("120"), _key("120", (("sm120-allreduce-fusion", "a" * 64),)), _key("100")


@pytest.fixture
def store(tmp_path) -> CacheStore:
    s = CacheStore(tmp_path / "state" / "kcache")
    s.needs.started("sbx0", RELEASE, NEEDED.digest)
    s.needs.started("sbx1", "20261205T111500Z-cd34", PATCHED.digest)
    for i, (key, size) in enumerate(((NEEDED, 3 << 20), (PATCHED, 5000), (ORPHAN, 700))):
        s.put(key, b"x" * size, f"sbx{i}")
        os.utime(s.root / key.digest / "meta.json", (1_780_000_000 + i, 1_780_000_000 + i))
    return s


def inv(store: CacheStore, *args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "FLEET_SANDBOX_ONLY": "1", "HOME": str(store.root.parents[1]),
           "PYTHONPATH": str(REPO), "FLEET_STATE_DIR": str(store.root.parent), "COLUMNS": str(columns)}
    return subprocess.run([str(INV), "cache", *args], cwd=REPO, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env=env)


def _files(store: CacheStore) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(store.root.rglob("*")) if p.is_file()}


def test_the_store_is_listed_as_a_table_that_fits_and_as_pure_json(store):
    table = inv(store)
    assert table.returncode == 0 and table.stderr == "", table.stderr
    lines = table.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), table.stdout
    assert lines[0].startswith("3 entries, 3.0 MiB of the 32.0 GiB bound")
    rows = [line.split()[0] for line in lines if re.match(r"[0-9a-f]{12}  ", line)]
    assert rows == [ORPHAN.digest[:12], PATCHED.digest[:12], NEEDED.digest[:12]]  # the last used first
    assert f"sbx0 {RELEASE}" in table.stdout and "none" in next(line for line in lines if line.startswith(rows[0]))
    wide = inv(store, "--wide", columns=40)
    assert "sm120-allreduce-fusion" in wide.stdout and "SM120 NVIDIA RTX PRO 6000 Blackwell Server" in wide.stdout
    data = json.loads(inv(store, "--json").stdout)
    assert data["store"] == str(store.root) and data["bound"] == 32 << 30 and data["needs_known"] is True
    assert (data["entries_held"], data["bytes_held"]) == (3, (3 << 20) + 5700)
    first = data["entries"][-1]
    assert first["digest"] == NEEDED.digest and first["size"] == 3 << 20 and first["given_by"] == "sbx0"
    assert first["needed_by"] == [{"host": "sbx0", "release": RELEASE}] and first["pruned"] is None
    assert CacheKey.from_json(first["key"]) == NEEDED and first["used"] == "2026-05-28T20:26:40+00:00"


def test_prune_says_what_would_go_then_drops_what_no_kept_release_needs(store):
    before = _files(store)
    dry = inv(store, "--prune", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert {e["digest"]: e["pruned"] for e in json.loads(dry.stdout)["entries"]} == {
        NEEDED.digest: None, PATCHED.digest: None, ORPHAN.digest: "no release kept needs it"}
    assert _files(store) == before
    said = inv(store, "--prune", "-n")
    assert said.returncode == 0 and "would drop 1" in said.stdout and "no release kept" in said.stdout
    done = inv(store, "--prune")
    assert done.returncode == 0 and "2 entries" in done.stdout and "dropped 1" in done.stdout, done.stdout
    assert store.has(NEEDED) and store.has(PATCHED) and not store.has(ORPHAN)


def test_prune_keeps_to_the_bound_after_the_unneeded_go(store):
    small = CacheStore(store.root, total=(3 << 20) + 100)
    goes = {r.entry.digest: r.goes for r in plan(small)[0]}
    assert goes == {ORPHAN.digest: "no release kept needs it", NEEDED.digest: "over the store's bound",
                    PATCHED.digest: None}  # the least recently used of those needed, once the orphan is gone


def test_needs_that_are_not_known_drop_nothing_for_want_of_a_release(store):
    store.needs.path.write_text('{"version": 1, "hosts": {"sbx0": {"r": "not a digest"}}}')
    done = inv(store, "--prune")
    assert done.returncode == 0 and "is not fleet's" in done.stderr and "dropped 0" in done.stdout
    assert store.has(ORPHAN)
    assert "unknown" in inv(store).stdout


@pytest.mark.parametrize(("args", "says"), [(("--dry-run",), "--dry-run says what --prune would drop"),
                                            (("--prun",), "no such option --prun")])
def test_bad_options_are_one_line_exit_2_and_nothing_changes(store, args, says):
    before = _files(store)
    done = inv(store, *args)
    assert done.returncode == 2 and done.stdout == "" and says in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and _files(store) == before


def test_help_reads_nothing(store, tmp_path):
    store.needs.path.write_text("{")  # a read of it would say so
    done = inv(store, "--prune", "--help")
    assert done.returncode == 0 and done.stdout.startswith("Usage: inv cache ") and done.stderr == ""
    assert "Exit codes:" in done.stdout and store.needs.path.read_text() == "{"
    assert not store.needs.path.with_name("needs.json.bad").exists()
