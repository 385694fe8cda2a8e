"""How a long step tells its caller what it is doing: a callback taking one line (the CLI draws it)."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str], None]


def quiet(message: str) -> None:
    """A Progress that says nothing."""
