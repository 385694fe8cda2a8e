"""A command's inputs, checked before any host is contacted: the playbook (with the rule classes and patch
sets it may name) and its secrets, resolved locally; values never reach the output (the hosts' sudo passwords:
fleet.ssh.become_password)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fleet import playbook, secretref
from fleet.errors import InputError
from fleet.host.render import API_KEY, RenderError, key_file, load_credential
from fleet.inventory import Host
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


def check_units(book: playbook.Playbook, hosts: Sequence[Host]) -> None:
    """What the unit file will need of each host's unit name, checked before any host is contacted (a unit
    like `a:b` cannot name its API key file in LoadCredential=, which render would refuse mid-deploy)."""
    if book.serve.api_key is None:
        return
    for host in hosts:
        unit = book.serve.unit or host.unit
        try:
            load_credential(key_file(unit))
        except RenderError:
            where = f"playbook {book.name}: serve.unit" if book.serve.unit else f"{host.source}: hosts.{host.name}.unit"
            raise InputError(f"{where}: {unit!r} with serve.api_key: the key file {key_file(unit)} cannot be "
                             "named in LoadCredential= (':' or a space); rename the unit") from None
