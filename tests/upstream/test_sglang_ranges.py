"""The committed range table (playbooks/upstream/sglang-ranges.yaml) against the real sglang wheels: each range's
words are in the file it names of every release it holds on, and not in that file of the release before."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.upstream import corpus as upstream
from fleet.upstream import flags as sglang_cli
from fleet.upstream import ranges as sglang_ranges
from fleet.upstream.versions import version_key

RANGES = sglang_ranges.default_ranges()


def _text(version: str, path: str) -> str:
    return (Path(upstream.require("sglang", version).root) / path).read_text()


@pytest.mark.parametrize("flag", list(RANGES.ranges))
def test_each_range_is_said_by_every_release_it_holds_on(flag, matrix):
    ranged = RANGES.ranges[flag]
    first, last = ranged.releases
    on = [v for v in matrix.sglang if version_key(first) <= version_key(v) <= version_key(last)]
    assert on and on[0] == first and on[-1] == last
    assert [v for v in on if ranged.says not in _text(v, ranged.source(v))] == []
    before = [v for v in matrix.sglang if version_key(v) < version_key(first)]
    if before:  # the range begins where the corpus says it does
        assert ranged.says not in _text(before[-1], ranged.source(first))


@pytest.mark.parametrize("flag", list(RANGES.ranges))
def test_each_ranged_flag_is_a_number_in_the_flag_table(flag):
    span = sglang_cli.default_table().flags[flag]
    assert span.type in ("int", "float") and not span.switch
