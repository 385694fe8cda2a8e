"""Release versions and version ranges, as patch sets, playbooks, log rules and the flag table write them
(pure), compared as PEP 440 says with `packaging`: '0.6.17rc1' < '0.6.17' < '0.6.17.post1'.

A range is a PEP 440 specifier set ('>=0.5.8,<0.6.17', '~=0.6.3', '==0.5.*'). One deliberate difference from
pip's reading: a fleet range says where upstream's code changed, so its ordered clauses (<, <=, >, >=) follow
the versions' order alone. '>0.6.16' holds for 0.6.16.post4 and '<0.6.17' for 0.6.17rc1, where pip's
exclusive comparisons would leave both out. A Requires-Dist is read as pip reads it (`Requirement`)."""

from __future__ import annotations

import functools
import re
from typing import Annotated

from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import AfterValidator

_ORDERED = {"<": Version.__lt__, "<=": Version.__le__, ">": Version.__gt__, ">=": Version.__ge__}


_STRICT = re.compile(r"\d{1,4}(?:\.\d{1,6}){0,3}(?:[.-]?(?:post|dev|rc|a|b)\d{0,6})?")


def is_version(text: object) -> bool:
    """Whether `text` is a plain release version (0.5.23, 0.5.8.post1, 0.7.0rc2): safe as a folder name of the
    corpus, where `version_key` reads any text that starts with digits."""
    return isinstance(text, str) and _STRICT.fullmatch(text) is not None


@functools.lru_cache(maxsize=4096)  # a check compares every flag against every release: the same few strings
def version_key(text: str) -> Version:
    """The PEP 440 version of `text` (a leading 'v' allowed); ValueError names the text."""
    try:
        return Version(text.strip())
    except InvalidVersion:
        raise ValueError(f"not a version: {text!r}") from None


@functools.lru_cache(maxsize=1024)
def parse_range(spec: str) -> SpecifierSet:
    """'>=0.5.8,<0.6.17' -> its specifier set; ValueError names the bad clause."""
    for raw in spec.split(","):
        try:
            Specifier(raw.strip())
        except InvalidSpecifier:
            raise ValueError(f"bad version range clause {raw.strip()!r} (use e.g. '<0.6.17' or '>=0.5.8,<0.6')") \
                from None
    return SpecifierSet(spec)


def checked_range(spec: str | None) -> str | None:
    """The range as written, once parse_range takes it (a playbook keeps its own text)."""
    if spec is not None:
        parse_range(spec)
    return spec



def _range_text(spec: str) -> str:
    parse_range(spec)
    return spec


ReleaseRange = Annotated[str, AfterValidator(_range_text)]  # a data file's `releases:`, kept as written
def _holds(clause: Specifier, version: Version) -> bool:
    ordered = _ORDERED.get(clause.operator)
    if ordered is None:  # ==, !=, ~=, ===: PEP 440's own rules (local labels, zero padding, wildcards)
        return clause.contains(version, prereleases=True)
    return bool(ordered(Version(version.public), Version(clause.version)))


def in_range(version: str, spec: str) -> bool:
    """Whether `version` is in the range `spec` (ValueError when either is not one)."""
    v = version_key(version)
    return all(_holds(clause, v) for clause in parse_range(spec))
