"""The hand-labelled truth for the audit (tests/upstream/truth/*.yaml) and how a gate is matched to a label."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from fleet.patches.audit import Gate

TRUTH = Path(__file__).parent / "truth"
_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)|^(\s*)class\s+(\w+)")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def where(text: str, line: int, python: bool) -> str:
    """The function a line sits in: the innermost enclosing `def`/`class` (Python), or the function the nearest
    line at column 0 above opens (C++, `__launch_bounds__` skipped); '' at module level."""
    lines = text.split("\n")
    if python:
        level = _indent(lines[line - 1])
        for raw in reversed(lines[:line - 1]):
            if not raw.strip() or _indent(raw) >= level:
                continue
            m = _DEF.match(raw)
            if m:
                return m.group(2) or m.group(4)
            level = _indent(raw)
        return ""
    for i in range(line - 2, -1, -1):
        raw = lines[i]
        if raw[:1].isalpha() and "(" in raw:
            names = [n for n in re.findall(r"([A-Za-z_]\w*)\s*\(", raw) if n not in _NOT_NAMES]
            if names:
                return names[0]
    return ""


_NOT_NAMES = {"__launch_bounds__", "if", "for", "while", "switch", "return", "sizeof", "defined"}


@dataclass(frozen=True)
class Label:
    file: str
    where: str
    text: str
    excludes: bool
    path: str  # fusion | trtllm_comm | other
    why: str
    seen_in: tuple[str, ...] = ()


def labels(name: str = "fusion_path.yaml") -> dict[tuple[str, str, str], Label]:
    out = {}
    for item in yaml.safe_load((TRUTH / name).read_text()):
        lab = Label(**{**item, "seen_in": tuple(item.get("seen_in", ()))})
        out[(lab.file, lab.where, lab.text)] = lab
    return out


def key(g: Gate, file_text: str) -> tuple[str, str, str]:
    return (g.file, where(file_text, g.line, g.file.endswith(".py")), g.text)
