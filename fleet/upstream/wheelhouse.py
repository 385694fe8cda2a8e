"""The controller's wheelhouse: the wheels a playbook's `packages:` installs on hosts that have no package index.

    ~/.cache/fleet/wheelhouse/*.whl        (FLEET_WHEELHOUSE elsewhere; filled by `pip download`, or by hand)

`missing(pins)` says which pins have no wheel there (bad input: one line each, before any host is contacted);
`closure(pins, python)` is every wheel a venv of those pins needs, the pins' Requires-Dist followed through the
wheelhouse as pip would (markers for a Linux host of that Python, extras asked for); `digest(pins, python)`
names the venv: one venv per package set and Python.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from fleet.errors import FleetError
from fleet.upstream.pins import applies, canonical, environment, requirements

NO_WHEEL = "no wheel of"  # how missing() begins its lines
MAX_METADATA = 1 << 20  # a wheel's METADATA read at most this far (a hostile or broken wheel is not trusted)


class WheelhouseError(FleetError):
    """The wheelhouse cannot give a venv what it needs."""


def wheelhouse_dir() -> Path:
    return Path(os.environ.get("FLEET_WHEELHOUSE") or "~/.cache/fleet/wheelhouse").expanduser()


@dataclass(frozen=True)
class Wheel:
    path: Path
    name: str  # canonical distribution name
    version: Version

    @property
    def filename(self) -> str:
        return self.path.name

    @cached_property
    def sha256(self) -> str:
        h = hashlib.sha256()
        with self.path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    def metadata(self) -> str:
        """The wheel's METADATA ('' when it has none readable)."""
        try:
            with zipfile.ZipFile(self.path) as zf:
                names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
                if len(names) != 1:
                    return ""
                with zf.open(names[0]) as f:
                    return f.read(MAX_METADATA).decode("utf-8", "replace")
        except (OSError, zipfile.BadZipFile):
            return ""


def scan(folder: Path) -> list[Wheel]:
    """The wheels in folder, by their file names (a file whose name is not a wheel's is passed over)."""
    out = []
    for path in sorted(folder.glob("*.whl")) if folder.is_dir() else []:
        try:
            name, version, _build, _tags = parse_wheel_filename(path.name)
        except InvalidWheelFilename:
            continue
        if path.is_file():
            out.append(Wheel(path, str(name), version))
    return out


def _pick(wheels: list[Wheel], name: str, spec: SpecifierSet) -> Wheel | None:
    """The newest wheel of `name` that spec allows (as pip: a local label meets its release)."""
    fits = [w for w in wheels if w.name == name and spec.contains(w.version, prereleases=True)]
    return max(fits, key=lambda w: w.version) if fits else None


def missing(pins: dict[str, str], folder: Path | None = None) -> list[tuple[str, str]]:
    """(pinned distribution, one line) for each pin with no wheel in the wheelhouse."""
    where = folder or wheelhouse_dir()
    wheels = scan(where)
    return [(dist, f"{NO_WHEEL} {dist} {version} in the wheelhouse {where} (fleet installs only from it: "
                   f"pip download --no-deps {dist}=={version} -d {where})")
            for dist, version in pins.items() if _pick(wheels, canonical(dist), SpecifierSet(f"=={version}")) is None]


def closure(pins: dict[str, str], python: str, folder: Path | None = None, machine: str = "x86_64") -> list[Wheel]:
    """Every wheel a venv of these pins needs, sorted by name; WheelhouseError names the first requirement no
    wheel there meets."""
    where = folder or wheelhouse_dir()
    wheels = scan(where)
    chosen: dict[str, Wheel] = {}
    todo = [(Requirement(f"{canonical(d)}=={v}"), "the playbook") for d, v in pins.items()]
    while todo:
        req, who = todo.pop(0)
        name = str(canonicalize_name(req.name))
        if name in chosen:
            if not req.specifier.contains(chosen[name].version, prereleases=True):
                raise WheelhouseError(f"{who} requires {name}{req.specifier}; {chosen[name].filename} was chosen")
            continue
        wheel = _pick(wheels, name, req.specifier)
        if wheel is None:
            raise WheelhouseError(f"{who} requires {name}{req.specifier or ''}; no wheel in the wheelhouse {where} "
                                  f"has it (pip download {name}{req.specifier or ''} -d {where})")
        chosen[name] = wheel
        base = environment(python, machine)
        for dep in requirements(wheel.metadata()):
            asked = req.extras or {""}
            if any(applies(dep, {**base, "extra": extra}) for extra in asked):
                todo.append((dep, f"{wheel.name} {wheel.version}"))
    return sorted(chosen.values(), key=lambda w: w.name)


def digest(pins: dict[str, str], python: str, wheels: Sequence[str] = ()) -> str:
    """The venv's name: the same pins on the same Python from the same wheels (their sha256) give the same venv;
    a wheel rebuilt under the same version makes another."""
    key = json.dumps({"python": python, "pins": sorted((canonical(d), v) for d, v in pins.items()),
                      "wheels": sorted(wheels)})
    return hashlib.sha256(key.encode()).hexdigest()[:16]
