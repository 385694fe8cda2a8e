"""The "did you mean" every name lookup shares (hosts, groups, playbooks): difflib's closest known name, the case
of the letters aside, else the names known (a short list in full, a long one cut)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

SHOWN = 12  # names listed in full where none is near; more are counted


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """ "; did you mean sbx1?" (SBX0 is sbx0), or nothing."""
    names = {k.lower(): k for k in known}
    near = difflib.get_close_matches(name.lower(), list(names), n=1, cutoff=0.6)
    return f"; did you mean {names[near[0]]}?" if near else ""


def known_names(known: Iterable[str]) -> str:
    """ " (known: a, b, c)", the first SHOWN of a long list and how many more."""
    names = sorted(known)
    listed = ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
    return f" (known: {listed or 'none'})"


def hint(name: str, known: Iterable[str]) -> str:
    """did_you_mean where a name is near, else known_names."""
    names = list(known)
    return did_you_mean(name, names) or known_names(names)
