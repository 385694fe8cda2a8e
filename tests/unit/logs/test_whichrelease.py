"""Which release wrote a log, told none: a pasted exception line is placed among the releases' site indexes (real
text: sglang 0.5.23's mem_cache/allocation.py, copied into tests/fixtures/sources), a named release wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.logs.rules import default_rules
from fleet.logs.whichrelease import find, used
from fleet.upstream import siteindex
from fleet.upstream.siteindex import SiteIndex
from fleet.upstream.unionindex import PerRelease

SOURCE = Path(__file__).resolve().parents[2] / "fixtures" / "sources" / "sglang-0.5.23-mem_cache-allocation.py.txt"
MODULE = "sglang/srt/mem_cache/allocation.py"
LINE = "[2026-12-04 10:00:00 TP0] RuntimeError: dLLM FDFO retained KV is missing.\n"  # allocation.py:513


@pytest.fixture
def release_index(tmp_path: Path) -> SiteIndex:
    (tmp_path / MODULE).parent.mkdir(parents=True)
    (tmp_path / MODULE).write_text(SOURCE.read_text())
    return SiteIndex(siteindex.build("sglang", "0.5.23", tmp_path))


def test_a_pasted_line_is_placed_in_the_releases_whose_sites_print_it(release_index):
    placed = {"sglang": PerRelease({"0.5.9": SiteIndex([]), "0.5.23": release_index}),
              "flashinfer-python": PerRelease({})}
    found = find(LINE, default_rules(), indexes_of=placed.__getitem__)
    (fit,) = found
    assert (fit.package, fit.versions, used(found, "sglang")) == ("sglang", ("0.5.23",), "0.5.23")
    assert fit.reasons == ("1 of 1 exception line printed by its sites (2 releases indexed)",)
    assert used(found, "flashinfer-python") is None


def test_every_release_that_prints_it_is_named_and_the_newest_used(release_index):
    placed = {"sglang": PerRelease({"0.5.22": release_index, "0.5.23": release_index}),
              "flashinfer-python": PerRelease({})}
    found = find(LINE, default_rules(), indexes_of=placed.__getitem__)
    assert [(f.versions, f.pick) for f in found] == [(("0.5.22", "0.5.23"), "0.5.23")]


def test_a_release_named_by_an_option_is_not_looked_for(release_index):
    asked: list[str] = []

    def indexes_of(package: str) -> PerRelease:
        asked.append(package)
        return PerRelease({"0.5.23": release_index} if package == "sglang" else {})
    assert find(LINE, default_rules(), sglang="0.5.9", indexes_of=indexes_of) == []
    assert asked == ["flashinfer-python"]  # only the package no option named


def test_a_line_a_precise_rule_names_needs_no_index():
    def indexes_of(package: str) -> PerRelease:
        raise AssertionError(f"no index is read for a line a rule names ({package})")
    text = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert find(text, default_rules(), indexes_of=indexes_of) == []
