"""The site index: a line (or a traceback's last line) resolves to the raise / log site that printed it, read from
a real release's file (sglang 0.5.23's mem_cache/allocation.py, copied into tests/fixtures/sources)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.upstream import siteindex
from fleet.upstream.siteindex import IndexedSite, SiteIndex

SOURCE = Path(__file__).resolve().parents[2] / "fixtures" / "sources" / "sglang-0.5.23-mem_cache-allocation.py.txt"
MODULE = "sglang/srt/mem_cache/allocation.py"


@pytest.fixture
def release(tmp_path: Path) -> Path:
    """A release tree with the real file where the wheel has it."""
    (tmp_path / "sglang" / "srt" / "mem_cache").mkdir(parents=True)
    (tmp_path / MODULE).write_text(SOURCE.read_text())
    return tmp_path


@pytest.fixture
def index(release: Path) -> SiteIndex:
    return SiteIndex(siteindex.build("sglang", "0.5.23", release))


def test_the_issue_line_resolves_to_alloc_req_slots_with_release_file_line_and_function(index):
    line = ("RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for "
            "`--max-running-requests`. req_to_token_pool.available_size()=0, num_reqs=3, ")
    site = index.locate(line)
    assert site is not None
    assert site.where() == "sglang 0.5.23 srt/mem_cache/allocation.py:344 (alloc_req_slots)"
    assert (site.kind, site.exception) == ("raise", "RuntimeError")


def test_placeholders_take_any_value_and_the_longer_fixed_text_wins(index):
    prefill = index.locate("RuntimeError: Prefill out of memory. Try to lower your batch size.")
    decode = index.locate("Decode out of memory. Try to lower your batch size.")  # no exception prefix: still found
    plain = index.locate("RuntimeError: Out of memory. Try to lower your batch size.")
    assert (prefill.function, decode.function, plain.function) == (
        "alloc_paged_token_slots_extend", "alloc_paged_token_slots_decode", "alloc_token_slots")


@pytest.mark.parametrize("line", [
    "",
    "RuntimeError: ",
    "[2026-12-02 10:00:00 TP0] Load weight begin. avail mem=78.52 GB",
    "RuntimeError: something no release says, out of memory or not",
    "x" * 1_000_000,  # a hostile host's megabyte line: read only so far, and no match
    "RuntimeError: alloc_req_slots" + " runs" * 200_000,
])
def test_lines_no_site_printed_resolve_to_nothing(index, line):
    assert index.locate(line) is None


def test_a_template_with_too_little_fixed_text_is_not_indexed():
    sites = [IndexedSite("sglang", "0.5.23", MODULE, 1, None, "raise", "ValueError", "{}: {}"),
             IndexedSite("sglang", "0.5.23", MODULE, 2, "f", "raise", "ValueError", "Invalid quantization {}")]
    index = SiteIndex(sites)
    assert index.unindexed == 1
    assert index.locate("ValueError: abc: def") is None
    assert index.locate("ValueError: Invalid quantization fp5").line == 2


def test_printf_placeholders_of_logged_messages_take_any_value():
    sites = [IndexedSite("sglang", "0.5.23", MODULE, 7, "f", "log", None, "Failed to abort request %s during cleanup"),
             IndexedSite("sglang", "0.5.23", MODULE, 8, "g", "log", None, "Loaded %(n)d shards in %.2f s from disk")]
    index = SiteIndex(sites)
    assert index.locate("Failed to abort request 3f9c during cleanup").line == 7
    assert index.locate("Loaded 12 shards in 3.41 s from disk").line == 8
    assert index.locate("Failed to abort request") is None  # the fixed text after the placeholder is missing


def test_the_same_message_in_two_places_prefers_the_site_raising_the_lines_exception():
    sites = [IndexedSite("sglang", "0.5.23", MODULE, 1, "a", "log", None, "Weights are not ready after {}"),
             IndexedSite("sglang", "0.5.23", MODULE, 9, "b", "raise", "TimeoutError", "Weights are not ready after {}")]
    assert SiteIndex(sites).locate("TimeoutError: Weights are not ready after 300 s").line == 9


def test_modules_are_the_servers_not_tests_nor_the_diffusion_runtime(tmp_path):
    for rel in ("sglang/launch_server.py", "sglang/srt/a/b.py", "sglang/multimodal_gen/x.py", "sglang/test/t.py",
                "flashinfer/jit/core.py", "flashinfer/data/csrc/gen.py", "flashinfer/gdn_prefill.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert siteindex.modules("sglang", tmp_path) == ["sglang/launch_server.py", "sglang/srt/a/b.py"]
    assert siteindex.modules("flashinfer-python", tmp_path) == ["flashinfer/gdn_prefill.py", "flashinfer/jit/core.py"]


def test_a_module_this_python_cannot_parse_is_skipped_not_fatal(release):
    (release / "sglang" / "srt" / "broken.py").write_text("def f(:\n")
    sites = siteindex.build("sglang", "0.5.23", release)
    assert {s.module for s in sites} == {MODULE} and len(sites) == 8


def test_the_cache_is_written_once_read_back_and_rebuilt_when_corrupt(release):
    built = siteindex.load_or_build("sglang", "0.5.23", release)
    path = siteindex.cache_path(release)
    assert json.loads(path.read_text())[0][:2] == [MODULE, 170]
    (release / MODULE).write_text("")  # a second call reads the cache, not the sources
    assert siteindex.load_or_build("sglang", "0.5.23", release) == built
    path.write_text('[["truncated"')
    assert siteindex.load_or_build("sglang", "0.5.23", release) == []  # rebuilt from the (now empty) sources
    assert not [p for p in release.iterdir() if p.name.startswith(".fleet-sites-")]  # no temporary left behind


def test_a_cache_that_cannot_be_written_still_answers_and_leaves_no_temporary(release, monkeypatch):
    def refuse(src: str, dst: object) -> None:
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(siteindex.os, "replace", refuse)
    assert len(siteindex.load_or_build("sglang", "0.5.23", release)) == 8
    assert sorted(p.name for p in release.iterdir()) == ["sglang"]


def test_a_line_crafted_to_backtrack_costs_one_pass():
    pieces = " {} ".join(f"piece{i}" for i in range(12))  # a template with many placeholders
    index = SiteIndex([IndexedSite("sglang", "0.5.23", MODULE, 1, "f", "raise", "ValueError", "zyxwvu " + pieces)])
    hostile = "ValueError: zyxwvu " + " ".join(f"piece{i % 11}" for i in range(400))  # never piece11
    assert index.locate(hostile) is None
    assert index.locate("ValueError: zyxwvu " + " x ".join(f"piece{i}" for i in range(12))).line == 1


def test_loading_pauses_the_cyclic_collector_and_puts_it_back_as_it_was():
    import gc

    assert gc.isenabled()
    with pytest.raises(ValueError), siteindex.collector_paused():
        assert not gc.isenabled()
        raise ValueError("a torn index")
    assert gc.isenabled()
    gc.disable()  # a caller that paused it itself keeps it paused
    try:
        with siteindex.collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
