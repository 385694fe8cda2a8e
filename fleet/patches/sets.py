"""Patch sets as data: the schema of playbooks/patches/*.yaml and loading them with file:line errors.

    name: sm120-allreduce-fusion          # must equal the file's stem
    description: what the set is for
    applies_to:                            # every key optional; all given must hold
      sm: [120, 121]                       # or arch_families: [blackwell-consumer]
      packages: {flashinfer-python: "<0.6.17"}   # distribution name -> version range
    edits:
      - package: flashinfer                # import name, found on the host in the venv's site-packages
        file: jit/comm.py                  # relative to the package folder
        find: "supported_major_versions=[9, 10]"
        replace: "supported_major_versions=[9, 10, 12]"
        count: 1                           # expected occurrences of `find` in a pristine file
        within: {anchor: "def gen_trtllm_comm_module(", after: 4}   # optional: count only there
    variants:                              # optional: edits per upstream layout, picked by version
      - dist: flashinfer-python
        versions: "<0.6.17"
        edits: [...]
      - dist: flashinfer-python
        versions: ">=0.6.17"
        not_needed: "0.6.17 ships upstream's fix"   # instead of edits
    post:
      clear_jit_cache: [trtllm_comm]       # flashinfer JIT cache modules to delete after writing

`replace` must not contain `find` (applying twice must change nothing) and must not be empty (an
applied edit is recognised by its replacement text). `within` anchors an edit on what identifies its
gate: the anchor text must occur exactly once in the file, and `find` is counted only from `before`
lines above the anchor's line to `after` lines below it, so text another gate shares is never touched.
Each distribution named by a variant must match exactly one of its variants (by the installed version).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fleet import yamlfile
from fleet.errors import InputError
from fleet.site import SHIPPED
from fleet.upstream.versions import in_range, parse_range

DEFAULT_DIR = SHIPPED / "playbooks" / "patches"  # shipped, whatever the working folder
_SET_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
_IMPORT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_DIST_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_MODULE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class AppliesTo(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    sm: list[int] | None = None
    arch_families: list[str] | None = None
    packages: dict[str, str] = Field(default_factory=dict)

    @field_validator("sm")
    @classmethod
    def _sm(cls, v: list[int] | None) -> list[int] | None:
        for s in v or []:
            if not 10 <= s <= 999:
                raise ValueError(f"SM {s} is not like 90, 100, 120")
        return v

    @field_validator("packages")
    @classmethod
    def _packages(cls, v: dict[str, str]) -> dict[str, str]:
        for dist, spec in v.items():
            if not _DIST_NAME.fullmatch(dist):
                raise ValueError(f"{dist!r} is not a distribution name")
            parse_range(spec)
        return v


class Within(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    anchor: str = Field(min_length=1)
    before: int = Field(default=0, ge=0)
    after: int = Field(default=0, ge=0)


class Edit(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    package: str
    file: str
    find: str = Field(min_length=1)
    replace: str = Field(min_length=1)
    count: int = Field(ge=1)
    name: str | None = None
    within: Within | None = None

    @field_validator("package")
    @classmethod
    def _package(cls, v: str) -> str:
        if not _IMPORT_NAME.fullmatch(v):
            raise ValueError(f"{v!r} is not a Python import name")
        return v

    @field_validator("file")
    @classmethod
    def _file(cls, v: str) -> str:
        p = PurePosixPath(v)
        if not v or p.is_absolute() or ".." in p.parts or "\n" in v or "\\" in v:
            raise ValueError(f"{v!r} must be a relative path inside the package (no '..')")
        return str(p)

    @model_validator(mode="after")
    def _idempotent(self) -> Edit:
        if self.find in self.replace:
            raise ValueError("replace contains find: applying twice would edit again (not idempotent)")
        return self


class Variant(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    dist: str
    versions: str
    edits: list[Edit] = Field(default_factory=list)
    not_needed: str | None = None

    @field_validator("versions")
    @classmethod
    def _versions(cls, v: str) -> str:
        parse_range(v)
        return v

    @model_validator(mode="after")
    def _one_kind(self) -> Variant:
        if bool(self.edits) == bool(self.not_needed):
            raise ValueError("a variant has either edits or not_needed (why no edit is needed), not both")
        return self


@dataclass
class Selection:
    """What a set does for one host's installed versions."""

    edits: list[Edit]
    not_needed: list[str]  # why a distribution needs no edit (upstream has the fix)
    missing: list[str]  # why no variant fits: a distribution not installed, or a version no variant covers
    uncovered: bool = False  # a version no variant (or more than one) covers: the set has not caught up


class Post(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    clear_jit_cache: list[str] = Field(default_factory=list)

    @field_validator("clear_jit_cache")
    @classmethod
    def _modules(cls, v: list[str]) -> list[str]:
        for m in v:
            if not _MODULE.fullmatch(m) or m in (".", ".."):
                raise ValueError(f"{m!r} is not a JIT module name")
        return v


class PatchSet(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    description: str
    applies_to: AppliesTo = Field(default_factory=AppliesTo)
    edits: list[Edit] = Field(default_factory=list)
    variants: list[Variant] = Field(default_factory=list)
    post: Post = Field(default_factory=Post)
    source: str = Field(default="", exclude=True)

    @model_validator(mode="after")
    def _has_edits(self) -> PatchSet:
        if not self.edits and not self.variants:
            raise ValueError("a patch set needs edits or variants")
        return self

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _SET_NAME.fullmatch(v):
            raise ValueError("names use lower-case letters, digits, '.', '_' and '-'")
        return v

    def all_edits(self) -> list[Edit]:
        return [*self.edits, *(e for v in self.variants for e in v.edits)]

    def files(self) -> list[tuple[str, str]]:
        """Every file any variant may edit (read before the versions are known)."""
        return list(dict.fromkeys((e.package, e.file) for e in self.all_edits()))

    def dists(self) -> list[str]:
        return list(dict.fromkeys(v.dist for v in self.variants))

    def select(self, versions: dict[str, str | None]) -> Selection:
        """The edits for these installed versions (distribution -> version, None: not installed)."""
        edits, missing, not_needed, uncovered = list(self.edits), [], [], False
        for dist in self.dists():
            mine = [v for v in self.variants if v.dist == dist]
            version = versions.get(dist)
            if version is None:
                missing.append(f"{dist} is not installed in the venv")
                continue
            hit = [v for v in mine if in_range(version, v.versions)]
            if len(hit) != 1:
                known = ", ".join(v.versions for v in mine)
                missing.append(f"no variant for {dist} {version} (variants cover {known})" if not hit else
                               f"{dist} {version} matches {len(hit)} variants ({known})")
                uncovered = True
                continue
            if hit[0].not_needed:
                not_needed.append(f"{dist} {version}: {hit[0].not_needed}")
            edits += hit[0].edits
        return Selection(edits, not_needed, missing, uncovered)


def load_file(path: Path) -> PatchSet:
    doc = yamlfile.load(path)
    if not isinstance(doc.data, dict):
        raise doc.error((), "a patch set must be a mapping with name, description, edits")
    ps = doc.parse(PatchSet)
    if ps.name != path.stem:
        raise doc.error(("name",), f"must match the file name {path.stem!r}")
    groups: list[tuple[tuple[str | int, ...], list[Edit]]] = [(("edits",), ps.edits)]
    groups += [(("variants", j, "edits"), [*ps.edits, *v.edits]) for j, v in enumerate(ps.variants)]
    for where, edits in groups:
        seen: dict[tuple[str, str, str, str], int] = {}
        for i, e in enumerate(edits):
            key = (e.package, e.file, e.find, e.within.anchor if e.within else "")
            if key in seen:
                raise doc.error((*where, i - len(ps.edits) if where[0] == "variants" else i, "find"),
                                "same find text (and anchor) as another edit of the same file")
            seen[key] = i
    return ps.model_copy(update={"source": str(path)})


def available(directory: Path = DEFAULT_DIR) -> list[str]:
    return sorted(p.stem for p in Path(directory).glob("*.yaml"))


def load_sets(names: list[str], directory: Path = DEFAULT_DIR) -> list[PatchSet]:
    """The named sets, in the order given (duplicates dropped); InputError for an unknown name."""
    if not names:
        raise InputError("--set: name at least one patch set")
    out = []
    for name in dict.fromkeys(names):
        path = Path(directory) / f"{name}.yaml"
        if not _SET_NAME.fullmatch(name) or not path.is_file():
            known = ", ".join(available(directory)) or "none"
            raise InputError(f"--set {name}: no such patch set in {directory} (known: {known})")
        out.append(load_file(path))
    return out
