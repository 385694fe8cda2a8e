"""One site index for every cached release of a package: each message once, with the releases that print it.

`inv classify` told no release places a log's exception lines among every release (fleet/logs/releasefit.py).
Loading and indexing each release's sites costs seconds (31 releases, 195,000 sites); the same messages recur from
release to release (12,900 distinct sglang sites, 37,900 flashinfer ones), so this index holds each (module, kind,
exception, message) once with the releases, lines and functions it has in each, and the key word every template
is found by, chosen once. It is built from the per-release indexes (siteindex.cache_path) by `inv upstream`, or on
first need, and written beside the releases with the sha256 of its body and of every index it was built from: a
union whose body or sources changed since is not used (`load` answers None; `build` again).

    union = load("sglang") or build("sglang")
    union.place("ValueError: Invalid disaggregation_mode=foo")   # -> {"0.5.8.post1": IndexedSite, ...}
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from fleet.upstream import corpus, siteindex
from fleet.upstream.siteindex import IndexedSite, SiteIndex
from fleet.upstream.versions import is_version, version_key

FORMAT = 1  # bump when what the file records changes (siteindex.FORMAT is in its name too)

# [release's position in `versions`, line, function, k]: as the file holds it (checked when loaded, never copied)
Variant = list[Any]


class Placer(Protocol):
    """Releases whose sites a line can be placed among."""

    @property
    def versions(self) -> tuple[str, ...]: ...

    def place(self, line: str) -> Mapping[str, IndexedSite]:
        """Each release that prints `line`, and the site that does (the one its own index would name)."""
        ...


class PerRelease:
    """The releases' own site indexes, one looked up after the other (what the union stands for)."""

    def __init__(self, indexes: Mapping[str, SiteIndex]) -> None:
        self.indexes = dict(indexes)
        self.versions = tuple(self.indexes)

    def place(self, line: str) -> dict[str, IndexedSite]:
        found = {v: index.locate(line) for v, index in self.indexes.items()}
        return {v: site for v, site in found.items() if site is not None}


class UnionIndex:
    """Every release's sites of one package in one index: a line is looked up once, whatever the releases."""

    def __init__(self, package: str, versions: tuple[str, ...], sites: list[IndexedSite],
                 variants: list[list[Variant]], words: list[list[str]], starts: list[str | None]) -> None:
        """`sites[i]`: one message as its first release has it; `variants[i]`: [release, line, function, k] of
        each release that prints it, `words[i][k]` the key word that release's own index finds it by (`words[i]`
        empty: too short to be found); `starts[i]`: the start it is keyed by (siteindex.starts)."""
        self.package = package
        self.versions = versions
        self.index = SiteIndex(sites, words=words, starts=starts)
        self._variants = {id(site): (found, keys)
                          for site, found, keys in zip(self.index.sites, variants, words, strict=True)}

    def __len__(self) -> int:
        return len(self.index)

    def place(self, line: str) -> dict[str, IndexedSite]:
        """Each release that prints `line` and its site: per release, the site its own index's `locate` names
        (found by the key word that index chose, the most fixed text, then the line's exception; the first looked
        at among equals)."""
        best: dict[int, tuple[tuple[int, int], IndexedSite, int, str | None]] = {}
        for score, site, word in self.index.located(line):
            found, keys = self._variants[id(site)]
            for at, number, function, k in found:
                if word is not None and keys[k] != word:  # that release's index keys it by another word
                    continue
                if at not in best or score > best[at][0]:
                    best[at] = (score, site, number, function)
        return {self.versions[at]: IndexedSite(self.package, self.versions[at], site.module, number, function,
                                               site.kind, site.exception, site.text)
                for at, (_, site, number, function) in sorted(best.items())}


def path(package: str, cache: Path | None = None) -> Path:
    return (cache or corpus.cache_dir()) / package / f"fleet-union-v{FORMAT}-sites-v{siteindex.FORMAT}.json"


def sources(package: str, cache: Path | None = None) -> dict[str, Path]:
    """version -> the per-release index file of each cached release that has one, oldest first."""
    folder = (cache or corpus.cache_dir()) / package
    try:
        found = [p.name for p in folder.iterdir() if is_version(p.name) and (p / "release.json").is_file()]
    except OSError:
        return {}
    out: dict[str, Path] = {}
    for version in sorted(found, key=version_key):
        release = corpus.cached(package, version, cache)
        if release is not None and siteindex.cache_path(corpus.tree(release, cache)).is_file():
            out[version] = siteindex.cache_path(corpus.tree(release, cache))
    return out


def build(package: str, cache: Path | None = None) -> UnionIndex | None:
    """The union of the per-release indexes `sources` names, written (atomically) beside the releases; None when
    no release has an index. Rows of the wrong shape are left out (a release's index written by something else)."""
    with siteindex.collector_paused():
        return _build(package, cache)


def _build(package: str, cache: Path | None) -> UnionIndex | None:
    digests: dict[str, str] = {}
    rows_of: dict[str, list[list[object]]] = {}
    for version, source in sources(package, cache).items():
        try:
            data = source.read_bytes()
        except OSError:
            continue
        digests[version] = hashlib.sha256(data).hexdigest()  # built from it, even when it holds no rows we read
        try:
            rows = json.loads(data)
        except ValueError:
            continue
        if isinstance(rows, list):
            rows_of[version] = rows
    if not rows_of:
        return None
    versions = tuple(rows_of)
    at: dict[tuple[object, ...], int] = {}
    # [module, kind, exception, text, [[release, line, function, k], ...], words, start (siteindex.starts)]
    entries: list[list[Any]] = []
    for i, version in enumerate(versions):
        rows = [row for row in rows_of[version] if _row(row)]
        # each site's key word as the release's own index chooses it (the rarest among its own sites)
        chosen = siteindex.key_words([siteindex.first_line(row[5]) for row in rows])
        for (module, line, function, kind, exception, text), word in zip(rows, chosen, strict=True):
            key = (module, kind, exception, text)
            if key not in at:
                at[key] = len(entries)
                entries.append([module, kind, exception, text, [], []])
            entry = entries[at[key]]
            if word is not None and word not in entry[5]:
                entry[5].append(word)
            entry[4].append([i, line, function, entry[5].index(word) if word is not None else 0])
    # in the order each release's own index holds its sites (module, then line; here the newest release's line):
    # among sites that weigh the same for a line, the one looked at first is the one named, as in its own index
    entries.sort(key=lambda e: (e[0], e[4][-1][1]))
    for entry, first in zip(entries, siteindex.starts(_sites(package, versions, entries)[0]), strict=True):
        entry.append(first)
    sites, variants, words, firsts = _sites(package, versions, entries)
    if not sites:
        return None
    body = json.dumps({"versions": list(versions), "entries": entries}, separators=(",", ":")).encode()
    head = json.dumps({"format": FORMAT, "package": package, "sha256": hashlib.sha256(body).hexdigest(),
                       "sources": digests}, separators=(",", ":")).encode()
    _write(path(package, cache), head + b"\n" + body)
    return UnionIndex(package, versions, sites, variants, words, firsts)


def load(package: str, cache: Path | None = None) -> UnionIndex | None:
    """The union written beside the releases, when its body is the one its digest names and it was built from
    the per-release indexes the cache holds now (the same releases, each index unchanged); None otherwise
    (never built, torn, altered, or a release fetched or re-indexed since): build it again."""
    with siteindex.collector_paused():
        return _load(package, cache)


def _load(package: str, cache: Path | None) -> UnionIndex | None:
    try:
        data = path(package, cache).read_bytes()
        head_bytes, _, body = data.partition(b"\n")
        head = json.loads(head_bytes)
        if not isinstance(head, dict) or head.get("format") != FORMAT or head.get("package") != package:
            return None
        if hashlib.sha256(body).hexdigest() != head.get("sha256") or head.get("sources") != _digests(package, cache):
            return None
        doc = json.loads(body)
        versions = tuple(v for v in doc["versions"] if is_version(v))
        if len(versions) != len(doc["versions"]):
            return None
        sites, variants, words, firsts = _sites(package, versions, doc["entries"])
        return UnionIndex(package, versions, sites, variants, words, firsts) if sites else None
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None


def _digests(package: str, cache: Path | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for version, source in sources(package, cache).items():
        try:
            out[version] = hashlib.sha256(source.read_bytes()).hexdigest()
        except OSError:
            continue
    return out


def _sites(package: str, versions: tuple[str, ...], entries: object) -> tuple[
        list[IndexedSite], list[list[Variant]], list[list[str]], list[str | None]]:
    """Each entry's site as its first release has it, its [release, line, function, k] in every release that
    prints it, its key words and the start it is keyed by (an entry of 6 fields, before its start is known: None);
    ValueError for an entry of the wrong shape or types (a file written by something else). Plain type checks:
    this runs over every entry each time a union is loaded."""
    if type(entries) is not list:
        raise ValueError("a union's entries are a list")
    sites: list[IndexedSite] = []
    variants: list[list[Variant]] = []
    words: list[list[str]] = []
    firsts: list[str | None] = []
    for entry in entries:
        if type(entry) is not list or len(entry) not in (6, 7):
            raise ValueError("a union entry of the wrong shape")
        module, kind, exception, text, found, keys = entry[:6]
        first = entry[6] if len(entry) == 7 else None
        if not (type(module) is str and type(kind) is str and type(text) is str
                and (exception is None or type(exception) is str) and (first is None or type(first) is str)
                and type(keys) is list and all(type(k) is str for k in keys) and type(found) is list and found
                and all(_variant(v, len(versions), len(keys)) for v in found)):
            raise ValueError("a union entry of the wrong types")
        at, line, function, _ = found[0]
        sites.append(IndexedSite(package, versions[at], module, line, function, kind, exception, text))
        variants.append(found)
        words.append(keys)
        firsts.append(first)
    return sites, variants, words, firsts


def _row(row: object) -> bool:
    """A per-release index's row: [module, line, function, kind, exception, text] of those types."""
    return (type(row) is list and len(row) == 6 and type(row[0]) is str and type(row[1]) is int
            and (row[2] is None or type(row[2]) is str) and type(row[3]) is str
            and (row[4] is None or type(row[4]) is str) and type(row[5]) is str)


def _variant(found: object, releases: int, keys: int) -> bool:
    """[release, line, function, k]: the release's position among the union's, its line, its function or null,
    the key word its index finds it by (any k when the site has none)."""
    return (type(found) is list and len(found) == 4 and type(found[0]) is int and 0 <= found[0] < releases
            and type(found[1]) is int and (found[2] is None or type(found[2]) is str) and type(found[3]) is int
            and (keys == 0 or 0 <= found[3] < keys))


def _write(target: Path, data: bytes) -> None:
    """Written whole or not at all (a read-only cache: the union still answers from memory this time)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".fleet-union-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
