"""A set of pins (distribution -> exact version) checked against each other (pure): each pinned wheel's
Requires-Dist, read from its real METADATA, against the other pins, as pip would read it (PEP 440 and PEP 508:
markers evaluated for the hosts' platform, extras not asked for left out).

    conflicts({"sglang": "0.5.23", "flashinfer-python": "0.7.4"}, {"sglang": <its METADATA>}, "3.11")
    -> [("flashinfer-python", "sglang 0.5.23 requires flashinfer-python==0.7.2; the playbook pins 0.7.4")]
"""

from __future__ import annotations

import re
from email.parser import HeaderParser
from typing import Annotated

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pydantic import AfterValidator, BeforeValidator

_DIST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")  # PEP 508's name, bounded


def dist_name(text: str) -> str:
    """A distribution name as written (ValueError names it); canonical() normalises it."""
    if not _DIST.fullmatch(text):
        raise ValueError(f"{text[:60]!r} is not a distribution name (letters, digits, '.', '_', '-')")
    return text


def canonical(text: str) -> str:
    """'flashinfer_python' -> 'flashinfer-python' (PEP 503)."""
    return str(canonicalize_name(dist_name(text)))


def exact_version(text: object) -> str:
    """A pin: one exact PEP 440 version (no range, no wildcard), normalised ('v0.5.23' -> '0.5.23'); ValueError
    says what to write instead (YAML reads an unquoted 0.6 as a number)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        raise ValueError(f"{text} is a number in YAML: quote the version ('{text}')")
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not a version")
    try:
        return str(Version(text))
    except InvalidVersion:
        raise ValueError(f"{text[:60]!r} is not one exact version (write e.g. 0.5.23 or 0.6.16.post4, "
                         "no '==', range or '*')") from None


DistName = Annotated[str, AfterValidator(dist_name)]  # a playbook's `packages:` key
Pin = Annotated[str, BeforeValidator(exact_version)]  # and its value


def environment(python: str, machine: str = "x86_64") -> dict[str, str]:
    """The marker environment of a Linux host running CPython `python` on `machine`: its full version ('3.11.2')
    where the host said it, else X.Y ('3.11', read as 3.11.0 as pip reads --python-version)."""
    parts = python.split(".")
    full = ".".join([*parts, "0"][:3]) if len(parts) < 3 else python
    return {"python_version": ".".join(parts[:2]), "python_full_version": full, "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": machine, "os_name": "posix",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "platform_release": "", "platform_version": "", "implementation_version": full, "extra": ""}


def requirements(metadata: str) -> list[Requirement]:
    """The Requires-Dist of a METADATA text; a line that is not PEP 508 is passed over (never trusted)."""
    out = []
    for raw in HeaderParser().parsestr(metadata).get_all("Requires-Dist") or []:
        try:
            out.append(Requirement(str(raw)))
        except InvalidRequirement:
            continue
    return out


def applies(req: Requirement, env: dict[str, str]) -> bool:
    if req.marker is None:
        return True
    try:
        return bool(req.marker.evaluate(env))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return True  # a marker this environment cannot decide: checked rather than passed over


def conflicts(pins: dict[str, str], metadata: dict[str, str], python: str, machine: str = "x86_64",
              source: str = "the playbook") -> list[tuple[str, str]]:
    """(pinned distribution, one line) for each pin another pin's Requires-Dist does not allow; `metadata`:
    pinned distribution -> its wheel's METADATA (those without one cannot say what they require)."""
    env = environment(python, machine)
    wanted = {canonical(d): v for d, v in pins.items()}
    out: list[tuple[str, str]] = []
    for name in sorted(metadata):
        dist = canonical(name)
        for req in requirements(metadata[name]):
            target = str(canonicalize_name(req.name))
            if target == dist or target not in wanted or not applies(req, env):
                continue
            if not req.specifier.contains(Version(wanted[target]), prereleases=True):
                out.append((target, f"{dist} {wanted.get(dist, '?')} requires {target}{req.specifier}; {source} "
                                    f"pins {wanted[target]}"))
    return out


def pin_set(pins: dict[str, str]) -> dict[str, str]:
    """A playbook's `packages:` checked: names normalised (each once), each version exact."""
    out: dict[str, str] = {}
    for name, version in pins.items():
        dist = canonical(name)
        if dist in out:
            raise ValueError(f"{name!r} pins {dist} a second time")
        out[dist] = exact_version(version)
    return out


def unmet(pins: dict[str, str], installed: dict[str, str | None], venv: str, readable: set[str]) -> list[str]:
    """One line for each pin the venv's installed version does not meet as pip's == would (a local label
    such as +cu130 meets its release): a deploy stops at this, before the stop. A one-host or rolling deploy has
    built the venv of the pins by then (fleet.host.venvs); tune and multi-node deploys serve the venv as found.
    `readable`: the distributions the probe reads (a pin of another one is not judged here: `inv check` warns)."""
    out = []
    for dist, version in pins.items():
        if canonical(dist) not in readable:
            continue
        have = installed.get(canonical(dist))
        try:
            found: Version | None = Version(have) if have is not None and len(have) <= 64 else None
        except InvalidVersion:
            found = None  # what the host sent is printed only as a version
        if found is not None and SpecifierSet(f"=={version}").contains(found, prereleases=True):
            continue
        said = str(found) if found is not None else "none" if have is None else "a version that is not PEP 440"
        out.append(f"packages: the playbook pins {dist} {version}; the venv {venv} has {said} (only a one-host or "
                   "rolling inv deploy builds a venv of the pins: install them there, or change packages:)")
    return out
