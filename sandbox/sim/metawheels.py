"""A wheelhouse of the upstream corpus's real METADATA, for measuring a resolver against pip (no code inside).

    build(dest, cache=None) -> None
    pin_sets(cache=None) -> list[dict[str, str]]

Each sglang and flashinfer-python release of the corpus (~/.cache/fleet/upstream) becomes a wheel holding only
its real METADATA (every Requires-Dist, Requires-Python and Provides-Extra as released). Every other distribution
those name (torch, transformers, nvidia-*, ...) becomes empty wheels at each version any of their specifiers
names (`torch==2.9.1`, `>=4.57.1`, `!=0.2.0`), plus that version with a local label `+cu130` for torch (as
PyTorch's own index names its builds), an old one (0.1) and a newer one (99.0) that no exact pin allows: pip
has to choose between them and back off the newest, as it does with a real index. Deterministic (sorted, fixed
times).
"""

from __future__ import annotations

import re
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from fleet.upstream import corpus

RELEASED = ("sglang", "flashinfer-python")
NEWER = "99.0"
OLDER = "0.1"  # what a bare upper bound (`python-dateutil<3`) can take where no specifier names a version below it
LOCAL = {"torch": "+cu130"}
_EPOCH = (2026, 1, 1, 0, 0, 0)


def releases(cache: Path | None = None) -> list[tuple[str, str, str]]:
    """(distribution, version, METADATA) of each corpus release."""
    root = cache or corpus.cache_dir()
    out = []
    for dist in RELEASED:
        for folder in sorted((root / dist).iterdir()) if (root / dist).is_dir() else []:
            if (text := corpus.metadata(dist, folder.name, root)) is not None:
                out.append((dist, folder.name, text))
    return out


def _wheel(dest: Path, name: str, version: str, metadata: str) -> None:
    stem = f"{re.sub(r'[-.]+', '_', name)}-{version}"
    files = {f"{stem}.dist-info/METADATA": metadata,
             f"{stem}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: fleet-metawheels\nRoot-Is-Purelib: true\n"
                                        "Tag: py3-none-any\n\n"}
    files[f"{stem}.dist-info/RECORD"] = "".join(f"{n},,\n" for n in files) + f"{stem}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(dest / f"{stem}-py3-none-any.whl", "w") as zf:
        for n in sorted(files):
            zf.writestr(zipfile.ZipInfo(n, _EPOCH), files[n])


def _named(metadatas: list[str]) -> dict[str, set[str]]:
    """Each distribution the METADATA texts require -> the versions their specifiers name."""
    out: dict[str, set[str]] = {}
    for text in metadatas:
        for raw in HeaderParser().parsestr(text).get_all("Requires-Dist") or []:
            try:
                req = Requirement(str(raw))
            except InvalidRequirement:
                continue
            versions = out.setdefault(str(canonicalize_name(req.name)), set())
            for spec in req.specifier:
                try:
                    versions.add(str(Version(spec.version.removesuffix(".*"))))
                except InvalidVersion:
                    continue
    return out


def build(dest: Path, cache: Path | None = None) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    found = releases(cache)
    for dist, version, text in found:
        _wheel(dest, dist, version, text)
    for name, versions in sorted(_named([t for _, _, t in found]).items()):
        if name in RELEASED:
            continue
        for v in sorted({*versions, OLDER, NEWER, *(f"{v}{LOCAL[name]}" for v in versions if name in LOCAL)}):
            _wheel(dest, name, v, f"Metadata-Version: 2.1\nName: {name}\nVersion: {v}\n\n")


def pin_sets(cache: Path | None = None) -> list[dict[str, str]]:
    """Pin sets drawn from the corpus: each release alone, each sglang with the flashinfer-python its wheel pins
    and with the newest and oldest flashinfer of the corpus (some cannot go together: pip says why)."""
    found = releases(cache)
    sg = [v for d, v, _ in found if d == "sglang"]
    fi = sorted((v for d, v, _ in found if d == "flashinfer-python"), key=Version)
    out: list[dict[str, str]] = [{d: v} for d, v, _ in found]
    matrix = corpus.load_matrix()
    for s in sg:
        for f in dict.fromkeys([matrix.sglang.get(s, fi[-1]), fi[-1], fi[0]]):
            out.append({"sglang": s, "flashinfer-python": f})
    return out
