"""How fleet's tasks read their command line, the same in every task:

- one option vocabulary: an option's short letter is the same in every task that has it (SHORT), and no other
  option gets one (invoke's automatic letters made `-h` mean --host and `-s` six different things); one letter
  has two meanings, each the one its Unix tools give it, never both in one task (TWO_MEANINGS: -n);
- `-h` and `--help` are help wherever they are typed, before or after positional arguments: usage is printed
  and the task's body never runs (no inventory read, no host contacted);
- numbers are numbers: an option of NUMBERS that is not one is `--port abc: ...`, exit 2, before anything runs.

docs/cli.md shows SHORT as a table; tests/unit/cli/test_tasking.py checks that the two agree."""

from __future__ import annotations

import inspect
import math
import re
import shutil
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from invoke import tasks as invoke_tasks
from invoke.exceptions import Exit
from invoke.parser.argument import Argument
from invoke.parser.context import ParserContext, translate_underscores
from invoke.tasks import Task

from fleet.errors import EXIT_BAD_INPUT, EXIT_OK

# option -> its one short letter, in every task that has the option; the others have none. `-h` is help.
SHORT = {
    "inventory": "i",
    "host": "H",
    "group": "g",
    "playbook": "p",
    "yes": "y",
    "json": "j",
    "dry_run": "n",  # make -n, rsync -n: in the tasks that change hosts
    "lines": "n",  # tail -n, journalctl -n: in inv logs
    "verbose": "v",
    "follow": "f",
    "watch": "w",
    "ask_become_pass": "k",
    "cmd": "c",
}

# the one letter with two meanings: what an operator types from habit in each kind of task (a deploy's dry run as
# make's and rsync's; the last N lines of a journal as tail's and journalctl's). A task has one of them at most
# (FleetTask refuses both), and each typed in the other's task is refused, never taken for the other.
TWO_MEANINGS = {"n": ("dry_run", "lines")}

EXIT_CODES = (
    (0, "all done: every host ok (or nothing to do)"),
    (1, "some host failed, or what the task checks is not clean (drift, gates, a fatal log)"),
    (2, "refused before anything changed: bad input, no target, no --yes without a terminal, or the "
        "operator said no"),
    (130, "interrupted (Ctrl-C)"),
)
EXIT_CODES_HELP = "Exit codes:\n" + "\n".join(f"  {code:<3} {meaning}" for code, meaning in EXIT_CODES)
BINARY = ["inv"]  # what usage lines call the program: `fleet` when fleet.cli.program runs the tasks
HELP_HELP = "show this help and exit (nothing is read or contacted)"
_COMMAND = re.compile(r"(?<![\w./-])inv(?= [a-z][\w.-]*)")  # `inv deploy`, not a path's .venv/bin/inv


def as_run(line: str, binary: str | None = None) -> str:
    """A line fleet prints that names a command (`inv deploy ...`, the library's advice included) as the program the
    operator ran (`binary`, default BINARY's): `fleet deploy ...` under `fleet`."""
    binary = binary or BINARY[0]
    return line if binary == "inv" else _COMMAND.sub(binary, line)


def _whole(low: int, high: int, what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        text = text.strip()
        if not (text.isascii() and text.isdigit()) or not low <= int(text) <= high:
            raise ValueError(f"{what} from {low} to {high}")
        return int(text)
    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError("a number of seconds above 0, e.g. 2 or 0.5")
    return value


def _pairs(text: str) -> int:
    """Replicate pairs: 0 (none) or 2 to 20 (one pair has no spread to judge a difference by)."""
    text = text.strip()
    if text.isascii() and text.isdigit() and int(text) in (0, *range(2, 21)):
        return int(text)
    raise ValueError("0 (no replicates) or a whole number of interleaved pairs from 2 to 20 "
                     "(one pair has no spread to judge by)")


def parse_sm(text: str) -> int:
    """An SM as fleet writes it (120) or as nvidia-smi's compute_cap does (12.0); 8.6 is SM 86. One fleet knows,
    by the rule `inv check` holds a playbook's `when: sm` to (fleet.host.facts.unknown_sm)."""
    from fleet.host.facts import unknown_sm  # deferred: pydantic, only where an --sm is given

    text = text.strip()
    major, dot, minor = text.partition(".")
    if not text.isascii():
        sm = None
    elif dot and major.isdigit() and minor.isdigit() and len(minor) == 1:
        sm = int(major) * 10 + int(minor)
    else:
        sm = int(text) if text.isdigit() else None
    if sm is None:
        raise ValueError("an SM like 120, or a compute capability like 12.0")
    if problem := unknown_sm(sm):
        raise ValueError(problem)
    return sm


NUMBERS: dict[str, Callable[[str], Any]] = {
    "port": _whole(1, 65535, "a port"),
    "interval": _seconds,
    "host_timeout": _seconds,
    "wait": _seconds,
    "runs": _whole(1, 20, "a whole number of benchmark runs"),
    "budget": _whole(1, 100, "a whole number of server starts"),
    "requests": _whole(10, 100_000, "a whole number of requests per load point"),
    "pairs": _pairs,
    "hosts": _whole(1, 64, "a whole number of hosts"),
    "sm": parse_sm,
}


class FleetTask(Task[Any]):
    """An invoke Task with fleet's option vocabulary, help that never runs the task, and typed numbers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.__doc__ = (self.__doc__ or "").rstrip() + "\n\n" + EXIT_CODES_HELP

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[Argument]:
        params = list(self.argspec(self.body).parameters.values())
        helper = Argument(names=("help", "h"), kind=bool, default=False, help=HELP_HELP)
        args: list[Argument] = []
        for param in params:
            name = param.name
            names = [translate_underscores(name)]
            if name in SHORT:
                names.append(SHORT[name])
            opts: dict[str, Any] = {"names": names, "positional": name in self.positional,
                                    "help": self.help.get(name, self.help.get(name.strip("_")))}
            if "_" in name:
                opts["attr_name"] = name
            if name in self.iterable:
                opts["kind"], opts["default"] = list, []
            elif param.default not in (None, inspect.Signature.empty):
                opts["default"] = param.default
                if name not in NUMBERS:  # those stay text until __call__ says what is wrong with them
                    opts["kind"] = type(param.default)
            args.append(_Positional(helper, **opts) if opts["positional"] else Argument(**opts))
        letters = [n for a in args for n in a.names if len(n) == 1]
        if len(letters) != len(set(letters)):
            raise ValueError(f"{self.name}: one short letter for two options: {sorted(letters)}")
        unknown = set(self.help) - {p.name for p in params} - {p.name.strip("_") for p in params}
        if unknown and not ignore_unknown_help:
            raise ValueError(f"help for options that do not exist: {sorted(unknown)}")
        for posarg in reversed(list(self.positional)):  # positionals first, in their order (as invoke does)
            args.sort(key=lambda a: a.name != posarg)
        return [*args, helper]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        asked = kwargs.pop("help", False)
        if asked:
            print_help(self.name.strip("_"), self)
            raise Exit(code=EXIT_OK)
        for name, parse in NUMBERS.items():
            value = kwargs.get(name)
            if isinstance(value, str):
                try:
                    kwargs[name] = parse(value)
                except ValueError as exc:
                    sys.stderr.write(f"error: --{translate_underscores(name)} {value!r}: {exc}\n")
                    raise Exit(code=EXIT_BAD_INPUT) from None
        return super().__call__(*args, **kwargs)


class _Positional(Argument):
    """A positional argument that counts as given once -h/--help is: help needs none of them (invoke would
    otherwise stop at `'exec' did not receive required positional arguments`)."""

    def __init__(self, helper: Argument, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.helper = helper

    @property
    def value(self) -> Any:
        given = super().value
        return "" if given is None and self.helper.value else given

    @value.setter
    def value(self, arg: Any) -> None:
        self.set_value(arg, cast=True)


def task(*args: Any, **kwargs: Any) -> Any:
    """invoke's @task, made a FleetTask."""
    return invoke_tasks.task(*args, klass=FleetTask, **kwargs)


def print_help(name: str, task: FleetTask) -> None:
    """What `inv --help TASK` prints, from the same arguments; plain text on stdout, no rich."""
    context = ParserContext(name=name, args=task.get_arguments())
    indent, width = "  ", shutil.get_terminal_size((80, 24)).columns
    lines = [f"Usage: {BINARY[0]} {name} [--options]", "", "Docstring:"]
    doc = inspect.getdoc(task) or "none"
    lines += [indent + line if line.strip() else "" for line in doc.splitlines()]
    lines += ["", "Options:"]
    tuples = context.help_tuples()
    flag_width = max(len(flags) for flags, _ in tuples)
    wrap = textwrap.TextWrapper(width=max(30, width - flag_width - 5))
    for flags, text in tuples:
        chunks = wrap.wrap(text or "") or [""]
        lines.append(f"{indent}{flags.ljust(flag_width)}  {chunks[0]}".rstrip())
        lines += [" " * (len(indent) + flag_width + 2) + chunk for chunk in chunks[1:]]
    sys.stdout.write("\n".join(lines) + "\n\n")
    sys.stdout.flush()
