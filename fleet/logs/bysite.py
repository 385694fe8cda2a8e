"""Classifying a line by the site that printed it, when no precise rule names its class.

playbooks/sites/classes.yaml says, as data, which area of a release a module belongs to (memory pools, attention
backends, MoE, quantization, distributed, model loading, server arguments, JIT...) and which class a site gets
from its area, its exception type and what its text names (an SM, memory, a flag, a timeout). The first class
entry whose conditions all hold wins; a site none fits stays with the catch-all rule (FATAL).

    by_site = SiteClassifier(SiteIndex(siteindex.load_or_build("sglang", "0.5.23", root)))
    by_site.classify("RuntimeError: alloc_req_slots runs out of memory. ...")  # -> (Rule, IndexedSite)
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fleet import yamlfile
from fleet.logs.proportion import wilson
from fleet.logs.rules import REMEDY_STEPS, LogClass, ProjectSource, Rule, Severity, regexes
from fleet.upstream import corpus, siteindex
from fleet.upstream.siteindex import IndexedSite, SiteIndex
from fleet.upstream.versions import is_version

CLASSES_FILE = Path(__file__).resolve().parents[2] / "playbooks" / "sites" / "classes.yaml"
HELDOUT_FILE = CLASSES_FILE.with_name("heldout.yaml")  # the entries' held-out record: who abstains (issue 51)
_LOGGED_START = 16  # the logger.error index is probed for every plain line: few key lengths, few dict probes
PRIORITY = 15  # above the catch-alls (<= 14), below every precise rule: precise rules keep priority
_SOURCE = ProjectSource(project="sglang", ref="https://github.com/sgl-project/sglang")


class AreaSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    modules: list[str] = Field(min_length=1)  # fnmatch globs over the module's path (`*` crosses folders)


class SiteClassSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    log_class: LogClass = Field(alias="class")
    severity: Severity = Severity.FATAL  # warning: the server goes on (a client's request refused)
    areas: list[str] | None = None  # any of these areas
    kinds: list[Literal["raise", "assert", "log"]] | None = None  # any of these kinds of site
    functions: list[str] | None = None  # any of these regexes matches the name of the function the site is in
    exceptions: list[str] | None = None  # any of these exception types (AssertionError for asserts)
    not_exceptions: list[str] = Field(default_factory=list)  # none of these (a missing package, a programming error)
    text: list[str] | None = None  # any of these regexes finds the site's message (case-insensitive)
    not_text: list[str] = Field(default_factory=list)  # none of these may
    explanation: str = Field(min_length=1, max_length=200)
    remedy: str = Field(min_length=1, max_length=300)
    remedies: list[str] = Field(default_factory=list)

    _re = field_validator("text", "not_text", "functions")(classmethod(lambda cls, v: v if v is None else regexes(v)))

    @field_validator("log_class")
    @classmethod
    def _specific(cls, value: LogClass) -> LogClass:
        if value is LogClass.READY:  # FATAL: an entry that abstains (the site stays generic, no entry below)
            raise ValueError(f"a site class names a specific failure or FATAL (abstain), not {value}")
        return value

    @model_validator(mode="after")
    def _meaning_not_place(self) -> SiteClassSpec:
        # where a site sits (its area, its function) is never its meaning: a specific class needs the message's words
        if self.log_class is not LogClass.FATAL and (self.areas or self.functions) and not self.text:
            raise ValueError(f"{self.name}: a specific class bound to areas or functions needs `text` (the "
                             "message's meaning); where a site sits alone gives no class")
        return self

    @field_validator("remedies")
    @classmethod
    def _known_remedies(cls, remedies: list[str]) -> list[str]:
        unknown = [r for r in remedies if r not in REMEDY_STEPS]
        if unknown:
            raise ValueError(f"unknown remedy {unknown[0]!r} (known: {', '.join(sorted(REMEDY_STEPS))})")
        return remedies


class HeldOutFile(BaseModel):
    """Each entry's [right, flagged] over the first measurements of the blind draws, and the precision goal."""

    model_config = ConfigDict(extra="forbid")

    goal: float = Field(gt=0, le=1)
    record: dict[str, tuple[int, int]]

    @field_validator("record")
    @classmethod
    def _counts(cls, record: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
        for name, (right, flagged) in record.items():
            if not 0 <= right <= flagged:
                raise ValueError(f"{name}: [right, flagged] must be counts with right <= flagged, got "
                                 f"[{right}, {flagged}]")
        return record

    def untrusted(self) -> frozenset[str]:
        """The entries whose held-out precision is below the goal at 95% confidence (Wilson upper bound < goal)."""
        return frozenset(name for name, (right, flagged) in self.record.items() if wilson(right, flagged)[1] <
                         self.goal)


class SiteClassesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = ""
    areas: list[AreaSpec]
    classes: list[SiteClassSpec]


@dataclass(frozen=True, slots=True)
class _SiteClass:
    spec: SiteClassSpec
    rule: Rule
    logged: Rule  # the same class for a logger.error site: a warning at most
    text: re.Pattern[str] | None
    not_text: re.Pattern[str] | None
    functions: re.Pattern[str] | None

    def fits(self, site: IndexedSite, area: str | None) -> bool:
        spec = self.spec
        if spec.areas is not None and area not in spec.areas:
            return False
        if spec.kinds is not None and site.kind not in spec.kinds:
            return False
        if self.functions is not None and not self.functions.search(site.function or ""):
            return False
        if spec.exceptions is not None and site.exception not in spec.exceptions:
            return False
        if site.exception in spec.not_exceptions:
            return False
        if self.text is not None and not self.text.search(site.text):
            return False
        return self.not_text is None or not self.not_text.search(site.text)


class SiteClasses:
    """The areas and class entries of playbooks/sites/classes.yaml, compiled."""

    def __init__(self, spec: SiteClassesFile, source: str, untrusted: frozenset[str] = frozenset()) -> None:
        self.areas = tuple((a.name, tuple(a.modules)) for a in spec.areas)
        self.entries = tuple(_compile(c, source) for c in spec.classes)
        # entries the held-out record shows below the precision goal: their sites abstain (FATAL)
        self.untrusted = untrusted

    def area(self, module: str) -> str | None:
        return next((name for name, globs in self.areas if any(fnmatch.fnmatchcase(module, g) for g in globs)),
                    None)

    def rule_for(self, site: IndexedSite, logged: bool = False) -> Rule | None:
        """The rule standing for the first class entry the site fits (its warning form for a logged line);
        None: no specific class (none fits, or the first that fits abstains: its class is FATAL)."""
        entry = self._first(site)
        if entry is None or self._abstaining(entry):
            return None
        return entry.logged if logged else entry.rule

    def abstains(self, site: IndexedSite) -> bool:
        """Whether the site's message names no class: no entry fits it, or the first that fits abstains (FATAL)."""
        entry = self._first(site)
        return entry is None or self._abstaining(entry)

    def _abstaining(self, entry: _SiteClass) -> bool:
        return entry.spec.log_class is LogClass.FATAL or entry.spec.name in self.untrusted

    def _first(self, site: IndexedSite) -> _SiteClass | None:
        area = self.area(site.module)
        return next((e for e in self.entries if e.fits(site, area)), None)


def _compile(spec: SiteClassSpec, source: str) -> _SiteClass:
    def joined(patterns: list[str] | None) -> re.Pattern[str] | None:
        return re.compile("|".join(f"(?:{p})" for p in patterns), re.I) if patterns else None

    rule = Rule(name=f"site:{spec.name}", log_class=spec.log_class, severity=spec.severity, priority=PRIORITY,
                explanation=spec.explanation, remedies=tuple(spec.remedies), wraps=False, patterns=(),
                source=source, triggers=(), remedy=spec.remedy, sources=(_SOURCE,))
    logged = rule if spec.severity is not Severity.FATAL else dataclasses.replace(rule, severity=Severity.WARNING)
    return _SiteClass(spec, rule, logged, joined(spec.text), joined(spec.not_text), joined(spec.functions))


def load_classes(path: Path = CLASSES_FILE, heldout: Path | None = HELDOUT_FILE) -> SiteClasses:
    """The file, validated (InputError naming file and line); every area a class names must exist. `heldout`: the
    entries' held-out record (playbooks/sites/heldout.yaml); an entry it shows below the goal abstains."""
    doc = yamlfile.load(path)
    spec = doc.parse(SiteClassesFile)
    known = {a.name for a in spec.areas}
    for i, entry in enumerate(spec.classes):
        for area in entry.areas or []:
            if area not in known:
                raise doc.error(("classes", i, "areas"), f"unknown area {area!r} (known: {', '.join(sorted(known))})")
    if heldout is None:
        return SiteClasses(spec, str(path))
    held = yamlfile.load(heldout)
    record = held.parse(HeldOutFile)
    names = {c.name for c in spec.classes}
    for name in record.record:
        if name not in names:
            raise held.error(("record", name), f"no class entry {name!r} in {path.name}")
    return SiteClasses(spec, str(path), record.untrusted())


@functools.cache
def default_classes() -> SiteClasses:
    return load_classes()


class SiteClassifier:
    """A release's site index and the site classes: a line to its site, and the site to its class."""

    def __init__(self, index: SiteIndex, classes: SiteClasses | None = None) -> None:
        self.index = index
        self.classes = classes if classes is not None else default_classes()
        # logger.error sites alone: a line no rule matches is looked up here (a few hundred sites: cheap per line)
        self.logged = SiteIndex((s for s in index.sites if s.kind == "log"), start=_LOGGED_START)

    def locate(self, text: str) -> IndexedSite | None:
        return self.index.locate(text)

    def classify(self, text: str) -> tuple[Rule, IndexedSite] | None:
        """The site `text` comes from and the rule of its class; None when no site or no specific class."""
        return self.judge(text)[0]

    def judge(self, text: str) -> tuple[tuple[Rule, IndexedSite] | None, bool]:
        """`classify`, and whether `text` comes from a site found whose message names no class (see SiteClasses),
        from one lookup of the site."""
        site = self.index.locate(text)
        if site is None:
            return None, False
        rule = self.classes.rule_for(site)
        if rule is not None:
            return (rule, site), False
        return None, self.classes.abstains(site)

    def classify_logged(self, text: str) -> tuple[Rule, IndexedSite] | None:
        """For a line no rule matches: the logger.error site that printed it and its class, as a warning at most
        (an error logged is evidence; the server may go on, and only its death or an exception is fatal)."""
        site = self.logged.locate(text)
        if site is None:
            return None
        rule = self.classes.rule_for(site, logged=True)
        return (rule, site) if rule is not None else None


_RELEASES: dict[tuple[str, str | None], SiteClassifier | None] = {}
_LOADING = threading.Lock()  # hosts deployed in parallel ask at once: one thread loads, the others wait for it


def for_release(sglang: str | None, flashinfer: str | None = None) -> SiteClassifier | None:
    """The site classifier of the sglang release a host runs (its version as the probe or the release recorded
    it) and of the flashinfer beside it when known, from the indexes already cached in the upstream corpus, loaded
    once per process; None when the sglang version is unknown or its release or index is not cached: the rules
    alone then, as before. Never fetches nor builds (a live deploy must not wait tens of seconds); `inv upstream`
    builds every release's index."""
    if not is_version(sglang):  # what the host's probe or manifest says is data: never a path
        return None
    assert sglang is not None
    flashinfer = flashinfer if is_version(flashinfer) else None
    key = (sglang, flashinfer)
    with _LOADING:
        if key not in _RELEASES:
            if len(_RELEASES) >= 8:
                _RELEASES.clear()
            _RELEASES[key] = _load(sglang, flashinfer)
        return _RELEASES[key]


def forget_releases() -> None:
    """Drop the loaded indexes (a test that changes the corpus; a process that outlives an index rebuild)."""
    with _LOADING:
        _RELEASES.clear()


def _load(sglang: str, flashinfer: str | None) -> SiteClassifier | None:
    sites = _cached_sites("sglang", sglang)
    if not sites:
        return None
    if flashinfer is not None:  # flashinfer's raises (its JIT, its kernels' checks) reach the same journal
        sites = sites + (_cached_sites("flashinfer-python", flashinfer) or [])
    try:
        return SiteClassifier(SiteIndex(sites))
    except (AttributeError, TypeError, ValueError):  # rows of the right length but the wrong types: no index
        return None


def _cached_sites(package: str, version: str) -> list[IndexedSite] | None:
    try:
        release = corpus.cached(package, version)
    except (OSError, ValueError, TypeError):
        return None
    return siteindex.load_cached(package, version, corpus.tree(release)) if release is not None else None


def describe(site: IndexedSite | None) -> dict[str, object] | None:
    """A site as --json shows it: where (one line) and its parts."""
    return None if site is None else {"where": site.where(), **site.to_json()}
