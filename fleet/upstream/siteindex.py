"""Where a log line comes from: every raise / assert / logger.error site of a release, indexed by its text.

`build()` reads a release unpacked from the corpus (sourcetext.sites over each module the server can run) and
`SiteIndex.locate(line)` answers with the site whose rendered message the line is an instance of:
"sglang 0.5.23 srt/mem_cache/allocation.py:344 (alloc_req_slots)". A site whose message starts with text is indexed
under its first characters, one that starts with a placeholder under the rarest word of its text, so a lookup costs
a few dict probes and one linear scan per candidate, whatever the size of the release. Building reads tens of
megabytes of Python; `load_or_build` keeps the result beside the release in the corpus cache (JSON, rebuilt when
FORMAT changes).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from fleet.upstream import sourcetext

FORMAT = 1  # bump when what a site records or how it is read changes: cached indexes are rebuilt
# What the server runs (not the diffusion runtime, the tests or benchmarks a wheel also ships).
MODULE_GLOBS = {
    "sglang": ("sglang/*.py", "sglang/srt/**/*.py", "sglang/jit_kernel/**/*.py"),
    "flashinfer-python": ("flashinfer/*.py", "flashinfer/*/**/*.py"),
}
_SKIP_PARTS = frozenset({"data", "tests", "test", "benchmarks"})
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Z]\w*):(?: (.*)|$)", re.S)
_GATE = 4  # characters of a message's start that decide, in one probe, whether its longer keys are worth probing
_FEW_WORDS = 32  # up to this many words keying templates, a line is searched for each rather than split
_MIN_FIXED = 12  # a template with less fixed text ("{}: {}") would match any line
_START = 24  # characters of a template's start it is looked up by (a few dict probes per line, whatever its words)
_MAX_LINE = 2000  # what a host prints is read this far: a megabyte line costs no more than a long message
# printf-style placeholders (`logger.error("... %s", x)`, `"..." % x`) print a value where they stand, as `{}` does
_PRINTF = re.compile(r"%(?:\([A-Za-z_]\w*\))?[-#0+]*(?:\d+|\*)?(?:\.\d+)?[sdirfgexXcu]")


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Loading an index makes hundreds of thousands of objects, none of them cyclic garbage: the cyclic
    collector's passes over every live object, which those allocations trigger again and again (most of a big
    index's load time in a process that holds others), are put off until it is done."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@dataclass(frozen=True, slots=True)
class IndexedSite:
    """One site of one release: where it is and what it says."""

    package: str  # sglang | flashinfer-python
    version: str
    module: str  # relative to the release root, e.g. sglang/srt/mem_cache/allocation.py
    line: int
    function: str | None
    kind: str  # raise | assert | log
    exception: str | None
    text: str  # the message, placeholders as `{}`

    def where(self) -> str:
        """'sglang 0.5.23 srt/mem_cache/allocation.py:345 (alloc_req_slots)'."""
        module = self.module.split("/", 1)[1] if "/" in self.module else self.module
        function = f" ({self.function})" if self.function else ""
        return f"{self.package} {self.version} {module}:{self.line}{function}"

    def to_json(self) -> dict[str, str | int | None]:
        return {"package": self.package, "version": self.version, "module": self.module, "line": self.line,
                "function": self.function, "kind": self.kind, "exception": self.exception, "text": self.text}


@dataclass(frozen=True, slots=True)
class _Entry:
    site: IndexedSite
    pieces: tuple[str, ...]  # the fixed text between placeholders, in order
    anchored: bool  # the message starts with the first piece (no placeholder before it)
    fixed: int  # characters of fixed text: the more, the surer a match

    def matches(self, message: str) -> bool:
        """The pieces occur in order, the first at the start when anchored: plain finds, linear in the line
        (a regex of `.*?` between pieces backtracks without bound on a line a hostile host crafts)."""
        at = len(message) - len(message.lstrip())
        for i, piece in enumerate(self.pieces):
            if i == 0 and self.anchored:
                if not message.startswith(piece, at):
                    return False
                at += len(piece)
                continue
            found = message.find(piece, at)
            if found < 0:
                return False
            at = found + len(piece)
        return True


class SiteIndex:
    """The sites of one or more releases (sglang and the flashinfer beside it), looked up by a line's text."""

    def __init__(self, sites: Iterable[IndexedSite], start: int = _START,
                 words: Sequence[Sequence[str]] | None = None, starts: Sequence[str | None] | None = None) -> None:
        """`start`: characters of a message's start it is keyed by; fewer for a small index (the logger.error
        sites every plain line is looked up in) means fewer probes per line, each with a few more candidates.
        `words`, `starts`: each site's key words and the start it is keyed by (None: it starts with a
        placeholder), chosen before (`key_words`, `starts`; a union of releases holds each release's choice of word,
        fleet/upstream/unionindex.py): no site is read until a line's keys reach it. No words: a site too short
        or wordless to be found."""
        with collector_paused():
            self._index(sites, start, words, starts)

    def _index(self, sites: Iterable[IndexedSite], start: int, words: Sequence[Sequence[str]] | None,
               starts: Sequence[str | None] | None) -> None:
        self.sites: tuple[IndexedSite, ...] = tuple(sites)
        self._entries: list[_Entry | None] = [None] * len(self.sites)  # each site's pieces, read on first need
        if words is None or starts is None:
            heads = [first_line(s.text) for s in self.sites]
            words = [() if w is None else (w,) for w in key_words(heads)]
            made = [_entry(site, head) for site, head in zip(self.sites, heads, strict=True)]
            self._entries = list(made)
            starts = [e.pieces[0] if e.anchored else None for e in made]
        self._by_word: dict[str, list[int]] = {}  # templates that start with a placeholder: by a rare word
        self._by_start: dict[str, list[int]] = {}  # the others: by the first characters the message starts with
        self.unindexed = 0  # sites whose text is too short or has no word to find it by
        for i, (found, first) in enumerate(zip(words, starts, strict=True)):
            if not found:
                self.unindexed += 1
            elif first is not None:
                self._by_start.setdefault(first[:start], []).append(i)
            else:
                for key in found:
                    self._by_word.setdefault(key, []).append(i)
        self._start_lengths = sorted({len(k) for k in self._by_start}, reverse=True)
        # one probe rules out most lines: a key of _GATE or more characters starts with one of these
        self._gate = frozenset(k[:_GATE] for k in self._by_start if len(k) >= _GATE)
        self._short_lengths = [n for n in self._start_lengths if n < _GATE]
        # few templates that start with a placeholder: test their words as substrings (a superset of the
        # whole-word hits, each verified by `matches`) rather than split every line into words
        self._few_words = tuple(self._by_word) if len(self._by_word) <= _FEW_WORDS else None

    def __len__(self) -> int:
        return len(self.sites)

    def locate(self, line: str) -> IndexedSite | None:
        """The site `line` (a normalised log line, or a traceback's last line) is printed by; None if none.

        Among several, the one with the most fixed text wins, then one raising the exception the line names.
        """
        exception, message = _split(line[:_MAX_LINE])
        message = message.lstrip()
        best: tuple[int, int] | None = None
        found: IndexedSite | None = None
        for entry in self._candidates(message):
            if not entry.matches(message):
                continue
            score = (entry.fixed, int(exception is not None and entry.site.exception == exception))
            if best is None or score > best:
                best, found = score, entry.site
        return found

    def located(self, line: str) -> list[tuple[tuple[int, int], IndexedSite, str | None]]:
        """Every site `line` is an instance of, in the order `locate` weighs them, each with the score it weighs
        (characters of fixed text, whether it raises the exception the line names) and the key word it was found
        by (None: by the start of its message). A site keyed by several words comes once for each found."""
        exception, message = _split(line[:_MAX_LINE])
        message = message.lstrip()
        out: list[tuple[tuple[int, int], IndexedSite, str | None]] = []
        for entry, word in self._keyed(message):
            if entry.matches(message):
                out.append(((entry.fixed, int(exception is not None and entry.site.exception == exception)),
                            entry.site, word))
        return out

    def _candidates(self, message: str) -> list[_Entry]:
        lengths = self._start_lengths if message[:_GATE] in self._gate else self._short_lengths
        out = [self._entry(i) for n in lengths for i in self._by_start.get(message[:n], ())]
        out += [self._entry(i) for word in self._words_in(message) for i in self._by_word.get(word, ())]
        return out

    def _keyed(self, message: str) -> list[tuple[_Entry, str | None]]:
        """The sites the message's start and words key, each with the key word it was found by (None: its start),
        in the order they are weighed."""
        lengths = self._start_lengths if message[:_GATE] in self._gate else self._short_lengths
        out: list[tuple[_Entry, str | None]] = [(self._entry(i), None) for n in lengths
                                                for i in self._by_start.get(message[:n], ())]
        out += [(self._entry(i), word) for word in self._words_in(message) for i in self._by_word.get(word, ())]
        return out

    def _entry(self, i: int) -> _Entry:
        entry = self._entries[i]
        if entry is None:
            entry = self._entries[i] = _entry(self.sites[i], first_line(self.sites[i].text))
        return entry

    def _words_in(self, message: str) -> Iterable[str]:
        return ([w for w in self._few_words if w in message] if self._few_words is not None
                else set(_WORD.findall(message)))


def key_words(heads: Sequence[str]) -> list[str | None]:
    """Each message's key word (`heads`: the first lines of the sites of one index, `first_line`): the rarest of its
    words among them (a template that starts with a placeholder is found by it); None for one too short or
    wordless to be found."""
    words_of = [_words(head) for head in heads]
    frequency = Counter(w for words in words_of for w in words)
    out: list[str | None] = []
    for head, words in zip(heads, words_of, strict=True):
        fixed = sum(len(p.strip()) for p in head.split(sourcetext.PLACEHOLDER))
        out.append(min(words, key=lambda w: (frequency[w], -len(w), w)) if fixed >= _MIN_FIXED and words else None)
    return out


def starts(sites: Sequence[IndexedSite]) -> list[str | None]:
    """The start of each site's message that an index keys it by (None: it starts with a placeholder, and is keyed
    by a word): with `key_words`, what an index is built from, kept beside a saved one."""
    return [e.pieces[0] if e.anchored else None for e in (_entry(s, first_line(s.text)) for s in sites)]


def _entry(site: IndexedSite, head: str) -> _Entry:
    parts = head.split(sourcetext.PLACEHOLDER)
    pieces = tuple(p.strip() for p in parts if p.strip())
    return _Entry(site, pieces, bool(parts[0].strip()), sum(len(p) for p in pieces))


def first_line(text: str) -> str:
    """What one log line shows of a message: its first line (the rest comes on the lines after it), printf-style
    placeholders as `{}`."""
    return _PRINTF.sub(sourcetext.PLACEHOLDER, text.strip().split("\n", 1)[0])


def _words(text: str) -> set[str]:
    return {w for piece in text.split(sourcetext.PLACEHOLDER) for w in _WORD.findall(piece)}


def _split(line: str) -> tuple[str | None, str]:
    """('ValueError', 'the message') for an exception line; (None, line) otherwise."""
    text = line.strip()
    m = _EXCEPTION.match(text)
    if m is None:
        return None, text
    return m.group(1), m.group(2) or ""


def modules(package: str, root: Path) -> list[str]:
    """The modules of the release at `root` whose sites are indexed, relative to it, sorted."""
    found: set[str] = set()
    for pattern in MODULE_GLOBS[package]:
        for path in root.glob(pattern):
            rel = path.relative_to(root)
            if path.is_file() and not _SKIP_PARTS.intersection(rel.parts[1:-1]):
                found.add(rel.as_posix())
    return sorted(found)


def build(package: str, version: str, root: Path, only: Sequence[str] | None = None) -> list[IndexedSite]:
    """Every site of the release at `root` (of the modules `only` names, if given); a module this Python cannot
    parse is skipped."""
    out: list[IndexedSite] = []
    for module in only if only is not None else modules(package, root):
        out.extend(IndexedSite(package, version, module, *found) for found in module_sites(root / module))
    return out


def module_sites(path: Path) -> list[tuple[int, str | None, str, str | None, str]]:
    """(line, function, kind, exception, text) of each site of the module at `path`; none when this Python cannot
    parse it. What a module's text alone decides: the same text in two releases has the same sites."""
    try:
        with collector_paused():  # an AST holds no cycles: the collector would only walk it again and again
            found = sourcetext.sites(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return []
    return [(s.line, s.function, s.kind, s.exception, s.text) for s in found]


def cache_path(root: Path) -> Path:
    return root / f"fleet-sites-v{FORMAT}.json"


def load_cached(package: str, version: str, root: Path) -> list[IndexedSite] | None:
    """The release's sites from the cache beside it; None when it was never built or is unreadable (nothing is
    built: a live deploy must not spend tens of seconds reading a release)."""
    try:
        with collector_paused():
            rows = json.loads(cache_path(root).read_text(encoding="utf-8"))
            return [IndexedSite(package, version, *row) for row in rows]
    except (OSError, ValueError, TypeError):
        return None


def load_or_build(package: str, version: str, root: Path) -> list[IndexedSite]:
    """The release's sites from the cache beside it, built (and written atomically) when missing or unreadable."""
    cached = load_cached(package, version, root)
    if cached is not None:
        return cached
    sites = build(package, version, root)
    save(root, sites)
    return sites


def save(root: Path, sites: Sequence[IndexedSite]) -> None:
    """The release's index written beside it, whole or not at all (a read-only or vanished cache: not kept)."""
    rows = [[s.module, s.line, s.function, s.kind, s.exception, s.text] for s in sites]
    try:
        fd, tmp = tempfile.mkstemp(dir=root, prefix=".fleet-sites-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(rows, f, separators=(",", ":"))
        os.replace(tmp, cache_path(root))
    except OSError:
        Path(tmp).unlink(missing_ok=True)
