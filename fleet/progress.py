"""How a long step tells its caller what it is doing: a callback taking one line (the CLI draws it). A `Live`
line only says where the step stands now (phase, elapsed against its budget, the last line seen): a terminal
shows it in place of the one before; elsewhere it is dropped, the step's own lines (one per phase) suffice."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str], None]


def quiet(message: str) -> None:
    """A Progress that says nothing."""


class Live(str):
    """A progress line that stands for the step's state now, replaced by the next (see the module's docstring)."""


def prefixed(prefix: str, message: str) -> str:
    """`prefix + message`, still Live where `message` was."""
    return Live(prefix + message) if isinstance(message, Live) else prefix + message
