"""The sudo passwords of become hosts, resolved before any host is contacted (their own module, so that
tasks which never read a playbook do not import the playbook stack to connect)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fleet import secretref
from fleet.errors import InputError
from fleet.inventory import Host


def become_passwords(hosts: Sequence[Host], ask: Callable[[], str] | None) -> dict[str, str]:
    """The sudo password of each become host, by name: the host's `become_password` reference (inventory),
    else the one `ask` prompts for once (--ask-become-pass), else none (sudo -n: a NOPASSWD rule)."""
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
