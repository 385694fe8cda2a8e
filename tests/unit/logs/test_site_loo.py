"""bench/bench_site_loo.py's held-out logic (issue 51): a group is held out with its message family, the
alternatives only it taught are dropped, and --novel scores only the messages no other group holds."""

from __future__ import annotations

import benchmodule
import pytest

from fleet.logs import bysite


@pytest.fixture(scope="module")
def loo():
    return benchmodule.load("bench_site_loo")


def test_words_leave_out_placeholders_and_short_words(loo):
    assert loo.words("Unsupported dtype: {} on %s at it") == frozenset({"unsupported", "dtype"})


def test_a_message_reworded_in_another_release_is_kin_and_an_unrelated_one_is_not(loo):
    bags = {("fresh", 0): loo.words("Cannot prefetch startup weights from state {}"),
            ("fresh6", 1): loo.words("Cannot prepare startup weights from state {}"),  # 5 of 7 words: kin
            ("fresh6", 2): loo.words("page_size must be divisible by 64"),
            ("fresh2", 3): loo.words("")}  # no words: kin of nothing
    assert loo.family("fresh", bags, 0.5) == {("fresh", 0), ("fresh6", 1)}
    assert loo.family("fresh", bags, 1.01) == {("fresh", 0)}  # above 1: no family, the old estimate
    assert loo.family("fresh6", bags, 0.5) == {("fresh", 0), ("fresh6", 1), ("fresh6", 2)}


def test_only_alternatives_that_match_the_held_out_sites_alone_are_learned_from_them(loo):
    held = {("fresh", 0), ("fresh6", 1)}  # fresh and its kin
    matches = {(0, "text", 0): {("fresh", 0)},  # its own site only: learned from it
               (0, "text", 1): {("fresh", 0), ("fresh6", 1)},  # its site and its kin: learned from that message
               (0, "not_text", 0): {("fresh", 0), ("fresh2", 5)},  # also another group's site: kept
               (1, "text", 0): {("fresh6", 1)}}  # its kin only, none of its own sites: not learned from it
    assert loo.learned(matches, held, "fresh") == {(0, "text", 0), (0, "text", 1)}


def _spec() -> bysite.SiteClassesFile:
    return bysite.SiteClassesFile(areas=[], classes=[
        bysite.SiteClassSpec(name="a", log_class="CUDA_OOM", text=["out of memory", "OOM"], not_text=["kv cache"],
                             explanation="x", remedy="y"),
        bysite.SiteClassSpec(name="b", log_class="CONFIG_REFUSED", text=["refused"], explanation="x", remedy="y")])


def test_a_held_out_entry_loses_its_dropped_alternatives_and_one_left_with_no_text_fits_nothing(loo):
    spec = _spec()
    held = loo.held_out(spec, {(0, "text", 1), (0, "not_text", 0), (1, "text", 0)})
    assert held.classes[0].text == ["out of memory"] and held.classes[0].not_text == []
    assert held.classes[1].text == [loo.NEVER]  # not None: an entry with no text would fit every site
    assert spec.classes[0].text == ["out of memory", "OOM"] and spec.classes[1].text == ["refused"]  # a copy
    classes = bysite.SiteClasses(held, "held")
    site = bysite.IndexedSite("sglang", "0.5.23", "m.py", 1, "f", "raise", "ValueError", "refused: kv cache OOM")
    assert classes.rule_for(site) is None


def test_novel_means_no_other_group_holds_the_text(loo):
    texts = {"fresh": {"a", "b"}, "fresh2": {"b"}, "0.5.23": {"c"}}
    assert loo.novel("a", "fresh", texts)
    assert not loo.novel("b", "fresh", texts)  # fresh2 holds it too
    assert not loo.novel("c", "fresh", texts)
    assert loo.novel("c", "0.5.23", texts)
