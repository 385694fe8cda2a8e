"""Which releases of the upstream corpus a log fits, from its clues (fleet/logs/release.py): the versions it
states, the source lines its traceback frames print (read from each cached release), the server arguments it
echoes (against the committed flag table); with no clue, the releases whose cached site indexes print its exception
lines. Reads the corpus; never fetches nor builds.

    found = fits(clues(text), "sglang")   # -> ReleaseFit(versions=("0.5.22", "0.5.23"), reasons=(...))
    found.pick                            # the newest release that fits: the one to classify with
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from fleet.logs.release import Frame, ReleaseClues
from fleet.upstream import corpus, indexes, siteindex, sourcetext, unionindex
from fleet.upstream.flags import Table, default_table
from fleet.upstream.siteindex import SiteIndex
from fleet.upstream.unionindex import PerRelease, Placer
from fleet.upstream.versions import is_version, version_key


@dataclass(frozen=True, slots=True)
class ReleaseFit:
    package: str  # sglang | flashinfer-python
    versions: tuple[str, ...]  # the cached releases the clues fit, oldest first (empty: none does)
    reasons: tuple[str, ...]  # what narrowed them, one short phrase each

    @property
    def pick(self) -> str | None:
        """The newest release that fits (the releases that fit agree on what the log's lines are)."""
        return self.versions[-1] if self.versions else None

    def describe(self) -> str:
        """'sglang 0.5.23 (fits 0.5.22, 0.5.23: 3 traceback frames)'."""
        if not self.versions:
            return f"{self.package}: no cached release fits ({'; '.join(self.reasons)})"
        fits = ", ".join(self.versions) if len(self.versions) <= 6 else \
            f"{self.versions[0]} .. {self.versions[-1]} ({len(self.versions)} releases)"
        return f"{self.package} {self.pick} (fits {fits}: {'; '.join(self.reasons)})"

    def to_json(self) -> dict[str, object]:
        return {"package": self.package, "used": self.pick, "fits": list(self.versions), "why": list(self.reasons)}


def cached_versions(package: str, cache: Path | None = None) -> list[str]:
    """The releases of `package` the corpus holds, oldest first."""
    return indexes.versions(package, cache)


def fits(clues: ReleaseClues, package: str, cache: Path | None = None, table: Table | None = None) -> ReleaseFit | None:
    """The cached releases of `package` the clues fit; None when the log says nothing about that package."""
    candidates = cached_versions(package, cache)
    reasons: list[str] = []
    stated = [v for v in clues.stated_for(package) if is_version(v)]
    frames = clues.frames_for(package)
    said_args = package == "sglang" and bool(clues.server_args)
    if not (stated or frames or said_args):
        return None
    if stated:
        named = ", ".join(dict.fromkeys(stated))
        held = [v for v in candidates if any(version_key(v) == version_key(s) for s in stated)]
        if not held:  # a release the corpus lacks: no other release stands in for it
            return ReleaseFit(package, (), (f"the log names {package} {named}, not in the upstream corpus",))
        candidates = held
        reasons.append(f"the log names {package} {named}")
    if frames:
        scores = {v: _frames_fit(frames, package, v, cache) for v in candidates}
        best = max(scores.values(), default=0)
        if best > 0:
            candidates = [v for v in candidates if scores[v] == best]
            reasons.append(f"{best} of {len(frames)} traceback frame{'s' if len(frames) > 1 else ''} match")
    if said_args and candidates:
        table = table or default_table()
        known = [f for f in (k.replace("_", "-") for k in clues.server_args) if f in table.flags]
        held = [v for v in candidates if v in table.versions and all(table.has(f, v) for f in known)]
        if known and held and len(held) < len(candidates):  # arguments every release takes say nothing
            candidates = held
            reasons.append(f"the {len(known)} server arguments it echoes")
    if not reasons and not frames:  # server arguments every release takes: nothing to go by
        return None
    if not reasons:  # frames no cached release prints (a source checkout, an older release): no guess
        return ReleaseFit(package, (), (f"none of its {len(frames)} traceback frames matches a cached release",))
    return ReleaseFit(package, tuple(candidates), tuple(reasons))


def _frames_fit(frames: tuple[Frame, ...], package: str, version: str, cache: Path | None) -> int:
    """How many frames the release's own files print as the log shows them (the source line at that line, or the
    function defined above it when the log kept no source line)."""
    return sum(1 for f in frames if _frame_fits(f, package, version, cache))


def _frame_fits(frame: Frame, package: str, version: str, cache: Path | None) -> bool:
    lines = _source(package, version, frame.module, str(cache) if cache else None)
    if lines is None or not 0 < frame.line <= len(lines):
        return False
    if frame.code is not None:
        return lines[frame.line - 1].strip() == frame.code
    name = frame.function.rsplit(".", 1)[-1]
    return any(line.lstrip().startswith((f"def {name}(", f"async def {name}(", f"class {name}"))
               for line in reversed(lines[:frame.line]))


@functools.lru_cache(maxsize=512)
def _source(package: str, version: str, module: str, cache: str | None) -> tuple[str, ...] | None:
    if ".." in module.split("/"):
        return None
    release = corpus.cached(package, version, Path(cache) if cache else None)
    if release is None:
        return None
    try:
        text = (corpus.tree(release, Path(cache) if cache else None) / module).read_text(encoding="utf-8",
                                                                                       errors="replace")
    except OSError:
        return None
    return tuple(text.split("\n"))


def fits_by_sites(lines: list[str], package: str, releases: Placer) -> ReleaseFit | None:
    """The releases whose sites print these lines (exception lines only catch-alls matched, in order), from
    `releases` (the union of every release's sites, or each release's own index): the releases that print the most
    of them, oldest first; None when no release places any line."""
    if not lines or not releases.versions:
        return None
    placed = [releases.place(line) for line in lines]
    # the releases that place the most lines, then by the surest sites (the most fixed text: a release where only a
    # looser template fits a line has lost the site that printed it)
    score = {v: (sum(v in found for found in placed), sum(_fixed(found[v].text) for found in placed if v in found))
             for v in releases.versions}
    best = max(score.values())
    if best[0] == 0:
        return None
    versions = sorted((v for v, n in score.items() if n == best), key=version_key)
    return ReleaseFit(package, tuple(versions),
                      (f"{best[0]} of {len(lines)} exception line{'s' if len(lines) > 1 else ''} printed by its "
                       f"sites ({len(releases.versions)} releases indexed)",))


def _fixed(template: str) -> int:
    return len(template.replace(sourcetext.PLACEHOLDER, ""))


def cached_indexes(package: str, cache: Path | None = None) -> Placer:
    """Every release of `package` whose site index is already cached: their union when it is built and current
    (unionindex.load), else each release's own index (nothing is built)."""
    union = unionindex.load(package, cache)
    if union is not None:
        return union
    out: dict[str, SiteIndex] = {}
    for version in cached_versions(package, cache):
        release = corpus.cached(package, version, cache)
        if release is None:
            continue
        found = siteindex.load_cached(package, version, corpus.tree(release, cache))
        if found:
            out[version] = SiteIndex(found)
    return PerRelease(out)
