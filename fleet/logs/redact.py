"""Secrets that servers print about themselves, masked before a journal line reaches fleet's output; env and
unit files masked by their variables' names before a diff shows them.

sglang logs its whole ServerArgs at start, `api_key='...'` included; fleet relays journal lines (`inv logs`,
deploy progress and evidence), so every journal line it reads passes through `line` first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from fleet.secretref import MASK, is_secret_name

# NAME=value, the value quoted or not; inside quotes ("NAME=a b", as Environment= writes it) up to the quote
_ASSIGN = re.compile(r"""(?P<q>["'])?(?P<name>[A-Za-z_][A-Za-z0-9_]*)="""
                     r"""(?P<value>(?(q)[^"']*|(?:"(?:[^"\\]|\\.)*"?|'[^']*'?|[^\s"']*)))""")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_PATTERNS = [
    re.compile(r"""(\bapi_key\s*=\s*)(['"])(?:(?!\2).)+\2"""),  # ServerArgs(... api_key='sk-...')
    re.compile(r"""(--api-key[=\s]+)[^\s'"]+"""),  # a command line echoed
    re.compile(r"""(\bBearer\s+)[^\s'"]+""", re.IGNORECASE),
    re.compile(r"""(\b[A-Z0-9_]*API_KEY=)[^\s'"]+"""),
]
_ENV_ASSIGN = re.compile(r"""(\b([A-Z_][A-Z0-9_]*)=)(?!<secret>)[^\s'"]+""")  # HF_TOKEN=hf_... echoed by a program


def line(text: str) -> str:
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + (m.group(2) + MASK + m.group(2) if m.re.groups > 1 else MASK), text)
    return _ENV_ASSIGN.sub(lambda m: m.group(1) + MASK if is_secret_name(m.group(2)) else m.group(0), text)


def env_text(data: bytes | str, secret_names: Iterable[str] = ()) -> str:
    """An env or unit file as fleet shows it (a dry run's diff), from whatever bytes a host holds: not UTF-8
    shown as \\x escapes, control characters escaped, and the value of every assignment whose name says it is
    secret (fleet.secretref.is_secret_name, plus `secret_names`) masked, as `NAME=`, `export NAME=` or inside
    `Environment=`; secrets a command line carries (--api-key) as in journal lines."""
    text = data.decode("utf-8", "backslashreplace") if isinstance(data, bytes) else data
    names = tuple(secret_names)

    def mask(m: re.Match[str]) -> str:
        head = f"{m['q'] or ''}{m['name']}="
        if is_secret_name(m["name"], names):
            return head + MASK
        return head + _ASSIGN.sub(mask, m["value"])  # Environment=NAME=value: the value is an assignment too

    lines = [line(_ASSIGN.sub(mask, _CONTROL.sub(lambda c: f"\\x{ord(c.group(0)):02x}", ln)))
             for ln in text.splitlines()]
    return "\n".join(lines) + ("\n" if text.endswith(("\n", "\r")) else "")
