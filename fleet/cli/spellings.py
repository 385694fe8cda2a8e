"""How an operator names hosts (and asks for help) in the tools fleet replaces, said as fleet's own spelling
(issue 46, findings 6 and 2): ssh's and pdsh's habit of a bare host word (`inv status sbx0`), Ansible's
`-l`/`--limit`, pdsh's `-w` and `-x`; git's `help` and `version` words.
Each was answered as something else: `no such task 'sbx0'`, `-i takes one value ... give each its own -i` (an
inventory file for a host), `--cmd takes no value` (it takes one), `--list sbx0: no such namespace of tasks`."""

from __future__ import annotations

from collections.abc import Sequence

# options of other tools that name hosts, and fleet's in their place (a task that takes --host)
HOST_FLAGS = {
    "--limit": "Ansible's --limit: fleet's is --host (-H), which reads as it does (globs, '!NAME', commas)",
    "-x": "pdsh's -x (hosts left out): fleet's is --host '!NAME' (with --all in a task that changes hosts)",
    "--exclude": "pdsh's --exclude: fleet's is --host '!NAME' (with --all in a task that changes hosts)",
    "-w": "as pdsh's -w (the hosts), fleet's is --host (-H)",
}


def host_word(word: str, binary: str, task: str) -> str:
    """The hint for a bare word a task read as nothing of its own, where it may be a host's name or address."""
    if not word.strip() or word.startswith("-") or any(c in word for c in "/ =;|") \
            or word.endswith((".yaml", ".yml")):
        return ""
    return f"; a host is named with --host: `{binary} {task} --host {word}`"


def host_flag(flag: str) -> str:
    """What fleet has for another tool's host option (`; ...`), else ''."""
    said = HOST_FLAGS.get(flag)
    return f"; {said}" if said else ""


def list_after_task(root: object, binary: str, task: str) -> str:
    """`inv history -l sbx0`: invoke's -l (--list, before a task) where Ansible's -l (--limit) was meant."""
    shown = f" --host {root}" if isinstance(root, str) and root else " --host NAME"
    return (f"-l is --list, an option before a task (it lists the tasks); the hosts a task acts on are --host (-H), "
            f"as Ansible's -l/--limit: `{binary} {task}{shown}`")


def help_word(word: str, binary: str, argv: list[str], tasks: Sequence[str]) -> str:
    """`inv help [TASK]` and `inv version`, as git and many tools take them: what fleet has in their place."""
    if word == "version":
        return f"{binary}: no such task 'version': fleet's version is `{binary} --version`"
    after = argv[argv.index(word) + 1:] if word in argv else []
    if after and after[0] in tasks:
        return f"{binary}: no such task 'help': {after[0]}'s help is `{binary} {after[0]} --help`"
    return (f"{binary}: no such task 'help': help is `{binary} --help` (a task's: `{binary} TASK --help`; "
            f"`{binary} --list` lists the tasks)")
