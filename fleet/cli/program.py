"""`inv` and `fleet`: the tasks of the clone's tasks.py, from any folder (a site's, beside the clone, or the clone).

Both console scripts (pyproject.toml) run FleetProgram: invoke's Program with fleet's tasks bundled, so that
- `inv --version` says fleet's version (invoke's own `inv` answers before any tasks.py is read);
- a command line invoke cannot parse (`inv deploy --hots x`, a missing value or positional, an unknown task) is one
  line naming the option (and the nearest one it has: "did you mean --host?"), exit 2 (refused before anything
  changed), where invoke says exit 1;
- only the core options that mean something for fleet are there (-h, -V, -l and the listing and completion
  ones): invoke's others (`--dry`, `--echo`, `--warn-only`, `--prompt-for-sudo-password`, `-T`, `-f`, ...) act on
  shell commands run through invoke, which fleet never runs, so `fleet --dry deploy` deployed for real. They are
  gone from `--help` and refused, before a task or after it, in one line saying what fleet has instead (RETIRED).
fleet's `inv` and `invoke` replace invoke's in the venv (pip writes fleet's scripts after its dependencies');
`python -m invoke` still runs invoke's own. The site is found from the working folder (fleet.site).
"""

from __future__ import annotations

import difflib
import importlib.util
import re
import sys
from collections.abc import Collection as Names
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path

from invoke.collection import Collection
from invoke.completion.complete import print_completion_script
from invoke.config import Config
from invoke.exceptions import Exit, ParseError
from invoke.parser.argument import Argument
from invoke.program import Program

from fleet.cli import liblog, reader_gone, spellings, stopsignals, tasking
from fleet.cli.stopsignals import interrupted
from fleet.errors import EXIT_BAD_INPUT, did_you_mean, known_names

TASKS = Path(__file__).resolve().parents[2] / "tasks.py"  # the clone's (fleet.site.SHIPPED, without pydantic)
_UNKNOWN = re.compile(r"^No idea what '(.*)' is!$")
_NO_VALUE = re.compile(r"^Flag <\w+: ([\w-]+)[^>]*> needed value and was not given one!$")
_CAST = re.compile(r"'(.*)'$")
_MISSING = re.compile(r"^'([\w.-]+)' did not receive required positional arguments: (.*)$")

# invoke's core options fleet keeps: help, version, the task list and shell completion
CORE_KEPT = ("complete", "help", "list", "list-depth", "list-format", "print-completion-script", "version")
_DRY = "fleet's dry run is the task's own --dry-run (-n): `{b} deploy --dry-run ...`"
_SHELL = "fleet runs no local shell commands through invoke; `{b} probe -v` says how each host was reached"
_NO_CONFIG = "fleet reads no invoke config: a site's defaults are in fleet-site.yaml"
_OWN_TASKS = "fleet runs its own tasks, from any folder"
# invoke's other core (and task-runner) options, each with what fleet has in its place
RETIRED = {
    "--dry": _DRY, "-R": _DRY,
    "--echo": _SHELL, "-e": _SHELL, "--hide": _SHELL, "--pty": _SHELL, "--debug": _SHELL, "-d": _SHELL,
    "--warn-only": "a host that fails is already reported beside the others, exit 1",
    "--command-timeout": "deadlines are the task's own: `{b} exec --timeout`, `{b} deploy --host-timeout`",
    "-T": "deadlines are the task's own: `{b} exec --timeout`, `{b} deploy --host-timeout`",
    "--prompt-for-sudo-password": "sudo's password is asked once by the task's --ask-become-pass (-k): "
                                  "`{b} deploy -k ...`",
    "--config": _NO_CONFIG,
    "--write-pyc": "it has no meaning for fleet",
    "--collection": _OWN_TASKS, "--search-root": _OWN_TASKS, "-r": _OWN_TASKS, "--no-dedupe": _OWN_TASKS,
}


LIST_FORMATS = ("flat", "nested", "json")  # invoke's list_flat, list_nested, list_json

def _retired(flag: str, binary: str, task: str | None) -> str | None:
    """What a tired operator gets for an invoke option fleet dropped (None: not one of them). A short letter
    fleet's tasks use (-p, -w, -f, -c, -e...) is named as the task option it is (tasking.SHORT)."""
    long: dict[str, list[str]] = {}
    for name, letter in tasking.SHORT.items():
        long.setdefault(f"-{letter}", []).append(f"--{name.replace('_', '-')}")
    if flag in long:
        return f"{flag} is {' or '.join(long[flag])}, " + ("an option of some tasks, not of this one" if task else
                                                             "a task's option, given after the task's name")
    why = RETIRED.get(flag)
    if why is None:
        return None
    return f"{flag} is an option of invoke, not of fleet: {why.format(b=binary)}"


def _nearest(flag: str, context: object) -> str:
    """ "did you mean --host?" for the closest option the task (or the core) has, else nothing."""
    names = [f for f in getattr(context, "flags", {}) if f.startswith("--")] if flag.startswith("--") else []
    longer = [f for f in names if f.startswith(flag)]  # a name cut short (--p2p for --p2p-check), as getopt reads
    near = longer if len(longer) == 1 else difflib.get_close_matches(flag, names, n=1, cutoff=0.7)
    return f"; did you mean {near[0]}?" if near else ""


def _switch_before(word: str, argv: list[str]) -> str | None:
    """The switch a value was given to, which made invoke read the value as a task's name: `-w 2`, `--json=true`."""
    for i, typed in enumerate(argv):
        if typed.startswith("-") and "=" in typed and typed.partition("=")[2] == word:
            return typed.partition("=")[0]
        if typed == word and i and argv[i - 1].startswith("-") and "=" not in argv[i - 1]:
            return argv[i - 1]
    return None


def _option_two_words_before(word: str, argv: list[str]) -> str | None:
    """The option whose value came just before `word`, a second value it cannot take: `-p playbooks/*.yaml`, which
    the shell made `-p a.yaml b.yaml` (said as `no such task 'b.yaml'`)."""
    for i, typed in enumerate(argv):
        if typed == word and i >= 2 and not argv[i - 1].startswith("-") and argv[i - 2].startswith("-") \
                and "=" not in argv[i - 2]:
            return argv[i - 2]
        if typed == word and i >= 1 and argv[i - 1].startswith("--") and "=" in argv[i - 1]:
            return argv[i - 1].partition("=")[0]
    return None


def _typed(flag: str, argv: list[str]) -> str:
    """The word the operator typed that invoke read `flag` from: `-host` for -o (one dash before a long name is
    read as letters, -h -o -s -t), else the flag itself."""
    if len(flag) != 2 or flag.startswith("--"):
        return flag
    words = [w.partition("=")[0] for w in argv if w.startswith("-") and not w.startswith("--") and len(w) > 2]
    return next((w for w in words if w[1:].isalpha() and flag[1] in w[1:]), flag)


def refusal(exc: ParseError, binary: str, argv: list[str] | None = None, tasks: Sequence[str] = (),
            spaces: Sequence[str] = (),
            task_flags: Mapping[str, Names[str]] | None = None) -> str:
    """invoke's parse error as one line naming the option (or task) and where the right ones are listed; an unknown
    task with the nearest of `tasks` (`deploi`: did you mean deploy?), a namespace of them (`spaces`) said as one; an
    option of a task (`task_flags`) typed before the task's name said as one (`inv --dry-run deploy` said `no such
    option --dry-run`, as if fleet had no dry run)."""
    task = getattr(getattr(exc, "context", None), "name", None)
    task_flags = task_flags or {}
    said = str(exc)
    where = f"{binary} {task}" if task else binary
    helps = f"`{binary} {task} --help` lists its options" if task else f"`{binary} --list` lists the tasks"
    m = _UNKNOWN.match(said)
    if m and m.group(1).startswith("-"):
        flag = _typed(m.group(1), argv or [])
        if flag != m.group(1):  # `-host`: one dash, a long name
            near = _nearest("-" + flag, getattr(exc, "context", None))
            return f"{where}: no such option {flag} (one dash takes one letter){near} ({helps})"
        helps = helps if task else f"`{binary} --help` lists the options before a task, `{binary} TASK --help` a task's"
        context = getattr(exc, "context", None)
        hosts = spellings.host_flag(flag) if task and "--host" in getattr(context, "flags", {}) else ""
        retired = _retired(flag, binary, task)
        if flag in ("--dry-run", "-n") and "--check" in getattr(getattr(exc, "context", None), "flags", {}):
            retired = f"{flag} is no option of {task}: its dry run is --check, which changes nothing"  # inv patch
        if retired:
            return f"{where}: {retired}{hosts} ({helps})"
        if not task and any(flag in names for names in task_flags.values()):
            named = next((w for w in argv or [] if w in task_flags), None)
            if named is None or flag in task_flags[named]:
                return (f"{where}: {flag} is a task's option, given after the task's name: `{binary} "
                        f"{named or 'TASK'} {flag} ...`")
            return f"{where}: {flag} is an option of some tasks, not of {named} ({helps})"
        return f"{where}: no such option {flag}{_nearest(flag, context)}{hosts} ({helps})"
    flags = getattr(getattr(exc, "context", None), "flags", {})
    host = spellings.host_word(m.group(1), binary, task) if m and task and "--host" in flags else ""
    if m and task and (switch := _switch_before(m.group(1), argv or [])):
        arg = flags[switch] if switch in flags else None  # a Lexicon: .get() misses the short aliases
        if arg is not None and arg.positional:  # `inv exec sbx0 --cmd uptime`: sbx0 was taken as the command
            return (f"{where}: {switch} given twice: {arg.value!r} before it was read as its value (the task's first "
                    f"word){spellings.host_word(str(arg.value), binary, task) if '--host' in flags else ''} ({helps})")
        if arg is None or arg.kind is bool:
            return f"{where}: {switch} takes no value, so {m.group(1)!r} was read as a task's name ({helps})"
    if m and task and (option := _option_two_words_before(m.group(1), argv or [])):
        if option in flags and flags[option].kind is not list:  # `-i FILE sbx0`: not a second -i, a host
            return f"{where}: {option} takes one value, so {m.group(1)!r} after it was read as a task's name{host} " \
                   f"({helps})"
        return (f"{where}: {option} takes one value, so {m.group(1)!r} after it was read as a task's name (a shell's "
                f"glob or list gives several words: give each its own {option}) ({helps})")
    if m:
        word = m.group(1)
        if word in spaces:  # `inv sandbox`: a namespace, not a task
            return (f"{where}: {word!r} is a namespace of tasks, not a task: `{binary} --list {word}` lists its tasks "
                    f"(`{binary} {word}.TASK ...`)")
        if word in ("help", "version") and not task:  # git's words for them: the way to each said
            return spellings.help_word(word, binary, argv or [], tasks)
        near = did_you_mean(word.strip(), tasks) if word.strip() and not task else ""  # after a task: a stray word
        return f"{where}: no such task {word!r}{near}{host} (`{binary} --list` lists the tasks)"
    m = _NO_VALUE.match(said)
    if m:
        return f"{where}: --{m.group(1)} needs a value ({helps})"
    m = _MISSING.match(said)
    if m:
        names = ", ".join(n.strip().strip("'").replace("_", "-") for n in m.group(2).split(","))
        return f"{binary} {m.group(1)}: missing {names} ({helps})"
    return f"{where}: {said.rstrip('!')} ({helps})"


def help_first(argv: list[str], tasks: Names[str]) -> list[str]:
    """`inv --help deploy --host x` (or `--help=deploy`, `-h deploy`) as `inv deploy --help`: invoke read `deploy` as
    --help's value and refused `--host` as a core option it does not know. Help runs nothing, whatever words follow
    the task's name; a word there that is no task is refused as `inv WORD --help` refuses it (`deploi`: did you
    mean deploy?; `sandbox`: a namespace), not as the words after it."""
    flag, eq, word = argv[1].partition("=") if len(argv) > 1 else ("", "", "")
    rest = argv[2:] if eq else argv[3:]
    word = word if eq else (argv[2] if len(argv) > 2 else "")
    if flag not in ("-h", "--help") or not word or word.startswith("-") or not (rest or word in tasks):
        return argv
    return [argv[0], word, "--help"]


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


class FleetConfig(Config):
    """invoke's config without its files or INVOKE_* variables: they set how invoke runs shell commands, which fleet
    never does (`_NO_CONFIG`). A broken ~/.invoke.yaml (or /etc/invoke.yaml, INVOKE_RUNTIME_CONFIG) made every
    command, `--version` too, a YAML traceback, exit 1; a ~/.invoke.py ran."""

    def load_base_conf_files(self) -> None:
        pass

    def load_project(self, merge: bool = True) -> None:
        pass

    def load_runtime(self, merge: bool = True) -> None:
        pass

    def load_shell_env(self) -> None:
        pass


class FleetProgram(Program):
    """invoke's Program with only the core options that mean something for fleet (CORE_KEPT), its parse errors
    one line and exit 2 (invoke prints them raw and exits 1), and no config of invoke's read (FleetConfig)."""

    def run(self, argv: list[str] | None = None, exit: bool = True) -> None:  # noqa: A002 (invoke's name)
        """invoke's run, but a Ctrl-C before a task's own handling (parsing, a task's first imports) is
        `interrupted`, exit 130: invoke's ends it as exit 1, which reads as a host that failed. fleet runs no
        shell commands through invoke, so its UnexpectedExit never comes."""
        try:
            self.create_config()
            self.parse_core(argv)
            self.parse_collection()
            self.parse_tasks()
            self.parse_cleanup()
            self.update_config()
            self.execute()
        except Exit as exc:
            if exc.message:
                print(exc.message, file=sys.stderr)
            if exit:
                sys.exit(exc.code)
        except ParseError as exc:
            self._refused(exc)
            if exit:
                sys.exit(EXIT_BAD_INPUT)
        except KeyboardInterrupt:
            interrupted()

    def core_args(self) -> list[Argument]:
        return [arg for arg in super().core_args() if arg.name in CORE_KEPT]

    def task_args(self) -> list[Argument]:
        return []  # -c/--collection, -r/--search-root, --no-dedupe: fleet's tasks are bundled

    def parse_core(self, argv: list[str] | None) -> None:
        """invoke's, less what the dropped options did (debug logging, .pyc writing: never, as invoke's default)."""
        with self._bad_input():
            self.normalize_argv(argv)
            self.argv = help_first(self.argv, self.namespace.task_names if self.namespace else {})
            self.parse_core_args()
        sys.dont_write_bytecode = True
        if self.args.version.value:
            self.print_version()
            raise Exit
        if self.args["print-completion-script"].value:
            print_completion_script(shell=self.args["print-completion-script"].value, names=self.binary_names)
            raise Exit

    def update_config(self, merge: bool = True) -> None:
        """invoke's config, with none of the overrides the dropped options made (run.dry, run.echo, sudo...)."""
        self.config.load_overrides({}, merge=False)
        self.config.set_runtime_path(None)
        self.config.load_runtime(merge=False)
        if merge:
            self.config.merge()

    def parse_tasks(self) -> None:
        words = list(self.core.unparsed)
        asked = bool(self.args.help.value or self.args.complete.value or self.args.list.value
                     or "-h" in words or "--help" in words)
        if not asked:
            self._nothing_after_dashes(words)
            self._no_option_as_a_value(words)
        with self._bad_input():  # an option's kind (int, float) refuses its value while invoke parses it
            super().parse_tasks()
            self._repeatable_without_value()
        if not asked:
            self._one_task()
            self._no_core_after_task()
            self._no_empty_value()

    def _nothing_after_dashes(self, words: list[str]) -> None:
        """Words after `--` went to no task: `inv exec -H a -- nvidia-smi -L` said only `missing cmd`, `inv
        status -- x` ran as if without them. Refused, exit 2, before anything runs."""
        rest = self.core.remainder
        if not rest:
            return
        task = words[0] if words and words[0] in self.collection.task_names else None
        where = f"{self.binary} {task}" if task else self.binary
        quoted = f"'{rest}'" if "'" not in rest else f'"{rest}"'  # shown to retype, never run
        instead = (f"the command goes in --cmd: `{self.binary} exec ... --cmd {quoted}`"
                   if task == "exec" else "nothing is passed on")
        raise self._said(f"{where}: fleet's tasks take no words after `--` ({rest!r}): {instead}")

    def _no_option_as_a_value(self, words: list[str]) -> None:
        """invoke gives a task's positional parameter (unlock's host and token, recover's host) any next word that is
        no option of the task: `inv recover -g sandbox` said `--group takes no value`, `inv recover -i X -g` looked for
        a host named `-g`. An option word the task lacks is refused as the option it is elsewhere, exit 2."""
        contexts = {c.name: c for c in self.collection.to_contexts()}
        context = None
        for word in words:
            context = contexts.get(word, context)
            flag = word.partition("=")[0]
            if context is None or not context.positional_args or word in contexts or len(flag) < 2 \
                    or not flag.startswith("-") or flag in context.flags or flag in context.inverse_flags:
                continue
            where, helps = f"{self.binary} {context.name}", f"`{self.binary} {context.name} --help` lists its options"
            named = next((c.flags[flag].name for c in contexts.values() if flag in c.flags), None)
            if named is None:
                raise self._refused(ParseError(f"No idea what {flag!r} is!", context))
            long = "--" + named.strip("_").replace("_", "-")  # `all_`: --all
            one = (": it acts on the one host --host names" if any(a.name == "host" for a in context.positional_args)
                   else spellings.host_flag(flag) if "--host" in context.flags else "")
            said = f"{flag} is" if flag == long else f"{flag} is {long},"
            raise self._said(f"{where}: {said} an option of some tasks, not of this one{one} ({helps})")

    def _one_task(self) -> None:
        """invoke runs every task named on a command line, and fleet's first task ends the process (its exit
        code): `inv history -H a probe -H b` read a's history and never probed b, exit 0. Refused, exit 2."""
        if len(self.tasks) < 2:
            return
        first, second = str(self.tasks[0].name), str(self.tasks[1].name)
        switch = _switch_before(second, list(self.argv or []))
        why = (f"{switch} takes no value, so {second!r} was read as a second task" if switch else
               f"one task per command, and {second!r} is a second")
        raise self._said(f"{self.binary} {first}: {why} (run `{self.binary} {second} ...` on its own; "
                         f"`{self.binary} {first} --help` lists its options)")

    def _no_core_after_task(self) -> None:
        """invoke takes its own options after a task's name too (for `inv deploy --help`), so the others were taken
        there without a word: `inv status -F json` printed the board, exit 0 (`| jq` failed), `inv deploy ... -V`
        deployed, and `inv status -H x -l` listed the tasks instead. Refused, exit 2: they are the program's, typed
        before a task's name."""
        given = [arg for arg in self.core_via_tasks.args.values() if arg.got_value and arg.name != "help"]
        if not given:
            return
        task = str(self.tasks[0].name) if self.tasks else None
        if given[0].name == "list" and task and isinstance(given[0].value, str) and given[0].value:  # Ansible's -l
            raise self._said(f"{self.binary} {task}: {spellings.list_after_task(given[0].value, self.binary, task)}")
        names = {f"--{n}" if len(n) > 1 else f"-{n}" for n in given[0].names}
        typed = next((w.partition("=")[0] for w in self.argv or [] if w.partition("=")[0] in names),
                     f"--{given[0].name}")
        instead = "; a task's JSON is its --json (-j)" if given[0].name == "list-format" else ""
        raise self._said(f"{self.binary} {task}: {typed} is an option of `{self.binary}` itself, given before a "
                         f"task's name (`{self.binary} {typed} ...`), not of {task}{instead} (`{self.binary} {task} "
                         "--help` lists its options)")

    def _repeatable_without_value(self) -> None:
        """invoke reads a repeatable option (--host, --group, --set...) given no value as never given (its value
        starts as [], which its own check takes for one): `inv status -H $HOST` with HOST unset showed every host,
        exit 0. A value never begins with `-` (invoke would read it as an option), so the next word tells."""
        words = list(self.core.unparsed)
        if "-h" in words or "--help" in words:
            return  # help needs no value
        context = None
        for i, word in enumerate(words):
            if word in self.parser.contexts:
                context = self.parser.contexts[word]
            elif context is not None and word in context.flags and context.flags[word].kind is list:
                if i + 1 == len(words) or words[i + 1].startswith("-"):
                    raise ParseError(f"Flag {context.flags[word]!r} needed value and was not given one!",
                                     context)

    def _no_empty_value(self) -> None:
        """An option given '' (or blanks) was read as left out (`--serial "$BATCH"` with BATCH unset deployed every
        host at once, exit 0; `-i ''` read the site's inventory). Refused, exit 2: no option of fleet's means anything
        by it. A repeatable one's empty pattern is the targeting's own refusal."""
        for context in self.tasks:
            for arg in context.args.values():
                if arg.kind is not list and isinstance(arg.raw_value, str) and not arg.raw_value.strip():
                    where = f"{self.binary} {context.name}"
                    raise self._said(f"{where}: --{arg.names[0]} {arg.raw_value!r}: an empty value (an unset shell "
                                     f"variable?); leave the option out for its default (`{where} --help` lists "
                                     f"its options)")

    def print_task_help(self, name: str) -> None:
        """`inv --help TASK` as `inv TASK --help` (one task per command: no `[other tasks here ...]`)."""
        tasking.print_help(name, self.collection[name])

    def parse_cleanup(self) -> None:
        self._list_root()
        with self._bad_input(casts=False):
            super().parse_cleanup()

    def _list_root(self) -> None:
        """`inv -l deploy` said invoke's `Sub-collection 'deploy' not found!`, exit 1 (a failed host's code); `-F` is
        one of the formats invoke lists in."""
        shape = self.args["list-format"].value
        if shape not in LIST_FORMATS:  # invoke's AttributeError traceback ('no attribute list_nosuch'), exit 1
            raise self._said(f"{self.binary}: --list-format {shape!r}: one of {', '.join(LIST_FORMATS)} "
                             f"(`{self.binary} --help` lists the options before a task)")
        if shape == "json" and self.args["list-depth"].value:  # invoke's own line, exit 1
            raise self._said(f"{self.binary}: --list-depth with --list-format json: JSON lists every level "
                             f"(`{self.binary} --help` lists the options before a task)")
        root = self.args.list.value  # `inv history -l sbx0` (Ansible's -l) was refused after the task (core_after)
        if not isinstance(root, str):
            return
        try:
            self.collection.subcollection_from_path(root)
        except KeyError:
            spaces = list(self.collection.collections)
            why = (f"a task, not a namespace of tasks: `{self.binary} {root} --help` is its help"
                   if root in self.collection.task_names else
                   f"no such namespace of tasks{did_you_mean(root, spaces) or known_names(spaces)}")
            raise self._said(f"{self.binary}: --list {root}: {why} (`{self.binary} --list` lists the tasks)") from None

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

    def _said(self, line: str) -> Exit:
        sys.stderr.write(f"error: {line}\n")
        sys.stderr.flush()
        return Exit(code=EXIT_BAD_INPUT)

    def _miscast(self, exc: ValueError) -> Exit:
        return self._said(miscast(exc, list(self.argv or []), self.binary))

    def _refused(self, exc: ParseError) -> Exit:
        collection = getattr(self, "collection", None)
        flags = {str(c.name): set(c.flags) for c in collection.to_contexts()} if collection else {}
        return self._said(refusal(exc, self.binary, list(self.argv or []),
                                  list(collection.task_names) if collection else (),
                                  list(collection.collections) if collection else (), flags))


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
    """`inv ...`, `invoke ...` or `fleet ...`, named after the script that ran it (usage lines and errors say the
    same)."""
    stopsignals.answer()  # fleet.cli's quiet exit while it loaded, ended
    binary = name if (name := Path(sys.argv[0]).name) in ("inv", "invoke") else "fleet"
    tasking.BINARY[0] = binary
    try:
        liblog.install()
        FleetProgram(namespace=namespace(), name="fleet", binary=binary, version=version("fleet"),
                     config_class=FleetConfig).run()
    except BrokenPipeError:  # `fleet --help | head -5`: invoke's own help, list and version, the reader gone
        reader_gone(sys.stdout)
    except KeyboardInterrupt:  # while tasks.py and the task modules load
        interrupted()
    finally:  # the task has said all it says and chosen its exit code: a Ctrl-C in the exit itself (paramiko's
        # clean-up, the interpreter's: ~0.2 s, after Python put SIGINT's default action back) killed the process
        # silently, exit 130 for a run that had ended and shown its result
        try:
            stopsignals.ignore()
        except KeyboardInterrupt:  # one that came just before: its handler ran as ignore() began
            stopsignals.ignore()


if __name__ == "__main__":
    main()
