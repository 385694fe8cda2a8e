"""YAML files that can say where a key lives: errors name the file and line, not only the key."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from fleet.errors import InputError

# Where a value sits in a YAML document: the keys and list indexes down to it, e.g. ("ladder", 0, "flags").
Loc = tuple[str | int, ...]

@dataclass
class Document:
    path: Path
    data: Any
    lines: dict[Loc, int] = field(default_factory=dict)

    def line_of(self, loc: Loc) -> int | None:
        """The line of the deepest key of `loc` that the file has."""
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get(())

    def error(self, loc: Loc, message: str) -> InputError:
        line = self.line_of(loc)
        where = f"{self.path}:{line}" if line else str(self.path)
        key = ".".join(str(p) for p in loc)
        return InputError(f"{where}: {key + ': ' if key else ''}{message}")

    def validation_error(self, err: ValidationError) -> InputError:
        """The first problem pydantic found, as one line naming file, line and key."""
        first = err.errors()[0]
        loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            msg = "unknown key"
        elif first["type"] == "missing":
            msg = "required key is missing"
        return self.error(loc, msg)


def load(path: Path) -> Document:
    """Parse a YAML file, rejecting duplicate keys, and record the line of every mapping key."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{where}: invalid YAML: {problem}") from None
    doc = Document(path=path, data=None)
    if node is None:
        return doc
    doc.lines[()] = node.start_mark.line + 1
    _walk(node, (), doc)
    doc.data = yaml.safe_load(text)
    return doc


def _walk(node: yaml.Node, loc: Loc, doc: Document) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: set[object] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                raise InputError(f"{doc.path}:{key_node.start_mark.line + 1}: "
                                 f"{'.'.join(map(str, (*loc, key)))}: duplicate key")
            seen.add(key)
            doc.lines[(*loc, key)] = key_node.start_mark.line + 1
            _walk(value_node, (*loc, key), doc)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            doc.lines[(*loc, i)] = item.start_mark.line + 1
            _walk(item, (*loc, i), doc)
