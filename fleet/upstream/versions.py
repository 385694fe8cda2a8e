"""Release versions and version ranges, as patch sets, playbooks, log rules and the flag table write them
(pure): '0.6.17rc1' sorts before '0.6.17'; a range is comma-separated clauses such as '>=0.5.8,<0.6.17'."""

from __future__ import annotations

import functools
import re

_CLAUSE = re.compile(r"^\s*(==|!=|<=|>=|<|>)\s*([0-9][0-9A-Za-z.+-]*)\s*$")
_PRE = re.compile(r"(a|b|rc|dev|alpha|beta|pre)\d*", re.I)


_STRICT = re.compile(r"\d{1,4}(?:\.\d{1,6}){0,3}(?:[.-]?(?:post|dev|rc|a|b)\d{0,6})?")


def is_version(text: object) -> bool:
    """Whether `text` is a plain release version (0.5.23, 0.5.8.post1, 0.7.0rc2): safe as a folder name of the
    corpus, where `version_key` reads any text that starts with digits."""
    return isinstance(text, str) and _STRICT.fullmatch(text) is not None


@functools.lru_cache(maxsize=4096)  # a check compares every flag against every release: the same few strings
def version_key(text: str) -> tuple[int, ...]:
    """A comparable key: numeric release parts; a pre-release (rc, a, b, dev) sorts before its release."""
    m = re.match(r"v?(\d+(?:\.\d+)*)(.*)$", text.strip())
    if not m:
        raise ValueError(f"not a version: {text!r}")
    parts = [int(p) for p in m.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    rest = m.group(2).lstrip(".-_")
    pre = bool(rest) and bool(_PRE.match(rest)) and not rest.startswith("post")
    return (*parts, -1 if pre else 0)


def parse_range(spec: str) -> list[tuple[str, tuple[int, ...]]]:
    """'>=0.5.8,<0.6.17' -> [('>=', key), ('<', key)]; ValueError names the bad clause."""
    clauses = []
    for raw in spec.split(","):
        m = _CLAUSE.match(raw)
        if not m:
            raise ValueError(f"bad version range clause {raw.strip()!r} (use e.g. '<0.6.17' or '>=0.5.8,<0.6')")
        clauses.append((m.group(1), version_key(m.group(2))))
    return clauses


def in_range(version: str, spec: str) -> bool:
    v = version_key(version)
    ops = {"==": v.__eq__, "!=": v.__ne__, "<": v.__lt__, "<=": v.__le__, ">": v.__gt__, ">=": v.__ge__}
    return all(ops[op](key) for op, key in parse_range(spec))
