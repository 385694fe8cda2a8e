"""Versions and ranges compared as PEP 440 says (fleet.upstream.versions)."""

import pytest

from fleet.upstream import versions
from fleet.upstream.flags import Flag, build


def test_a_post_release_sorts_after_its_release_and_a_pre_release_before():
    ordered = ["0.6.16.dev1", "0.6.16rc1", "0.6.16", "0.6.16.post1", "0.6.16.post4", "0.6.17rc1", "0.6.17"]
    assert sorted(reversed(ordered), key=versions.version_key) == ordered


def test_a_post_release_is_in_a_range_that_starts_after_its_release():
    assert versions.in_range("0.6.16.post4", ">0.6.16")
    assert not versions.in_range("0.6.16", ">0.6.16")
    assert versions.in_range("0.6.16.post4", ">=0.6.16,<0.6.17")
    assert not versions.in_range("0.6.16.post4", "<=0.6.16")
    assert versions.in_range("0.5.8.post1", ">0.5.8,<0.5.9")


def test_a_pre_release_is_before_its_release():
    assert versions.in_range("0.6.17rc1", "<0.6.17")
    assert versions.in_range("0.6.17.dev3", "<0.6.17rc1")
    assert not versions.in_range("0.6.17rc1", ">=0.6.17")


def test_equality_reads_local_labels_padding_and_wildcards_as_pep_440():
    assert versions.in_range("2.9.1+cu130", "==2.9.1")
    assert versions.in_range("2.9.1+cu130", ">=2.9.1,<=2.9.1")
    assert not versions.in_range("2.9.1+cu130", ">2.9.1")
    assert versions.in_range("1.0", "==1.0.0")
    assert versions.in_range("0.5.23", "==0.5.*")
    assert versions.in_range("0.6.3", "~=0.6.1") and not versions.in_range("0.7.0", "~=0.6.1")
    assert not versions.in_range("0.6.16.post4", "==0.6.16")


@pytest.mark.parametrize("bad", ["<<0.6", "0.6", ">=0.5.8;<0.6", ">= x", ""])
def test_a_bad_clause_is_named(bad):
    with pytest.raises(ValueError, match="bad version range clause"):
        versions.parse_range(bad)


@pytest.mark.parametrize("bad", ["", "latest", "0.5.x", "1..2"])
def test_a_bad_version_is_named(bad):
    with pytest.raises(ValueError, match="not a version"):
        versions.version_key(bad)


def test_the_flag_table_places_a_post_release_after_its_release():
    t = build([("0.5.9", {"a": Flag("a", False)}), ("0.5.9.post1", {"b": Flag("b", False)}),
               ("0.5.10", {"b": Flag("b", False)})])
    assert t.versions == ["0.5.9", "0.5.9.post1", "0.5.10"]
    assert t.release_for("0.5.9.post2") == "0.5.9.post1"
    assert t.problem("b", "0.5.9.post1") is None
    assert t.problem("b", "0.5.9") == "--b needs sglang >= 0.5.9.post1 (host has 0.5.9)"
