"""fleet.deploy.cachestore: entries written whole, read back only for their own key and checksum, bounded."""

from __future__ import annotations

import json
import os
from pathlib import Path

from fleet.deploy.cachekey import CacheKey
from fleet.deploy.cachestore import CacheStore, Entry, Refused


def _key(sm: str = "120", patches: tuple[tuple[str, str], ...] = ()) -> CacheKey:
    return CacheKey(sm=sm, gpu="NVIDIA RTX PRO 6000", driver="580.95.05", cuda="13.0",
                    packages=(("flashinfer-python", "0.6.3"), ("sglang", "0.5.9")), patches=patches,
                    flags=(("--tp-size", "2"),), env=(), venv="/root/ml-env")


def test_an_entry_reads_back_whole_for_its_key_only(tmp_path: Path) -> None:
    store = CacheStore(tmp_path)
    got = store.put(_key(), b"tar bytes", "sbx0")
    assert isinstance(got, Entry) and got.host == "sbx0" and got.data == b"tar bytes"
    assert store.get(_key()) == got
    assert store.get(_key(sm="100")) is None
    assert store.get(_key(patches=(("sm120-allreduce-fusion", "a" * 64),))) is None
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_the_first_host_of_a_key_gives_its_entry(tmp_path: Path) -> None:
    store = CacheStore(tmp_path)
    store.put(_key(), b"first", "sbx0")
    again = store.put(_key(), b"second", "sbx1")
    assert isinstance(again, Entry) and again.data == b"first" and again.host == "sbx0"


def test_a_truncated_entry_is_refused_and_dropped(tmp_path: Path) -> None:
    store = CacheStore(tmp_path)
    store.put(_key(), b"0123456789", "sbx0")
    tar = tmp_path / _key().digest / "cache.tar"
    tar.write_bytes(b"01234")
    got = store.get(_key())
    assert isinstance(got, Refused) and "sha256" in got.reason
    assert store.get(_key()) is None and not store.has(_key())


def test_an_entry_whose_key_file_is_another_keys_is_refused(tmp_path: Path) -> None:
    store = CacheStore(tmp_path)
    store.put(_key(), b"x", "sbx0")
    (tmp_path / _key().digest / "key.json").write_text(json.dumps(_key(sm="100").to_json()))
    got = store.get(_key())
    assert isinstance(got, Refused) and "another key" in got.reason


def test_an_entry_over_the_limit_is_not_stored(tmp_path: Path) -> None:
    store = CacheStore(tmp_path, limit=4)
    got = store.put(_key(), b"12345", "sbx0")
    assert isinstance(got, Refused) and not store.has(_key())


def test_the_store_stays_under_its_total_dropping_the_oldest(tmp_path: Path) -> None:
    store = CacheStore(tmp_path, limit=10, total=15)
    old, new = _key(sm="90"), _key(sm="100")
    store.put(old, b"a" * 10, "h0")
    store.put(new, b"b" * 10, "h1")
    assert not store.has(old) and store.has(new)


def test_the_least_recently_used_entry_goes_first(tmp_path: Path) -> None:
    store = CacheStore(tmp_path, limit=10, total=25)
    a, b, c = _key(sm="90"), _key(sm="100"), _key(sm="120")
    store.put(a, b"a" * 10, "h0")
    store.put(b, b"b" * 10, "h1")
    os.utime(tmp_path / a.digest / "meta.json", (1, 1))
    os.utime(tmp_path / b.digest / "meta.json", (2, 2))
    assert isinstance(store.get(a), Entry)  # a used now: b is the least recently used
    store.put(c, b"c" * 10, "h2")
    assert store.has(a) and not store.has(b) and store.has(c)


def test_an_entry_goes_with_the_last_release_that_needs_it_on_any_host(tmp_path: Path) -> None:
    store = CacheStore(tmp_path)
    old, new, other, orphan = _key(sm="90"), _key(sm="100"), _key(sm="120"), _key(sm="89")
    for key in (old, new, other, orphan):
        store.put(key, b"tar", "sbx0")
    store.needs.started("sbx0", "r1", old.digest)
    store.needs.started("sbx0", "r2", new.digest)
    store.needs.started("sbx1", "r7", other.digest)  # another host's release, not pruned now
    dropped = store.releases_kept("sbx0", {"r2": new.digest, "r3": None})  # r1 pruned on sbx0
    assert sorted(dropped) == sorted([old.digest, orphan.digest])
    assert not store.has(old) and not store.has(orphan) and store.has(new) and store.has(other)
    assert store.releases_kept("sbx1", {}) == [other.digest]  # sbx1 keeps none of it any more


def test_nothing_is_dropped_for_want_of_a_release_when_the_needs_are_not_known(tmp_path: Path) -> None:
    store = CacheStore(tmp_path)
    store.put(_key(), b"tar", "sbx0")
    store.needs.path.write_text("{ torn")
    assert store.unneeded() is None
    assert store.releases_kept("sbx0", {}) == [] and store.has(_key())


def test_an_entry_that_is_not_whole_is_listed_as_never_used_and_pruned_first(tmp_path: Path) -> None:
    store = CacheStore(tmp_path, limit=10, total=15)
    a, b = _key(sm="90"), _key(sm="100")
    store.put(a, b"a" * 10, "h0")
    (tmp_path / a.digest / "meta.json").unlink()  # a controller that died mid-write of an older fleet's entry
    listed = store.entries()
    assert [(e.digest, e.used, e.key) for e in listed][0] == (a.digest, 0.0, a)
    store.put(b, b"b" * 10, "h1")
    assert [e.digest for e in store.entries()] == [b.digest]
