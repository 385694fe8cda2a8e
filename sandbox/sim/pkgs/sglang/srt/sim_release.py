"""Which sglang release this simulated package stands for (SIMULATED; not a module of real sglang).

A wheel built by sandbox/sim/wheels.py carries `sim_release.json` beside this file, generated from that release's
real wheel (sandbox/sim/releases.py): its parser's prog name and flags, and the templates of the startup lines
fleet's phases read. Without it (sandbox/sim/install.py) the package is 0.5.9 as committed.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

_FILE = Path(__file__).with_name("sim_release.json")


@functools.lru_cache(maxsize=1)
def release() -> dict[str, Any]:
    return json.loads(_FILE.read_text()) if _FILE.is_file() else {}


def flags() -> list[dict[str, Any]] | None:
    """The release's flags (None: 0.5.9's, server_args_v0_5_9.json)."""
    return release().get("flags")


def prog() -> str | None:
    return release().get("prog")


def gates_as_released() -> bool:
    """The fusion gates sit where the release keeps them (0.5.2x: overrides.py, add_norm.py), not in 0.5.9's files."""
    return flags() is not None


def line(key: str, default: str, *by_count: tuple[Any, ...]) -> str | None:
    """The release's line for `key`, its placeholders filled with the values tuple of as many; None when the release
    prints no such line. `default` is 0.5.9's template (used without sim_release.json)."""
    lines = release().get("lines")
    template = default if lines is None else lines.get(key)
    if template is None:
        return None
    pieces = template.split("{}")
    values = next((v for v in by_count if len(v) == len(pieces) - 1), ())
    if len(values) != len(pieces) - 1:
        raise ValueError(f"no values for the {len(pieces) - 1} placeholders of {template!r}")
    out = pieces[0]
    for value, piece in zip(values, pieces[1:], strict=True):
        out += str(value) + piece
    return out
