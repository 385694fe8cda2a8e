"""The sandbox image takes its Debian mirrors from the machine (deb822 and one-line formats)."""

from __future__ import annotations

from sandbox import image


def test_mirrors_come_from_both_source_formats(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text("deb http://m1/debian bookworm main contrib # c\n"
                                           "deb-src http://m1/debian bookworm main\n"
                                           "deb https://other/repo stable main\n")
    (tmp_path / "sources.list.d/debian.sources").write_text(
        "Types: deb\nURIs: http://m2/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\n"
        "Types: deb\nURIs: https://nodesource/node\nSuites: nodistro\nComponents: main\n\n"
        "Types: deb\nURIs: http://m3/debian\nSuites: bookworm\nEnabled: no\n")
    assert image.mirror_lines(tmp_path) == [
        "deb http://m1/debian bookworm main contrib",
        "deb http://m2/debian bookworm main",
        "deb http://m2/debian bookworm-updates main",
    ]


def test_the_cache_key_follows_the_recipe():
    key = image.recipe_key()
    assert image.recipe_key(image.PACKAGES) == key
    assert image.recipe_key((*image.PACKAGES, "strace")) != key
