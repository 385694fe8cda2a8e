"""The site index of every cached release: which lack one, and building them with progress (a corpus made in the
test, real text: sglang 0.5.23's mem_cache/allocation.py)."""

from __future__ import annotations

import json
from pathlib import Path

from fleet.progress import Live
from fleet.upstream import indexes, siteindex

SOURCE = Path(__file__).resolve().parents[2] / "fixtures" / "sources" / "sglang-0.5.23-mem_cache-allocation.py.txt"
MODULE = "sglang/srt/mem_cache/allocation.py"


def _release(cache: Path, dist: str, version: str) -> Path:
    folder = cache / dist / version
    (folder / MODULE).parent.mkdir(parents=True)
    (folder / MODULE).write_text(SOURCE.read_text())
    (folder / "release.json").write_text(json.dumps({
        "dist": dist, "version": version, "root": str(folder), "wheel": "w.whl", "sha256": "0",
        "wheel_bytes": 1, "files": 1, "bytes": 1}))
    return folder


def test_missing_names_each_release_without_an_index_oldest_first(tmp_path):
    for version in ("0.5.23", "0.5.9", "0.5.10.post1"):
        _release(tmp_path, "sglang", version)
    (tmp_path / "sglang" / "notes").mkdir()  # not a release
    siteindex.load_or_build("sglang", "0.5.23", tmp_path / "sglang" / "0.5.23")
    assert indexes.missing(tmp_path) == [("sglang", "0.5.9"), ("sglang", "0.5.10.post1")]


def test_build_missing_writes_each_index_says_where_it_stands_and_builds_nothing_twice(tmp_path):
    for version in ("0.5.9", "0.5.23"):
        _release(tmp_path, "sglang", version)
    said: list[str] = []
    built = indexes.build_missing(tmp_path, progress=said.append, workers=2)
    assert [(p, v) for p, v, _ in built] == [("sglang", "0.5.9"), ("sglang", "0.5.23")]
    assert all(n > 5 for _, _, n in built)  # allocation.py's raise and logger.error sites
    live = [s for s in said if isinstance(s, Live)]
    assert live[0] == "indexing the sites of 2 releases" and len(live) == 3
    assert {s.split(" (")[0] for s in live[1:]} == {"indexed sglang 0.5.9's sites", "indexed sglang 0.5.23's sites"}
    # both releases hold the same module: read once for both
    assert said[-1].startswith("indexed the sites of 2 releases (1 distinct module of 2) in ")
    assert not isinstance(said[-1], Live)
    assert siteindex.cache_path(tmp_path / "sglang" / "0.5.9").is_file()
    assert indexes.missing(tmp_path) == [] and indexes.build_missing(tmp_path, progress=said.append) == []


def test_an_index_built_with_the_others_is_the_one_built_alone(tmp_path):
    # 0.5.23's file in two releases, a changed copy in a third, and a module only one release has
    text = SOURCE.read_text()
    for version in ("0.5.9", "0.5.22", "0.5.23"):
        _release(tmp_path, "sglang", version)
    changed = tmp_path / "sglang" / "0.5.22" / MODULE
    changed.write_text("\n" + text.replace("runs out of memory", "ran out of memory"))
    (changed.parent / "other.py").write_text('def f():\n    raise ValueError(f"page size {n} is not supported")\n')
    built = indexes.build_missing(tmp_path, workers=2)
    assert [n for _, _, n in built] == [8, 9, 8]  # the file's 8 sites, and the other module's
    for version in ("0.5.9", "0.5.22", "0.5.23"):
        root = tmp_path / "sglang" / version
        assert siteindex.load_cached("sglang", version, root) == siteindex.build("sglang", version, root)
