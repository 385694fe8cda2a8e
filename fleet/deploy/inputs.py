"""A command's inputs, checked before any host is contacted: the playbook (with the rule classes and patch
sets it may name) and its secrets, resolved locally; values never reach the output (the hosts' sudo passwords:
fleet.ssh.become_password)."""

from __future__ import annotations

from pathlib import Path

from fleet import playbook, secretref
from fleet.errors import InputError
from fleet.host.render import API_KEY
from fleet.logs import rules as logrules
from fleet.patches import sets as patchsets


def load_playbook(name: str) -> tuple[playbook.Playbook, Path]:
    path = playbook.resolve(name)
    classes = {c.value for c in logrules.LogClass}
    return playbook.load(path, known_classes=classes, known_patches=set(patchsets.available())), path


def secrets_for(book: playbook.Playbook) -> dict[str, str]:
    """Resolve the playbook's secret references locally; values never reach the output."""
    ref = book.serve.api_key
    if ref is None:
        return {}
    owner = f"playbook {book.name}"
    value = secretref.resolve(ref, owner, "serve.api_key", "key", " (an empty key turns auth off)")
    if any(c.isspace() for c in value):
        raise InputError(f"{owner}: {ref.where('serve.api_key')}: the key has spaces or control characters")
    return {API_KEY: value}
