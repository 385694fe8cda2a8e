"""How the CLI words a count: `1 file`, `2 files` (never `1 files`)."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`n noun`, the noun in the plural unless n is 1 (`plural`: where adding an s is wrong)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
