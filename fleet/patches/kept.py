"""Gates upstream keeps off an SM on purpose (playbooks/upstream/kept-gates.yaml), as data: which they are, where
they sit, for which releases and SMs, why, and where upstream says so. The audit marks an excluding gate that one
names (file, function, condition, release, SM major) as kept: shown with its reason and source, never counted as
remaining. A gate is matched only on a release the file names: a new release is audited as any gate is until
someone reads it and widens the range (tests/upstream/test_kept_gates.py checks every entry against the wheels).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TypedDict

from pydantic import BaseModel, ConfigDict, field_validator

from fleet import yamlfile
from fleet.site import SHIPPED
from fleet.upstream.versions import ReleaseRange, in_range

FILE = SHIPPED / "playbooks" / "upstream" / "kept-gates.yaml"  # shipped, whatever the working folder
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z0-9_.-]+)+$")


class PackageInfo(TypedDict, total=False):
    """One import name as a host program resolved it in the venv (patch_host.py, scan.py): where it lives and
    the distribution and version that installed it, or why it could not be imported."""

    path: str
    dist: str | None
    version: str | None
    error: str


class Evidence(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    file: str  # as the audit names files: package/relative path
    text: str  # a line (or part of one) of that file saying the exclusion is meant


class KeptGate(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    file: str
    where: str  # the function (def) the gate sits in
    condition: str  # as the audit prints it
    dist: str
    releases: ReleaseRange  # a version range of dist
    sm_majors: list[int]
    reason: str
    evidence: Evidence
    sources: list[str]

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("lower-case letters, digits, '-', '_' and '.' only")
        return v

    @field_validator("file")
    @classmethod
    def _file(cls, v: str) -> str:
        if not _PATH.match(v) or ".." in v.split("/"):
            raise ValueError("package/relative/path, as `inv audit` names files")
        return v

    @field_validator("sm_majors")
    @classmethod
    def _majors(cls, v: list[int]) -> list[int]:
        if not v or any(not 1 <= m <= 199 for m in v):
            raise ValueError("one or more SM majors, e.g. [11, 12]")
        return v

    @field_validator("sources")
    @classmethod
    def _sources(cls, v: list[str]) -> list[str]:
        if not v or any(not s.startswith("https://") for s in v):
            raise ValueError("one or more https:// addresses where upstream says so")
        return v


class KeptFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    gates: list[KeptGate]


@dataclass(frozen=True)
class Kept:
    """What the audit says of a gate upstream keeps on purpose."""

    name: str
    reason: str
    sources: tuple[str, ...]


@cache
def load(path: Path = FILE) -> tuple[KeptGate, ...]:
    """The entries; InputError naming file, line and key for a bad one, or two entries of one name."""
    doc = yamlfile.load(path)
    entries = doc.parse(KeptFile).gates
    seen: set[str] = set()
    for i, e in enumerate(entries):
        if e.name in seen:
            raise doc.error(("gates", i, "name"), f"{e.name!r} is named twice")
        seen.add(e.name)
    return tuple(entries)


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def find(file: str, where: str, condition: str, sm: int, packages: dict[str, PackageInfo],
         entries: tuple[KeptGate, ...] | None = None) -> Kept | None:
    """The entry naming this gate of the release the audit read (packages: import name -> {dist, version}), if any.
    An unknown release or distribution never matches."""
    pkg = packages.get(file.split("/", 1)[0]) if isinstance(packages, dict) else None  # a host's JSON
    if not isinstance(pkg, dict):
        return None
    dist, version = pkg.get("dist"), pkg.get("version")
    if not isinstance(dist, str) or not isinstance(version, str):
        return None
    for e in load() if entries is None else entries:
        if (e.file == file and e.where == where and _same(e.condition, condition) and sm // 10 in e.sm_majors
                and e.dist == dist.lower().replace("_", "-") and _in(version, e.releases)):
            return Kept(e.name, " ".join(e.reason.split()), tuple(e.sources))
    return None


def _in(version: str, spec: str) -> bool:
    try:
        return in_range(version, spec)
    except ValueError:  # a host's version we cannot read is never a release the file names
        return False
