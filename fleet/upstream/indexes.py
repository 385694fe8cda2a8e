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
import hashlib
import os
import time
from pathlib import Path

from fleet.progress import Live, Progress, quiet
from fleet.upstream import corpus, siteindex, unionindex
from fleet.upstream.siteindex import IndexedSite
from fleet.upstream.versions import is_version, version_key

PACKAGES = tuple(siteindex.MODULE_GLOBS)  # sglang, flashinfer-python
_CHUNK = 64  # modules a worker reads at a time


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
    """Build (and write beside each release) the indexes `missing` names, `workers` processes reading modules at
    a time (reading Python is CPU-bound; the machine's cores by default); (package, version, sites) for each, in
    `missing`'s order. A module whose text another release has too is read once for all of them (a release
    repeats most of the one before it: 803 MB of modules in the corpus, 526 MB distinct). Progress: a Live line
    as each release is done, then one line for the whole."""
    todo = missing(cache, packages)
    if not todo:
        return []
    start = time.monotonic()
    progress(Live(f"indexing the sites of {len(todo)} release{'s' if len(todo) > 1 else ''}"))
    plans: dict[tuple[str, str], tuple[Path, list[tuple[str, str]]]] = {}  # release -> root, [(module, digest)]
    texts: dict[str, Path] = {}  # digest -> one module with that text
    for package, version in todo:
        release = corpus.cached(package, version, cache)
        if release is None:
            continue
        root = corpus.tree(release, cache)
        plan = [(m, hashlib.sha256((root / m).read_bytes()).hexdigest()) for m in siteindex.modules(package, root)]
        plans[(package, version)] = (root, plan)
        for module, digest in plan:
            texts.setdefault(digest, root / module)
    found: dict[str, list[tuple[int, str | None, str, str | None, str]]] = {}
    waiting = {key: {d for _, d in plan} for key, (_, plan) in plans.items()}
    sites: dict[tuple[str, str], int] = {}
    workers = max(1, min(len(texts) // _CHUNK + 1, workers or os.cpu_count() or 1))
    chunks = [list(texts)[i:i + _CHUNK] for i in range(0, len(texts), _CHUNK)]  # oldest releases' modules first
    def finish() -> None:  # each release whose every module is read
        for key in [k for k, left in waiting.items() if not left]:
            del waiting[key]
            sites[key] = _save(key, *plans[key], found)
            progress(Live(f"indexed {key[0]} {key[1]}'s sites ({len(sites)}/{len(todo)})"))
    finish()
    with concurrent.futures.ProcessPoolExecutor(workers) as pool:
        running = [pool.submit(_read, [texts[d] for d in chunk]) for chunk in chunks]
        for chunk, done in zip(chunks, running, strict=True):
            found.update(zip(chunk, done.result(), strict=True))
            for left in waiting.values():
                left.difference_update(chunk)
            finish()
    built = [(p, v, sites[(p, v)]) for p, v in todo if (p, v) in sites]
    if built:
        progress(f"indexed the sites of {len(built)} release{'s' if len(built) > 1 else ''} "
                 f"({len(texts)} distinct module{'s' if len(texts) != 1 else ''} of "
                 f"{sum(len(p) for _, p in plans.values())}) in "
                 f"{time.monotonic() - start:.0f} s (kept beside each release in {cache or corpus.cache_dir()})")
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


def _read(paths: list[Path]) -> list[list[tuple[int, str | None, str, str | None, str]]]:
    """In a worker: the sites of each module."""
    return [siteindex.module_sites(path) for path in paths]


def _save(release: tuple[str, str], root: Path, plan: list[tuple[str, str]],
          found: dict[str, list[tuple[int, str | None, str, str | None, str]]]) -> int:
    """The release's index from its modules' sites, written beside it; its number of sites."""
    package, version = release
    sites = [IndexedSite(package, version, module, *site) for module, digest in plan for site in found[digest]]
    siteindex.save(root, sites)
    return len(sites)
