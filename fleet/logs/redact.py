"""Secrets that servers print about themselves, masked before a journal line reaches fleet's output.

sglang logs its whole ServerArgs at start, `api_key='...'` included; fleet relays journal lines (`inv logs`,
deploy progress and evidence), so every journal line it reads passes through `line` first.
"""

from __future__ import annotations

import re

MASK = "<secret>"
_ENV_KEY = re.compile(r"[A-Za-z0-9_]*API_KEY=")
_PATTERNS = [
    re.compile(r"""(\bapi_key\s*=\s*)(['"])(?:(?!\2).)+\2"""),  # ServerArgs(... api_key='sk-...')
    re.compile(r"""(--api-key[=\s]+)[^\s'"]+"""),  # a command line echoed
    re.compile(r"""(\bBearer\s+)[^\s'"]+""", re.IGNORECASE),
    re.compile(r"""(\b[A-Z0-9_]*API_KEY=)[^\s'"]+"""),
]


def line(text: str) -> str:
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + (m.group(2) + MASK + m.group(2) if m.re.groups > 1 else MASK), text)
    return text


def env_text(text: str) -> str:
    """An env file as fleet shows it (a dry run's diff): API keys' values masked (fleet itself keeps its key
    in a file of its own; an env file an earlier fleet or a person wrote may hold one)."""
    return "\n".join(f"{ln.split('=', 1)[0]}={MASK}" if _ENV_KEY.match(ln) else ln
                     for ln in text.splitlines()) + ("\n" if text.endswith("\n") else "")
