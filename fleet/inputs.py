"""A command's inputs, checked before any host is contacted: the playbook (with the rule classes and patch
sets it may name), its secrets and the hosts' sudo passwords, resolved locally; values never reach the output."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from fleet import logrules, patchsets, playbook, secretref
from fleet.errors import InputError
from fleet.inventory import Host
from fleet.render import API_KEY


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


def become_passwords(hosts: Sequence[Host], ask: Callable[[], str] | None) -> dict[str, str]:
    """The sudo password of each become host, by name, resolved before any host is contacted: the host's
    `become_password` reference (inventory), else the one `ask` prompts for once (--ask-become-pass), else
    none (sudo -n: a NOPASSWD rule)."""
    found: dict[str, str] = {}
    asked: str | None = None
    for host in hosts:
        if not host.become:
            continue
        if host.become_password is not None:
            found[host.name] = secretref.resolve(host.become_password, f"{host.source}: hosts.{host.name}",
                                                 "become_password", "password")
        elif ask is not None:
            if asked is None:
                asked = ask()
                if not asked or "\n" in asked or "\r" in asked:
                    raise InputError("--ask-become-pass: an empty password or one with a line break cannot be "
                                     "given to sudo")
            found[host.name] = asked
    return found
