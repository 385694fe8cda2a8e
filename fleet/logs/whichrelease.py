"""Which releases wrote a log, told none: the answer `inv classify FILE` classifies with and names.

The log's own clues (fleet/logs/release.py: versions, traceback frames, echoed arguments) are matched against the
corpus first (fleet/logs/releasefit.fits); with none, its exception lines that only a catch-all rule names are
placed among the sites of every release (releasefit.fits_by_sites over their union, fleet/upstream/unionindex.py).
A release named by an option wins.

    found = find(text, rules)           # -> [ReleaseFit("sglang", ("0.5.22", "0.5.23"), ...)]
    used(found, "sglang")               # -> "0.5.23"
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fleet.logs.classify import catch_all_lines
from fleet.logs.release import clues
from fleet.logs.releasefit import ReleaseFit, cached_indexes, fits, fits_by_sites
from fleet.logs.rules import RuleSet
from fleet.upstream.unionindex import Placer

Indexes = Callable[[str], Placer]  # package -> its releases' sites (the union of their indexes, or each one's)


def find(text: str, rules: RuleSet, sglang: str | None = None, flashinfer: str | None = None,
         indexes_of: Indexes | None = None, cache: Path | None = None) -> list[ReleaseFit]:
    """For each package not named (a named release wins), the cached releases the log's own clues fit; with no
    clue, those whose site indexes (`indexes_of`, the cached ones by default) print its exception lines."""
    found_clues = clues(text)
    wanted = [p for p, named in (("sglang", sglang), ("flashinfer-python", flashinfer)) if named is None]
    found = [f for f in (fits(found_clues, p, cache) for p in wanted) if f is not None] if found_clues else []
    lines: list[str] | None = None
    for package in wanted:
        if any(f.package == package and f.versions for f in found):
            continue
        lines = lines if lines is not None else catch_all_lines(text, rules)
        if not lines:
            break
        placed = indexes_of(package) if indexes_of is not None else cached_indexes(package, cache)
        by_sites = fits_by_sites(lines, package, placed)
        if by_sites is not None:
            found = [f for f in found if f.package != package] + [by_sites]
    return found


def used(found: list[ReleaseFit], package: str) -> str | None:
    """The release of `package` to classify with: the newest that fits, None when none was found."""
    return next((f.pick for f in found if f.package == package), None)
