"""The command-line layer: every table, live board, `--json` view and exit code lives under fleet/cli/;
the library (the rest of fleet/) returns typed results and never prints. This module holds what every task
shares: host selection, errors as one line with a meaningful exit code, JSON output.

rich is imported only where something is drawn: `--json` paths, `inv --list` and `--help` never load it
(tests/integration/test_cli_imports.py), so the consoles below are made on their first use.

May use: every other subpackage of fleet; only tasks.py imports it, and only it imports rich."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from fleet.cli import loading  # noqa: F401 (first: a Ctrl-C while invoke loads is exit 130, not a traceback)

# isort: split
from invoke.exceptions import Exit

from fleet.cli import targets
from fleet.errors import EXIT_BAD_INPUT, FleetError, InputError, as_given

if TYPE_CHECKING:
    from rich.console import Console

    from fleet.inventory import Host
    from fleet.ssh.connect import ConnectOptions

HOST_HELP = {
    "inventory": "inventory file (default: the site's inventory/hosts.yaml, see fleet-site.yaml); a task that only "
                 "reads uses its hosts when no --host/--group is given",
    "host": "host name, address or pattern, as Ansible's --limit: globs ('gpu-0*'), '!NAME' leaves one out, commas "
            "(repeatable)",
    "group": "inventory group or pattern: globs ('pcie-*'), '!GROUP' leaves its hosts out, '&GROUP' keeps only its "
             "hosts (repeatable)",
    "json": "print pure JSON on stdout, nothing else",
    "accept_new_host_keys": "first contact: record unknown host keys in known_hosts (a changed key still fails)",
    "ask_become_pass": "prompt once for the sudo password of become hosts that name no become_password "
                       "(it goes to sudo on stdin, never in a command line)",
}
WIDE_HELP = "every column and value in full, however wide the terminal (for less -S); without it, every line fits"
# Tasks that change hosts: they act only on hosts named by --host/--group/--all, and ask before several.
CHANGE_HELP = {
    **HOST_HELP,
    "host": HOST_HELP["host"] + "; a task that changes hosts needs --host, --group or --all",
    "all": "every host of the inventory file (in place of --host/--group)",
    "yes": "go ahead on several hosts without showing the plan and asking (needed without a terminal)",
}


class _Deferred:
    """A rich Console made on first use (rich costs tens of milliseconds to import)."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._console: Console | None = None

    def real(self) -> Console:
        if self._console is None:
            from rich.console import Console

            class Quiet(Console):
                def on_broken_pipe(self) -> None:
                    """The reader went away (`inv status | head -3`): the rest is dropped and the task ends with
                    its own exit code (rich's own exits 1, which reads as `some host failed`)."""
                    self.quiet = True
                    reader_gone(self.file)

            self._console = Quiet(**self._kwargs)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)


def reader_gone(stream: Any) -> None:
    """What is still written to `stream` (stdout or stderr, whose reader went away) goes to /dev/null, Python's own
    flush at exit included."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError, AttributeError):  # not a file of this process (a test's StringIO)
        pass
    finally:
        os.close(devnull)


def real_console(out: Console) -> Console:
    """The Console itself, for what uses it as more than an object with methods (Live, `with`)."""
    return out.real() if isinstance(out, _Deferred) else out


console = cast("Console", _Deferred(stderr=False, highlight=False))
err_console = cast("Console", _Deferred(stderr=True, highlight=False))


def select_hosts(inventory_file: str | None, hosts: Sequence[str], groups: Sequence[str],
                 host_flag: str = "--host") -> list[Host]:
    """The hosts the patterns name (`hosts` given to `host_flag`, --host or --detail), checked before any contact."""
    from fleet import (
        inventory,  # deferred, as below: pydantic is most of what `inv --list` would load
        site,
    )

    here = site.find()  # FLEET_SITE or fleet-site.yaml wrong: exit 2 here, before any host (state lives there)
    say_site_over(here.root)
    if inventory_file:
        path = Path(inventory_file)
    else:
        path = here.inventory
        if not path.is_file():
            raise InputError(f"{path}: no inventory in the site {here.root} (copy "
                             f"{site.SHIPPED / 'inventory/hosts.example.yaml'} there, or pass --inventory)")
    inv = inventory.load(path)
    chosen = inv.select(hosts or [], groups or [], default_file=path, host_flag=host_flag)
    if not chosen:  # an empty group, or a file of no host: no target (exit 2), not a failed host
        given = as_given(hosts or [], groups or [], host_flag)
        raise InputError(f"{given}: no host is in it; nothing was contacted" if given else
                         f"{path}: no hosts in this inventory file; nothing was contacted")
    patterns = inventory.split_patterns([*(hosts or []), *(groups or [])])
    if any(inventory.is_glob(p) or p.startswith(("!", "&")) for p in patterns):  # say what the patterns resolved to
        say_on_stderr(f"{len(chosen)} host{'s' if len(chosen) > 1 else ''}: {targets.names(chosen)}")
    from fleet.ssh.connect import check_guard  # deferred: `inv --list` and `--help` load no SSH stack

    for host in chosen:  # refuse the whole run before any host is contacted
        check_guard(host)
    return chosen


_SAID_SITES: set[Path] = set()


def say_site_over(root: Path) -> None:
    """Once a process, on stderr: FLEET_SITE's site is used, not the one of the working folder (fleet.site.shadowed)."""
    from fleet import site

    other = site.shadowed()
    if other is None or other in _SAID_SITES:
        return
    _SAID_SITES.add(other)
    say_on_stderr(f"FLEET_SITE={os.environ.get('FLEET_SITE')} wins over the site of the working folder, {other}: "
                  f"the inventory and playbooks of {root} are used, not {other}'s (unset FLEET_SITE to use it)")


def changing_hosts(task: str, inventory_file: str | None, hosts: Sequence[str], groups: Sequence[str],
                   every: bool) -> list[Host]:
    """The hosts a task that changes hosts acts on: only those named by --host, --group or --all (exit 2)."""
    targets.require_target(task, hosts or [], groups or [], every)
    chosen = select_hosts(inventory_file, hosts, groups)
    use_wheelhouse(chosen)
    return chosen


def use_wheelhouse(hosts: Sequence[Host]) -> None:
    """The wheelhouse the hosts' inventory names (the sandbox's own), unless FLEET_WHEELHOUSE is set (a deploy that
    builds from it says so: wheelhouse_over_inventory); hosts whose files name different ones are refused in one line
    (one deploy builds from one wheelhouse)."""
    if os.environ.get("FLEET_WHEELHOUSE"):
        return
    named = {h.wheelhouse for h in hosts}
    if len(named) > 1:
        shown = ", ".join(sorted(str(w) if w else "the default" for w in named))
        raise InputError(f"the hosts' inventory files name different wheelhouses ({shown}): deploy them apart, or "
                         "set FLEET_WHEELHOUSE")
    if (only := next(iter(named), None)) is not None:
        os.environ["FLEET_WHEELHOUSE"] = str(only)


def wheelhouse_over_inventory(hosts: Sequence[Host]) -> None:
    """FLEET_WHEELHOUSE, the operator's, said where it replaces the wheelhouse the hosts' inventory names (after
    use_wheelhouse, which sets it to the inventory's where it was not set): a sandbox deploy built from the real
    wheelhouse without a word of it."""
    given = os.environ.get("FLEET_WHEELHOUSE")
    for named in sorted({str(h.wheelhouse) for h in hosts if given and h.wheelhouse and h.wheelhouse != Path(given)}):
        say_on_stderr(f"FLEET_WHEELHOUSE={given} over the wheelhouse {named} the inventory names "
                      f"({', '.join(h.name for h in hosts if str(h.wheelhouse) == named)[:200]})")


def options(hosts: Sequence[Host], accept_new_host_keys: bool = False, ask_become_pass: bool = False) -> ConnectOptions:
    """How to connect, with the become hosts' sudo passwords resolved (and prompted for) before any contact."""
    from fleet.ssh.become_password import become_passwords
    from fleet.ssh.connect import ConnectOptions

    if ask_become_pass and not any(h.become and h.become_password is None for h in hosts):
        say_on_stderr("--ask-become-pass: no host here uses become without a become_password of its own: nothing "
                      "to ask")  # -k on root hosts is a slip worth seeing, not a silence
    passwords = become_passwords(hosts, _ask_become_pass if ask_become_pass else None)
    return ConnectOptions(accept_new_host_keys=accept_new_host_keys, become_passwords=passwords,
                          on_new_host_key=say_on_stderr)  # each key recorded, with its fingerprint, always said


def _ask_become_pass() -> str:
    import getpass

    if not sys.stdin.isatty():
        raise InputError("--ask-become-pass needs a terminal to prompt on; give the hosts a become_password "
                         "reference (env: or file:) instead")
    return getpass.getpass("BECOME password: ")


def print_json(data: Any) -> None:
    """Indented JSON on stdout; pydantic models in data (the probe's facts) as their model_dump() would be.
    pydantic's serializer writes what json.dumps would for about a tenth of the CPU (json's C encoder is not
    used when it indents), and it is loaded already on every --json path (the inventory is pydantic)."""
    from pydantic_core import to_json

    try:
        sys.stdout.write(to_json(data, indent=2, fallback=str).decode() + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (| head): the task ends with its own exit code
        reader_gone(sys.stdout)


def print_results(results: Sequence[Any], as_json: bool, draw: Callable[[Any], None]) -> None:
    """`--json`: one host's result as its object, several as {"hosts": [...]}; else each drawn in turn."""
    if as_json:
        data = [r.to_json() for r in results]
        print_json(data[0] if len(data) == 1 else {"hosts": data})
    else:
        for r in results:
            draw(r)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        reader_gone(sys.stdout)


def reports_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn FleetError into `error: <one line>` on stderr and its exit code; Ctrl-C into exit 130; libraries' log
    records held for -v (fleet.cli.liblog)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            from fleet import parallel
            from fleet.cli import liblog
            from fleet.cli.liveline import say_now

            liblog.install()  # paramiko's (every library's) log records: to -v, never as tracebacks on stderr
            parallel.tell_interrupts_to(say_now)  # every run on hosts answers a Ctrl-C at once, not only a deploy's
            return fn(*args, **kwargs)
        except FleetError as exc:
            say_error(str(exc))
            raise Exit(code=exc.exit_code) from None
        except KeyboardInterrupt:
            say_error("interrupted", prefix="")
            raise Exit(code=130) from None

    return wrapper


def say_error(message: str, prefix: str = "error: ") -> None:
    """One line on stderr: coloured on a terminal, plain text (and no rich) otherwise."""
    from fleet.cli.hosttext import escape, visible  # rich-free until escape() is called
    from fleet.cli.tasking import as_run

    message = as_run(message)
    if sys.stderr.isatty():
        err_console.print((f"[bold red]{prefix}[/]" if prefix else "") + escape(message), soft_wrap=True)
    else:
        sys.stderr.write(f"{prefix}{visible(message)}\n")
        sys.stderr.flush()


def say_host_error(message: str, wide: bool = False, to: Console | None = None) -> None:
    """A host that gave no data (its journal, its releases, its gates could not be read): `error: ...` on stderr
    (`to`), never among the data on stdout; folded to the width as every sentence is (docs/cli.md#width)."""
    from fleet.cli.hosttext import escape

    real_console(to or err_console).print(f"[bold red]error:[/] {escape(message)}", soft_wrap=wide, highlight=False)


def say_on_stderr(message: str) -> None:
    """A progress line on stderr, plain, never on stdout (which --json keeps for its document)."""
    from fleet.cli.tasking import as_run

    sys.stderr.write(f"fleet: {as_run(message)}\n")
    sys.stderr.flush()


def bad_input(message: str) -> Exit:
    say_error(message)
    return Exit(code=EXIT_BAD_INPUT)
