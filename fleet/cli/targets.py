"""Which hosts a task that changes hosts acts on, with which playbook, and the operator's go-ahead.

- A task that changes hosts acts only on hosts named by --host, --group or --all; none of them is exit 2, and so
  are only `!`/`&` patterns without --all (they narrow a selection, they name no host: fleet.inventory).
- No default playbook: --playbook, or the one the inventory binds to the hosts' group (`playbook:` on a group);
  a host with neither, or hosts bound to different playbooks, is exit 2 naming them.
- More than one host: on a terminal the plan (hosts, playbook, batches) is shown on stderr and asked about;
  without a terminal --yes is needed. Every refusal happens before any host is contacted."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, TextIO

from fleet.errors import InputError

if TYPE_CHECKING:
    from fleet.inventory import Host  # pydantic: not loaded by `inv --list` or --help

NAMES_SHOWN = 12  # hosts named in a plan or an error before "and N more"
RELEASE_ID = re.compile(r"\d{8}T\d{6}Z-[0-9A-Za-z]{1,16}")  # fleet.host.releases.new_id()'s: 20261202T142659Z-ab12
BEFORE_FLEET = "before-fleet"


def names(hosts: Sequence[Host]) -> str:
    shown = ", ".join(h.name for h in hosts[:NAMES_SHOWN])
    more = len(hosts) - NAMES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def require_target(task: str, hosts: Sequence[str], groups: Sequence[str], every: bool) -> None:
    """Exit 2 unless the hosts are named: a task that changes hosts never defaults to the whole inventory."""
    from fleet.errors import as_given
    from fleet.inventory import only_narrowing  # deferred: pydantic is most of what `inv --list` loads

    narrowing = only_narrowing([*hosts, *groups])
    if every and (hosts or groups) and not narrowing:
        raise InputError("--all with --host/--group: give one or the other (with --all, only `!name` or `&group` "
                         "patterns, which narrow it)")
    if narrowing and not every:
        raise InputError(f"inv {task} changes hosts: {as_given(hosts, groups)} only narrows a selection; name the "
                         "hosts, or add --all for every host of the inventory but those")
    if not (hosts or groups or every):
        raise InputError(f"inv {task} changes hosts: name them with --host or --group, or --all for every "
                         "host of the inventory")


def typed_host(value: str, flag: str = "--host") -> str:
    """`--host 'gpu-*'`: the one host a task takes, as typed (quoted where a shell needs it)."""
    from fleet.errors import as_typed  # deferred, as above

    return as_typed(flag, value)


def check_to(to: str | None) -> None:
    """`rollback --to`: a release id as fleet makes them, or before-fleet; anything else is exit 2 before the
    inventory is read (a well-formed id a host does not have is that host's failure, with nothing changed)."""
    if to is None or to == BEFORE_FLEET or RELEASE_ID.fullmatch(to):
        return
    raise InputError(f"--to not a release id: {to[:60]!r} (fleet's look like 20261202T142659Z-ab12, as `inv history "
                     f"--host H` lists them; or {BEFORE_FLEET})")


def playbook_for(hosts: Sequence[Host], given: str | None) -> str:
    """--playbook when given (said where it replaces the playbook a host's group binds), else the playbook the
    inventory binds to every one of the hosts."""
    if given:
        _over_binding(hosts, given)
        _over_shipped(given)
        return given
    unbound = [h for h in hosts if h.playbook is None]
    if unbound:
        raise InputError(f"--playbook: not given, and no group of {names(unbound)} binds one "
                         "(`playbook:` on a group in the inventory); say which playbook to use")
    bound = {h.playbook for h in hosts}
    if len(bound) > 1:
        pairs = ", ".join(f"{h.name}: {h.playbook}" for h in hosts[:NAMES_SHOWN])
        raise InputError(f"--playbook: the hosts' groups bind different playbooks ({pairs}); "
                         "deploy one group at a time, or pass --playbook")
    (name,) = bound
    assert name is not None
    _over_shipped(name)
    return name


def _over_shipped(name: str) -> None:
    """A name the site's playbooks/ and the shipped ones both hold is the site's (fleet.site): said on stderr, as a
    stale copy kept in a site would otherwise win over the clone's newer one of that name without a word."""
    from fleet import playbook, site  # deferred, as above

    shipped = site.SHIPPED / "playbooks" / f"{name}.yaml"
    with suppress(InputError):
        if "/" not in name and shipped.is_file() and (used := playbook.resolve(name)).resolve() != shipped.resolve():
            sys.stderr.write(f"fleet: playbook {name} is the site's {used}, over the shipped {shipped}\n")
            sys.stderr.flush()


def _over_binding(hosts: Sequence[Host], given: str) -> None:
    """--playbook wins over the playbook the hosts' groups bind (docs/cli.md#which-playbook): where they differ it
    is said on stderr before anything is contacted, as a playbook's serve.unit over the inventory's unit is (a
    deploy of another playbook over a group's hosts was silent)."""
    from fleet import playbook  # deferred: pydantic, only where a playbook is given

    def same(a: str, b: str) -> bool:
        try:
            return playbook.resolve(a) == playbook.resolve(b)
        except InputError:
            return a == b
    over = [h for h in hosts if h.playbook is not None and not same(given, h.playbook)]
    for bound in sorted({str(h.playbook) for h in over}):
        which = [h for h in over if h.playbook == bound]
        sys.stderr.write(f"fleet: --playbook {given} over {bound}, which the inventory's groups bind "
                         f"to {names(which)}\n")
    sys.stderr.flush()


def confirm(task: str, hosts: Sequence[Host], yes: bool, plan: Sequence[str] = (),
            answers: TextIO | None = None) -> None:
    """Go ahead on one host, with --yes, or when the operator says yes to the plan (read from `answers`, else
    stdin); else exit 2."""
    if yes or len(hosts) <= 1:
        return
    answers = answers or sys.stdin
    if not answers.isatty():
        raise InputError(f"inv {task} would change {len(hosts)} hosts ({names(hosts)}): no terminal to ask on; "
                         "pass --yes to go ahead")
    lines = [f"inv {task} on {len(hosts)} hosts: {names(hosts)}", *(f"  {line}" for line in plan)]
    sys.stderr.write("\n".join(lines) + "\nGo ahead? [y/N] ")
    sys.stderr.flush()
    try:
        answer = answers.readline().strip().lower()
    except OSError:  # EIO: the terminal hung up while it asked (its SIGHUP may end the run as a Ctrl-C first)
        answer = ""
    if answer not in ("y", "yes"):
        raise InputError(f"inv {task}: not confirmed ({answer or 'no answer'}); nothing changed")
