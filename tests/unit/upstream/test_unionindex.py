"""The union of every release's site index: a line placed once names, per release, the site that release's own
index names; written once beside the releases and used only while its digests hold (a corpus made in the test,
real text: sglang 0.5.23's mem_cache/allocation.py, and an older copy of it with lines moved and messages gone)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.logs.releasefit import cached_indexes, fits_by_sites
from fleet.upstream import siteindex, unionindex
from fleet.upstream.siteindex import SiteIndex
from fleet.upstream.unionindex import PerRelease, UnionIndex

SOURCE = Path(__file__).resolve().parents[2] / "fixtures" / "sources" / "sglang-0.5.23-mem_cache-allocation.py.txt"
MODULE = "sglang/srt/mem_cache/allocation.py"


def _release(cache: Path, version: str, text: str) -> Path:
    folder = cache / "sglang" / version
    (folder / MODULE).parent.mkdir(parents=True)
    (folder / MODULE).write_text(text)
    (folder / "release.json").write_text(json.dumps({
        "dist": "sglang", "version": version, "root": str(folder), "wheel": "w.whl", "sha256": "0",
        "wheel_bytes": 1, "files": 1, "bytes": 1}))
    siteindex.load_or_build("sglang", version, folder)
    return folder


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    """0.5.23 as released; '0.5.9' the same file with three blank lines on top (every line moved) and the
    functions from _alloc_extend_loc_with_kv_reuse on gone (their messages are 0.5.23's alone); '0.5.8.post1'
    prints none of it."""
    text = SOURCE.read_text()
    lines = text.split("\n")
    _release(tmp_path, "0.5.23", text)
    _release(tmp_path, "0.5.9", "\n\n\n" + "\n".join(lines[:490]))  # up to _alloc_extend_loc_with_kv_reuse
    _release(tmp_path, "0.5.8.post1", 'raise RuntimeError("another release entirely")\n')
    return tmp_path


def _own(cache: Path) -> PerRelease:
    return PerRelease({v: SiteIndex(siteindex.load_cached("sglang", v, cache / "sglang" / v) or [])
                       for v in ("0.5.8.post1", "0.5.9", "0.5.23")})


def test_a_line_placed_in_the_union_names_the_site_each_releases_own_index_names(cache):
    union = unionindex.build("sglang", cache)
    assert union is not None and union.versions == ("0.5.8.post1", "0.5.9", "0.5.23")
    own = _own(cache)
    sites = siteindex.load_cached("sglang", "0.5.23", cache / "sglang" / "0.5.23") or []
    lines = [s.exception + ": " + s.text.replace("{}", "7") if s.exception else s.text.replace("{}", "7")
             for s in sites] + ["RuntimeError: another release entirely", "ValueError: nothing anyone prints"]
    assert len(lines) == 10  # the file's 8 sites
    for line in lines:
        assert union.place(line) == own.place(line), line
    moved = union.place("RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for "
                        "`--max-running-requests`. req_to_token_pool.available_size()=0, num_reqs=3, ")
    assert {v: s.line for v, s in moved.items()} == {"0.5.9": 347, "0.5.23": 344}  # each release's own line
    assert len(union) < sum(len(i) for i in own.indexes.values())  # a message both print is held once


def test_each_release_finds_a_message_by_its_own_key_word_in_the_union_too(tmp_path):
    # flashinfer 0.6.12's `{} shape {} != expected {}` and sglang's `...{}.shape[0]={} != expected_local_len={}`:
    # a release keys the template by its rarest word; where that is "expected" the line (whose word is
    # "expected_local_len") is not found, where it is "shape" it is
    common = "{} shape {} != expected {}"
    texts = {"0.6.11.post1": [common, "{} shape mismatch in the layout", "{} shape of the scale factor"],
             "0.6.12": [common, "expected {} heads in the cache", "{} expected a contiguous tensor"]}
    for version, messages in texts.items():
        folder = tmp_path / "flashinfer-python" / version
        folder.mkdir(parents=True)
        (folder / "release.json").write_text(json.dumps({
            "dist": "flashinfer-python", "version": version, "root": str(folder), "wheel": "w.whl", "sha256": "0",
            "wheel_bytes": 1, "files": 1, "bytes": 1}))
        # and enough other templates that start with a placeholder for the index to split a line into its words
        messages += [f"{{}} went wrong in step{i} of the plan" for i in range(40)]
        rows = [["flashinfer/norm.py", i + 1, "f", "assert", "AssertionError", t] for i, t in enumerate(messages)]
        siteindex.cache_path(folder).write_text(json.dumps(rows))
    union = unionindex.build("flashinfer-python", tmp_path)
    own = PerRelease({v: SiteIndex(siteindex.load_cached("flashinfer-python", v, tmp_path / "flashinfer-python" / v)
                                   or []) for v in texts})
    line = "AssertionError: apply_cp_reindex post-condition: x.shape[0]=1 != expected_local_len=1 (cp_size=1)"
    assert union is not None and list(own.place(line)) == ["0.6.12"]
    assert union.place(line) == own.place(line)
    plain = "AssertionError: q shape [4] != expected [8]"  # both releases print it
    assert union.place(plain) == own.place(plain) and len(union.place(plain)) == 2


def test_the_releases_a_log_fits_are_the_same_from_the_union_as_from_each_index(cache):
    union = unionindex.build("sglang", cache)
    assert union is not None
    for lines in (["RuntimeError: dLLM FDFO retained KV is missing."], ["RuntimeError: another release entirely"],
                  ["RuntimeError: Prefill out of memory. Try to lower your batch size.",
                   "RuntimeError: dLLM FDFO retained KV is missing."]):
        assert fits_by_sites(lines, "sglang", union) == fits_by_sites(lines, "sglang", _own(cache))


def test_the_union_written_is_loaded_as_built_and_used_by_the_live_reader(cache):
    built = unionindex.build("sglang", cache)
    loaded = unionindex.load("sglang", cache)
    assert isinstance(loaded, UnionIndex) and built is not None
    line = "RuntimeError: Prefill out of memory. Try to lower your batch size."
    assert loaded.place(line) == built.place(line) and len(loaded.place(line)) == 2
    assert isinstance(cached_indexes("sglang", cache), UnionIndex)  # never builds; reads the one written


def test_a_union_whose_sources_changed_since_is_not_used(cache):
    unionindex.build("sglang", cache)
    assert unionindex.load("sglang", cache) is not None
    index = siteindex.cache_path(cache / "sglang" / "0.5.9")
    rows = json.loads(index.read_text())
    index.write_text(json.dumps(rows[:-1]))  # a release re-indexed: a site fewer
    assert unionindex.load("sglang", cache) is None
    assert isinstance(cached_indexes("sglang", cache), PerRelease)  # each release's own index, as before
    unionindex.build("sglang", cache)
    assert unionindex.load("sglang", cache) is not None
    _release(cache, "0.5.22", SOURCE.read_text())  # a release fetched and indexed since
    assert unionindex.load("sglang", cache) is None


@pytest.mark.parametrize("spoil", [
    lambda data: data[: len(data) // 2],  # torn
    lambda data: data.replace(b"alloc_req_slots", b"alloc_req_slotz"),  # altered after it was written
    lambda data: b"not json\n" + data.partition(b"\n")[2],
    lambda data: b"",
])
def test_a_torn_or_altered_union_is_not_used(cache, spoil):
    unionindex.build("sglang", cache)
    path = unionindex.path("sglang", cache)
    path.write_bytes(spoil(path.read_bytes()))
    assert unionindex.load("sglang", cache) is None


GOOD = ["m.py", "raise", "ValueError", "{} is not a quantization here", [[0, 3, None, 0]], ["quantization"]]


def _with_entries(cache: Path, entries: list[object]) -> None:
    """The union's body replaced, its digest made to fit (what a file written by something else looks like)."""
    import hashlib

    path = unionindex.path("sglang", cache)
    head = json.loads(path.read_bytes().partition(b"\n")[0])
    body = json.dumps({"versions": ["0.5.23"], "entries": entries}).encode()
    head["sha256"] = hashlib.sha256(body).hexdigest()
    path.write_bytes(json.dumps(head).encode() + b"\n" + body)


@pytest.mark.parametrize("bad", [
    [*GOOD[:4], [[0, "3", None, 0]], GOOD[5]],  # a line as text
    [*GOOD[:4], [[7, 3, None, 0]], GOOD[5]],  # no such release
    [*GOOD[:4], [[0, 3, None, 1]], GOOD[5]],  # no such key word
    [*GOOD[:4], [[0, 3, None]], GOOD[5]],
    [*GOOD[:4], [], GOOD[5]],
    [*GOOD[:2], 5, *GOOD[3:]],
    [*GOOD[:5], [12]],
    GOOD[:2],
    "m.py",
])
def test_a_union_of_the_wrong_shape_with_a_right_digest_is_not_used_and_nothing_crashes(cache, bad):
    unionindex.build("sglang", cache)
    _with_entries(cache, [GOOD])
    good = unionindex.load("sglang", cache)  # the same file with the entry right is read
    assert good is not None and good.place("ValueError: fp5 is not a quantization here")["0.5.23"].line == 3
    _with_entries(cache, [GOOD, bad])
    assert unionindex.load("sglang", cache) is None


def test_no_release_with_an_index_is_no_union(tmp_path):
    assert unionindex.build("sglang", tmp_path) is None and unionindex.load("sglang", tmp_path) is None
