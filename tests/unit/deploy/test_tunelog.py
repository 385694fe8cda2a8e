"""fleet.deploy.tunelog: a search's trials written and read back alike, resumed only by the same search, a broken
or foreign file said and ignored, and removed when the tune is done."""

from __future__ import annotations

import json

from fleet.deploy import tunelog
from fleet.deploy.guided import Seen
from fleet.deploy.searchspace import Dimension, Space
from fleet.deploy.trials import Trial

SPACE = Space((Dimension("max-running-requests", (256, 1024)), Dimension("mem-fraction-static", (0.8, 0.9))), ())
SEEN = [Seen(Trial.of({}), 10.0, full=True, short=12.0),
        Seen(Trial.of({"max-running-requests": 256}), 6.5),
        Seen(Trial.of({"mem-fraction-static": 0.9}), None, crashed=True)]
RECORDS = [{"name": "slo-base", "flags": {}, "outcome": "READY", "rate": 10.0}]


def test_a_journal_reads_back_as_it_was_written(tmp_path):
    digest = tunelog.key("sbx0", "fp", "sha", "ttft_p99=2s", SPACE)
    file = tunelog.path("sbx0", digest, tmp_path)
    tunelog.save(file, digest, SEEN, RECORDS)
    journal, why = tunelog.load(file, digest)
    assert why is None and journal is not None
    assert list(journal.seen) == SEEN and list(journal.records) == RECORDS
    assert [p.name for p in file.parent.iterdir()] == [file.name]  # no temporary left
    tunelog.done(file)
    assert tunelog.load(file, digest) == (None, None)


def test_the_key_changes_with_anything_that_decides_the_answer():
    base = tunelog.key("sbx0", "fp", "sha", "ttft_p99=2s", SPACE)
    narrower = Space(SPACE.dimensions[:1], ())
    others = [tunelog.key("sbx1", "fp", "sha", "ttft_p99=2s", SPACE), tunelog.key("sbx0", "fp2", "sha", "ttft_p99=2s",
              SPACE), tunelog.key("sbx0", "fp", "sha2", "ttft_p99=2s", SPACE),
              tunelog.key("sbx0", "fp", "sha", "ttft_p99=1s", SPACE), tunelog.key("sbx0", "fp", "sha", "ttft_p99=2s",
                                                                                  narrower)]
    assert base == tunelog.key("sbx0", "fp", "sha", "ttft_p99=2s", SPACE) and base not in others
    assert len(set(others)) == len(others)


def test_another_searchs_journal_is_not_resumed(tmp_path):
    file = tmp_path / "j.json"
    tunelog.save(file, "aaaa", SEEN, RECORDS)
    journal, why = tunelog.load(file, "bbbb")
    assert journal is None and why is not None and "another search's" in why


def test_a_broken_journal_is_said_and_the_search_starts_afresh(tmp_path):
    file = tmp_path / "j.json"
    file.write_text("{not json")
    journal, why = tunelog.load(file, "k")
    assert journal is None and why is not None and "unreadable" in why
    file.write_text(json.dumps({"version": 1, "key": "k", "seen": [{"flags": [["x", 1]], "rate": -3, "crashed": False,
                                                                    "full": True, "short": None}], "records": []}))
    journal, why = tunelog.load(file, "k")
    assert journal is None and why is not None and "not a tune journal" in why
    file.write_text(json.dumps({"version": 1, "key": "k", "seen": [{"flags": [["x", {"a": 1}]], "rate": 3,
                                                                    "crashed": False, "full": True, "short": None}],
                                "records": []}))
    assert tunelog.load(file, "k")[0] is None
