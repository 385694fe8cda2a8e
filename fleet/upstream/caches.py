"""Where each sglang release keeps what it compiles and tunes at start (playbooks/upstream/caches.yaml, read from
the released files: docs/FACTS.md section 8), as typed values: which caches a release has, and the folder each
one is on a host given the server's environment. Pure; the host's home, tmp and user come from the caller."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from fleet import yamlfile
from fleet.site import SHIPPED
from fleet.upstream.versions import ReleaseRange, in_range

FILE = SHIPPED / "playbooks" / "upstream" / "caches.yaml"
_NAME = re.compile(r"^[a-z][a-z0-9-]{0,40}$")
_ENV = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")
FIELDS = frozenset({"home", "tmp", "user", "flashinfer", "archs", "sm"})


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}


def _template(v: str) -> str:
    unknown = _fields(v) - FIELDS
    if unknown:
        raise ValueError(f"unknown field {sorted(unknown)[0]!r} (known: {', '.join(sorted(FIELDS))})")
    if ".." in PurePosixPath(v.replace("{", "").replace("}", "")).parts:
        raise ValueError("no '..' in a cache folder")
    return v


class WhereModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    env: str | None = None
    base: str | None = None
    path: str = ""

    @model_validator(mode="after")
    def _one(self) -> WhereModel:
        if (self.env is None) == (self.base is None):
            raise ValueError("one of env: (a variable) or base: (the default folder)")
        if self.env is not None and not _ENV.match(self.env):
            raise ValueError(f"{self.env!r} is no environment variable name")
        if self.base is not None and not self.base.startswith(("{home}", "{tmp}", "/")):
            raise ValueError("base: starts at {home}, {tmp} or /")
        if self.path.startswith("/"):
            raise ValueError("path: is relative to the folder above it")
        for text in (self.base or "", self.path):
            _template(text)
        return self


class CacheModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    releases: ReleaseRange
    where: list[WhereModel]
    keyed_by: list[str]
    invalid: str
    source: str

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("lower-case letters, digits and '-'")
        return v

    @field_validator("where")
    @classmethod
    def _where(cls, v: list[WhereModel]) -> list[WhereModel]:
        if not v or v[-1].base is None or any(w.base is not None for w in v[:-1]):
            raise ValueError("environment variables first, then exactly one base: (the default), last")
        return v


class CachesFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    kernel_flags: list[str]
    kernel_env: list[str]
    caches: list[CacheModel]

    @field_validator("kernel_flags")
    @classmethod
    def _flags(cls, v: list[str]) -> list[str]:
        bad = [f for f in v if not re.fullmatch(r"--[a-z0-9][a-z0-9-]*", f)]
        if bad:
            raise ValueError(f"{bad[0]!r} is no long flag (--name)")
        return v

    @field_validator("kernel_env")
    @classmethod
    def _env(cls, v: list[str]) -> list[str]:
        bad = [e for e in v if not _ENV.match(e)]
        if bad:
            raise ValueError(f"{bad[0]!r} is no environment variable name")
        return v


@dataclass(frozen=True)
class KernelInputs:
    """The launch flags and environment variables that change kernels or tactics (part of fleet's cache key)."""

    flags: frozenset[str]
    env: frozenset[str]


@dataclass(frozen=True)
class Where:
    env: str | None  # the variable that names the folder when set
    base: str | None  # the default folder, a template
    path: str  # appended to the folder, a template


@dataclass(frozen=True)
class HostPlaces:
    """What a host's folders expand from: its home, temporary folder, user, and the stack's version and arch."""

    home: str
    tmp: str
    user: str
    flashinfer: str
    archs: str  # flashinfer's workspace name, e.g. 120a
    sm: str  # e.g. 120


@dataclass(frozen=True)
class CacheSpec:
    name: str
    releases: str
    where: tuple[Where, ...]
    keyed_by: tuple[str, ...]
    invalid: str
    source: str

    def folder(self, env: Mapping[str, str], places: HostPlaces) -> PurePosixPath:
        """The folder this cache is in on a host whose server runs with `env` (the unit's environment)."""
        values = {f: getattr(places, f) for f in FIELDS}
        for w in self.where:
            start = env.get(w.env) if w.env is not None else (w.base or "").format(**values)
            if start:
                return PurePosixPath(start) / w.path.format(**values) if w.path else PurePosixPath(start)
        raise AssertionError("the loader keeps a base: last")  # pragma: no cover


def _overlap(a: str, b: str) -> bool:
    """Whether two ranges share a release. Ranges of bounds (<, <=, >=, >) share one exactly when one of their
    bounds, or a release below or above them all, is in both."""
    probes = {c.strip().lstrip("<>=!~") for c in (a + "," + b).split(",")} | {"0", "9999"}
    return any(in_range(p, a) and in_range(p, b) for p in probes)


@cache
def _parsed(path: Path) -> tuple[yamlfile.Document, CachesFile]:
    doc = yamlfile.load(path)
    return doc, doc.parse(CachesFile)


def kernel_inputs(path: Path = FILE) -> KernelInputs:
    parsed = _parsed(path)[1]
    return KernelInputs(frozenset(parsed.kernel_flags), frozenset(parsed.kernel_env))


@cache
def load(path: Path = FILE) -> tuple[CacheSpec, ...]:
    """Every entry; InputError naming file, line and key for a bad one or two entries of one name that cover one
    release."""
    doc, parsed = _parsed(path)
    models = parsed.caches
    for i, m in enumerate(models):
        for n in models[:i]:
            if n.name == m.name and _overlap(n.releases, m.releases):
                raise doc.error(("caches", i, "releases"), f"{m.name!r} already covers a release of {m.releases!r}")
    return tuple(
        CacheSpec(m.name, m.releases, tuple(Where(w.env, w.base, w.path) for w in m.where), tuple(m.keyed_by),
                  " ".join(m.invalid.split()), m.source)
        for m in models)


def for_release(sglang: str, specs: tuple[CacheSpec, ...] | None = None) -> tuple[CacheSpec, ...]:
    """The caches an sglang release (and what it loads) keeps, one per name."""
    return tuple(s for s in (load() if specs is None else specs) if in_range(sglang, s.releases))
