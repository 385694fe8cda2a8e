"""Which startup phase an sglang log line says the server is in (pure), so each phase gets its own budget."""

from __future__ import annotations

import re

# First match wins; lines that match nothing leave the phase as it was. Wording: FACTS.md §2 and §3.
PHASE_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ready", re.compile(r"fired up and ready to roll|Capture cuda graph end|Uvicorn running on")),
    ("graph_capture", re.compile(r"Capture cuda graph (begin|bs)")),
    ("autotune", re.compile(r"autotun", re.I)),
    ("jit_compile", re.compile(r"\bJIT\b|Compiling|ninja|nvcc", re.I)),
    ("weight_load", re.compile(r"Load weight begin|Loading safetensors|Loading weights")),
    ("start", re.compile(r"Load weight end|KV Cache is allocated|Memory pool end|Init torch distributed")),
)


ORDER = ("start", "weight_load", "jit_compile", "autotune", "graph_capture", "ready")


def advance(current: str, line: str) -> str:
    """The phase after this line: startup moves forward only (autotune lines during capture don't go back)."""
    new = phase_of(line)
    if new is None or ORDER.index(new) <= ORDER.index(current):
        return current
    return new


def phase_of(line: str) -> str | None:
    for name, pattern in PHASE_MARKERS:
        if pattern.search(line):
            return name
    return None
