"""`inv` and `fleet`: the tasks of the clone's tasks.py, from any folder (a site's, beside the clone, or the clone).

Both console scripts (pyproject.toml) run FleetProgram: invoke's Program with fleet's tasks bundled, so that
- `inv --version` says fleet's version (invoke's own `inv` answers before any tasks.py is read);
- a command line invoke cannot parse (`inv deploy --hots x`, a missing value or positional, an unknown task) is one
  line naming the option, exit 2 (refused before anything changed), where invoke says exit 1.
fleet's `inv` replaces invoke's in the venv (pip writes fleet's scripts after its dependencies'); `python -m invoke`
still runs invoke's own. The site is found from the working folder (fleet.site).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path

from invoke.collection import Collection
from invoke.exceptions import Exit, ParseError
from invoke.program import Program

from fleet.cli import tasking
from fleet.errors import EXIT_BAD_INPUT

TASKS = Path(__file__).resolve().parents[2] / "tasks.py"  # the clone's (fleet.site.SHIPPED, without pydantic)
_UNKNOWN = re.compile(r"^No idea what '(.*)' is!$")
_NO_VALUE = re.compile(r"^Flag <\w+: ([\w-]+)[^>]*> needed value and was not given one!$")
_CAST = re.compile(r"'(.*)'$")
_MISSING = re.compile(r"^'([\w.-]+)' did not receive required positional arguments: (.*)$")


def refusal(exc: ParseError, binary: str) -> str:
    """invoke's parse error as one line naming the option (or task) and where the right ones are listed."""
    task = getattr(getattr(exc, "context", None), "name", None)
    said = str(exc)
    where = f"{binary} {task}" if task else binary
    helps = f"`{binary} {task} --help` lists its options" if task else f"`{binary} --list` lists the tasks"
    m = _UNKNOWN.match(said)
    if m and m.group(1).startswith("-"):
        return f"{where}: no such option {m.group(1)} (" + (helps if task else f"`{binary} --help` lists the options "
                                                            f"before a task, `{binary} TASK --help` a task's") + ")"
    if m:
        return f"{where}: no such task {m.group(1)!r} (`{binary} --list` lists the tasks)"
    m = _NO_VALUE.match(said)
    if m:
        return f"{where}: --{m.group(1)} needs a value ({helps})"
    m = _MISSING.match(said)
    if m:
        names = ", ".join(n.strip().strip("'").replace("_", "-") for n in m.group(2).split(","))
        return f"{binary} {m.group(1)}: missing {names} ({helps})"
    return f"{where}: {said.rstrip('!')} ({helps})"


def miscast(exc: ValueError, argv: list[str], binary: str) -> str:
    """invoke's cast error (`invalid literal for int() with base 10: 'abc'`) as one line naming the option the
    value was given to (the word before it on the command line, or `--opt=value`)."""
    m = _CAST.search(str(exc))
    value = m.group(1) if m else None
    option = "an option"
    for i, word in enumerate(argv):
        if value is not None and word.startswith("-") and word.endswith(f"={value}"):
            option = word.partition("=")[0]
        elif value is not None and word == value and i and argv[i - 1].startswith("-"):
            option = argv[i - 1]
    kind = "a whole number" if "int()" in str(exc) else "a number"
    shown = repr(value[:40]) if value is not None else "its value"
    return f"{binary}: {option} {shown}: want {kind} (`{binary} TASK --help` lists a task's options)"


class FleetProgram(Program):
    """invoke's Program, its parse errors one line and exit 2 (invoke prints them raw and exits 1)."""

    def parse_core(self, argv: list[str] | None) -> None:
        with self._bad_input():
            super().parse_core(argv)

    def parse_tasks(self) -> None:
        with self._bad_input():  # an option's kind (int, float) refuses its value while invoke parses it
            super().parse_tasks()

    def parse_cleanup(self) -> None:
        with self._bad_input(casts=False):
            super().parse_cleanup()

    @contextmanager
    def _bad_input(self, casts: bool = True) -> Iterator[None]:
        """invoke's parse errors (and, while it casts values, its ValueErrors) as one line and exit 2."""
        try:
            yield
        except ParseError as exc:
            raise self._refused(exc) from None
        except ValueError as exc:
            if not casts:
                raise
            raise self._miscast(exc) from None

    def _miscast(self, exc: ValueError) -> Exit:
        sys.stderr.write(f"error: {miscast(exc, list(self.argv or []), self.binary)}\n")
        sys.stderr.flush()
        return Exit(code=EXIT_BAD_INPUT)

    def _refused(self, exc: ParseError) -> Exit:
        sys.stderr.write(f"error: {refusal(exc, self.binary)}\n")
        sys.stderr.flush()
        return Exit(code=EXIT_BAD_INPUT)


def namespace() -> Collection:
    if not TASKS.is_file():
        sys.stderr.write(f"error: {TASKS}: no tasks.py beside the fleet package: install fleet from its clone "
                         "(./bootstrap.sh there, or pip install -e CLONE)\n")
        raise SystemExit(EXIT_BAD_INPUT)
    spec = importlib.util.spec_from_file_location("fleet_tasks", TASKS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Collection.from_module(module)


def main() -> None:
    """`inv ...` or `fleet ...`, named after the script that ran it (usage lines and errors say the same)."""
    binary = "inv" if Path(sys.argv[0]).name == "inv" else "fleet"
    tasking.BINARY[0] = binary
    FleetProgram(namespace=namespace(), name="fleet", binary=binary, version=version("fleet")).run()


if __name__ == "__main__":
    main()
