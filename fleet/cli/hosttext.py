"""Text a host sent, made safe to draw: control characters shown (never obeyed by the terminal) and rich
markup escaped (never read as styles). Host output is data: `/dev/nvme0n1p2[/var/lib/docker]` prints as it
is, and `ESC[2J` prints as the letters `\\x1b[2J` instead of clearing the operator's screen."""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, Unicode line and paragraph separators, and the bidirectional overrides and
# isolates that reorder what a terminal shows ("Trojan source"), and lone surrogates (a host's non-UTF-8 file name
# through JSON), which a strict UTF-8 stdout refuses to write.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_CONTROL_BUT_LINES = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _shown(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def visible(text: str, lines: bool = True) -> str:
    """Every control character as its escape (`\\x1b`); newlines and tabs kept where `lines`."""
    return (_CONTROL_BUT_LINES if lines else _CONTROL).sub(_shown, text)


def escape(text: str, lines: bool = True) -> str:
    """visible(text) with rich markup escaped: safe inside a markup string."""
    from rich.markup import escape as markup_escape  # rich only where something is drawn

    return markup_escape(visible(text, lines))


def about(host: str, text: str) -> str:
    """`host: text`, unless the text names the host already, as fleet's errors do (`sbx0: ...`, `sbx0 (root@...`):
    the host said once."""
    return text if text.startswith((f"{host}:", f"{host} (")) else f"{host}: {text}"
