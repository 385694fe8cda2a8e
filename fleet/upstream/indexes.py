"""The site index of every release the upstream corpus holds: which releases lack one, and building those.

`inv upstream` builds them after fetching; `inv classify` told no release builds the missing ones on first need
(a log whose release is unknown is placed among every release, fleet/logs/releasefit.py). Each index is written
beside its release (siteindex.load_or_build); a release takes seconds, once.

    for package, version in missing():      # ("sglang", "0.5.14"), ...
    built = build_missing(progress=say)     # -> [("sglang", "0.5.14", 41233 sites), ...]
    joined = union("sglang", progress=say)  # every release's sites in one index (unionindex.py)
"""

from __future__ import annotations

import concurrent.futures
import os
import time
from pathlib import Path

from fleet.progress import Live, Progress, quiet
from fleet.upstream import corpus, siteindex, unionindex
from fleet.upstream.versions import is_version, version_key

PACKAGES = tuple(siteindex.MODULE_GLOBS)  # sglang, flashinfer-python


def versions(package: str, cache: Path | None = None) -> list[str]:
    """The releases of `package` the corpus holds, oldest first."""
    folder = (cache or corpus.cache_dir()) / package
    try:
        found = [p.name for p in folder.iterdir() if is_version(p.name) and (p / "release.json").is_file()]
    except OSError:
        return []
    return sorted(found, key=version_key)


def missing(cache: Path | None = None, packages: tuple[str, ...] = PACKAGES) -> list[tuple[str, str]]:
    """(package, version) of each cached release with no index file beside it, oldest first per package."""
    out: list[tuple[str, str]] = []
    for package in packages:
        for version in versions(package, cache):
            release = corpus.cached(package, version, cache)
            if release is not None and not siteindex.cache_path(corpus.tree(release, cache)).is_file():
                out.append((package, version))
    return out


def build_missing(cache: Path | None = None, packages: tuple[str, ...] = PACKAGES, progress: Progress = quiet,
                  workers: int | None = None) -> list[tuple[str, str, int]]:
    """Build (and write beside each release) the indexes `missing` names, `workers` releases at a time (a
    process each: reading a release is CPU-bound; the machine's cores by default); (package, version, sites) for
    each, in `missing`'s order. Progress: a Live line as each release is done, then one line for the whole."""
    todo = missing(cache, packages)
    if not todo:
        return []
    start = time.monotonic()
    sites: dict[tuple[str, str], int] = {}
    workers = max(1, min(len(todo), workers or os.cpu_count() or 1))
    progress(Live(f"indexing the sites of {len(todo)} release{'s' if len(todo) > 1 else ''}"))
    with concurrent.futures.ProcessPoolExecutor(workers) as pool:
        running = {pool.submit(_build, package, version, cache): (package, version) for package, version in todo}
        for done in concurrent.futures.as_completed(running):
            package, version = running[done]
            found = done.result()
            if found is not None:
                sites[(package, version)] = found
            progress(Live(f"indexed {package} {version}'s sites ({len(sites)}/{len(todo)})"))
    built = [(p, v, sites[(p, v)]) for p, v in todo if (p, v) in sites]
    if built:
        progress(f"indexed the sites of {len(built)} release{'s' if len(built) > 1 else ''} "
                 f"in {time.monotonic() - start:.0f} s (kept beside each release in {cache or corpus.cache_dir()})")
    return built


def union(package: str, cache: Path | None = None, progress: Progress = quiet) -> unionindex.UnionIndex | None:
    """The union of every cached release's site index of `package` (fleet/upstream/unionindex.py): the one written
    beside the releases when it is current, else built from them and written (a second or two, said); None when
    no release of it has an index."""
    found = unionindex.load(package, cache)
    if found is not None or not unionindex.sources(package, cache):
        return found
    start = time.monotonic()
    progress(Live(f"joining the site indexes of {package}'s releases"))
    found = unionindex.build(package, cache)
    if found is not None:
        progress(f"joined the site indexes of {len(found.versions)} {package} releases ({len(found)} distinct sites) "
                 f"in {time.monotonic() - start:.1f} s")
    return found


def _build(package: str, version: str, cache: Path | None) -> int | None:
    """One release's index, built and written beside it; its number of sites (None: the release is gone)."""
    release = corpus.cached(package, version, cache)
    if release is None:
        return None
    return len(siteindex.load_or_build(package, version, corpus.tree(release, cache)))
