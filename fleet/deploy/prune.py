"""A value the schema refused, left out of a raw document so that the schema can be asked again on the rest
(inv check, fleet.deploy.check)."""

from __future__ import annotations

from typing import Any

from fleet import yamlfile


def drop(data: Any, loc: yamlfile.Loc) -> yamlfile.Loc:
    """The value at `loc` left out, or the nearest mapping key above it (an item of a list, a type of a union); a
    required key is left (the schema says it missing again, which is not said twice). Where it was left out."""
    path = list(loc)
    while path:
        parent = _at(data, path[:-1])
        if isinstance(parent, dict) and path[-1] in parent:
            if not ((len(path) == 1 and path[0] in ("name", "model")) or tuple(path) in (("model", "path"),
                                                                                         ("router", "host"))):
                del parent[path[-1]]
            return tuple(path)
        path.pop()
    return ()


def _at(data: Any, path: list[str | int]) -> Any:
    """The value at `path`, or None where there is none."""
    for part in path:
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return None
    return data
