"""`inv classify` told no release finds it in the log: traceback excerpts written from the real releases' own files
(the frame, the release's source line under it, the exception line) fit their release, and classify as told.

A smaller sample than bench/bench_release_fit.py's, with another seed (its figures: 320 excerpts, 0.472 -> 0.997)."""

from __future__ import annotations

import random

import pytest
import yaml

from fleet.logs import coverage as rulecoverage
from fleet.logs.bysite import SiteClassifier
from fleet.logs.classify import classify_text
from fleet.logs.release import clues
from fleet.logs.releasefit import fits
from fleet.logs.rules import default_rules
from fleet.upstream import corpus as upstream
from fleet.upstream.siteindex import IndexedSite, SiteIndex
from fleet.upstream.sourcetext import sites

PER_RELEASE, SEED = 6, 6262


@pytest.fixture(scope="module")
def sampled(matrix):
    """(release, excerpt, that release's startup-site classifier) for a seeded sample of each release's raises."""
    modules = yaml.safe_load(rulecoverage.MODULES_FILE.read_text())
    rng = random.Random(SEED)
    out, classifiers = [], {}
    for version in matrix.sglang:
        root = upstream.tree(upstream.require("sglang", version))
        found = []
        for m in modules[version]:
            lines = (root / m).read_text(encoding="utf-8", errors="replace").split("\n")
            found += [(m, s, lines) for s in sites("\n".join(lines))]
        classifiers[version] = SiteClassifier(SiteIndex(
            IndexedSite("sglang", version, m, s.line, s.function, s.kind, s.exception, s.text) for m, s, _ in found))
        raised = [f for f in found if f[1].kind in ("raise", "assert")]
        for m, s, lines in rng.sample(raised, PER_RELEASE):
            where = f"/usr/local/lib/python3.12/dist-packages/{m}"
            frame = f'  File "{where}", line {s.line}, in {s.function or "<module>"}'
            text = f"Traceback (most recent call last):\n{frame}\n    {lines[s.line - 1].strip()}\n{s.as_line()}\n"
            out.append((version, text))
    return out, classifiers


def test_each_excerpt_fits_its_own_release(sampled):
    excerpts, _ = sampled
    missed = [(v, t) for v, t in excerpts if (f := fits(clues(t), "sglang")) is None or v not in f.versions]
    assert not missed, missed[:3]


def test_told_nothing_the_found_release_classifies_as_the_right_one_would(sampled):
    excerpts, classifiers = sampled
    rules = default_rules()
    before = after = 0
    for version, text in excerpts:
        told = classify_text(text, rules, classifiers[version]).log_class
        pick = fits(clues(text), "sglang").pick
        before += classify_text(text, rules).log_class == told
        after += classify_text(text, rules, classifiers[pick]).log_class == told
    assert after / len(excerpts) >= 0.95 > before / len(excerpts), (before, after, len(excerpts))
