"""fleet.cli.words: counts worded as an operator reads them."""

from fleet.cli import words


def test_one_is_singular_and_every_other_count_plural():
    assert [words.count(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert words.count(1, "batch", "batches") == "1 batch" and words.count(3, "batch", "batches") == "3 batches"
