"""What the operator typed, read around a word invoke could not place (pure): the option a value was given to, an
option of one value typed twice, `-host` read as letters, `--help TASK ...` (fleet.cli.program says each)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from invoke.parser.argument import Argument


def switch_before(word: str, argv: list[str]) -> str | None:
    """The switch a value was given to, which made invoke read the value as a task's name: `-w 2`, `--json=true`."""
    for i, typed in enumerate(argv):
        if typed.startswith("-") and "=" in typed and typed.partition("=")[2] == word:
            return typed.partition("=")[0]
        if typed == word and i and argv[i - 1].startswith("-") and "=" not in argv[i - 1]:
            return argv[i - 1]
    return None


def option_two_words_before(word: str, argv: list[str]) -> str | None:
    """The option whose value came just before `word`, a second value it cannot take: `-p playbooks/*.yaml`, which
    the shell made `-p a.yaml b.yaml` (said as `no such task 'b.yaml'`)."""
    for i, typed in enumerate(argv):
        if typed == word and i >= 2 and not argv[i - 1].startswith("-") and argv[i - 2].startswith("-") \
                and "=" not in argv[i - 2]:
            return argv[i - 2]
        if typed == word and i >= 1 and argv[i - 1].startswith("--") and "=" in argv[i - 1]:
            return argv[i - 1].partition("=")[0]
    return None


def given_again(word: str, argv: list[str], flags: Mapping[str, Argument]) -> tuple[str, str] | None:
    """An option of one value typed again, `word` its second value, which invoke read as a task's name (`-p a -p b`
    said `no such task 'b'` and offered `--host b`): the option as typed again, and its first value."""
    for i, typed in enumerate(argv):
        if typed != word or i < 2 or argv[i - 1] not in flags or "=" in argv[i - 1]:
            continue
        arg = flags[argv[i - 1]]
        if arg.kind in (list, bool):
            continue
        if any(w.partition("=")[0] in flags and flags[w.partition("=")[0]] is arg for w in argv[:i - 1]):
            return argv[i - 1], str(arg.value)
    return None


def typed(flag: str, argv: list[str]) -> str:
    """The word the operator typed that invoke read `flag` from: `-host` for -o (one dash before a long name is
    read as letters, -h -o -s -t), else the flag itself."""
    if len(flag) != 2 or flag.startswith("--"):
        return flag
    words = [w.partition("=")[0] for w in argv if w.startswith("-") and not w.startswith("--") and len(w) > 2]
    return next((w for w in words if w[1:].isalpha() and flag[1] in w[1:]), flag)


def help_first(argv: list[str], tasks: Collection[str]) -> list[str]:
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
