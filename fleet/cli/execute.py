"""`inv exec`: one command's output on every host, as a table or JSON."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fleet.cli import console, err_console, print_json, real_console
from fleet.cli.hosttext import escape, visible
from fleet.cli.liveline import clear_all, progress_on_stderr, say_now
from fleet.errors import EXIT_HOST_FAILED, EXIT_INTERRUPTED, EXIT_OK
from fleet.host import execute
from fleet.host.session import CommandResult
from fleet.inventory import Host
from fleet.parallel import HostOutcome
from fleet.ssh.connect import ConnectOptions

if TYPE_CHECKING:
    from rich.console import Console


def report(outcomes: list[HostOutcome[CommandResult]], as_json: bool, wide: bool = False,
           out: Console | None = None, err: Console | None = None) -> int:
    """The host's output is data: escaped before it meets rich, its control characters shown (JSON escapes
    them its own way). Folded within the terminal's width, or with wide each output line whole, the command's
    stderr on stderr (`err`)."""
    failed = [o for o in outcomes if not (o.ok and o.value and o.value.ok)]
    if as_json:
        print_json({"hosts": [
            {"host": o.host.name, "address": o.host.address, "ok": bool(o.ok and o.value and o.value.ok),
             "error": o.error, "unreached": o.unreached, "exit": o.value.exited if o.value else None,
             "stdout": o.value.stdout if o.value else None, "stderr": o.value.stderr if o.value else None,
             "seconds": round(o.seconds, 3)}
            for o in outcomes]})
    elif wide:
        _lines(outcomes, len(outcomes) - len(failed), real_console(out or console), real_console(err or err_console))
    else:
        from rich.table import Table

        from fleet.cli import fit  # rich: loaded only where a table is drawn, never on the --json path

        # why a host gave no output is a sentence: under the table, folded at the terminal's width (in the cell,
        # 40 columns at 80, a host key's fingerprint broke in two)
        said = [escape(o.error) for o in outcomes if o.value is None and o.error]
        table = Table(title=f"{len(outcomes) - len(failed)}/{len(outcomes)} hosts ok",
                      caption="\n".join(said) or None, caption_justify="left", caption_style="red")
        for col in ("host", "address", "exit", "output"):
            table.add_column(col, overflow="fold")
        for o in outcomes:
            if o.value is None:
                table.add_row(o.host.name, o.host.address, str(o.unreached or "-"), "[red]no output: below[/]"
                              if o.error else "")
            else:
                text = escape(o.value.stdout.rstrip()) if not o.value.stderr else (
                    escape(o.value.stdout) + f"[red]{escape(o.value.stderr.rstrip())}[/]")
                table.add_row(o.host.name, o.host.address, str(o.value.exited), text)
        fit.emit(real_console(out or console), table, wide)
    return EXIT_HOST_FAILED if failed else EXIT_OK


def _lines(outcomes: list[HostOutcome[CommandResult]], ok: int, screen: Console, errors: Console) -> None:
    """--wide: each host's exit status, then every line of its output prefixed by its name, as pdsh prints them:
    the command's stdout on `screen` (stdout), its stderr on `errors` (stderr), as pdsh keeps them apart; whole at
    any width, and never padded to the longest line (a table pads every row of a cell to its widest, so one long
    line from a host times its many short ones could fill the controller's memory)."""
    from rich.text import Text

    text, said = Text(f"{ok}/{len(outcomes)} hosts ok\n"), Text()
    for o in outcomes:
        good = bool(o.value and o.value.ok)
        state = f"exit {o.value.exited}" if o.value else (o.error or "failed")
        text.append(visible(f"{o.host.name} ({o.host.address}): {state}", lines=False) + "\n",
                    style="bold" if good else "bold red")
        for stream, into, style in ((o.value.stdout, text, ""), (o.value.stderr, said, "red")) if o.value else ():
            for line in stream.rstrip("\n").split("\n") if stream.strip("\n") else ():
                into.append(f"{visible(o.host.name, lines=False)}: {visible(line, lines=False)}\n", style=style)
    text.rstrip()
    screen.print(text, soft_wrap=True, highlight=False)
    if said:
        said.rstrip()
        errors.print(said, soft_wrap=True, highlight=False)


def parse_timeout(text: str | float | None) -> float:
    """--timeout as given (exit 2 when it is not a positive number of seconds)."""
    return execute.parse_timeout(text)


def command(hosts: list[Host], cmd: str, opts: ConnectOptions, as_json: bool,
            timeout: float = execute.DEFAULT_TIMEOUT_S, wide: bool = False,
            run: Callable[..., list[HostOutcome[CommandResult]]] = execute.run_everywhere) -> int:
    """`run`: what runs the command on the hosts (execute.run_everywhere). Ctrl-C is answered at once on stderr and
    ends with every host's row, exit 130 (docs/cli.md#ctrl-c)."""
    # where the commands stand, while they run: on a terminal in place (kept referenced until wiped: the line is
    # held weakly), off one a line every 30 s
    progress = progress_on_stderr()
    try:
        outcomes = run(hosts, cmd, opts, timeout, notice=say_now, progress=progress)
        clear_all()
        return report(outcomes, as_json, wide)
    except execute.Interrupted as stop:
        clear_all()
        report(stop.outcomes, as_json, wide)
        where = "entry in the JSON on stdout" if as_json else "row above"
        say_now(f"interrupted: no host was started after Ctrl-C; each host's {where} says where it is")
        return EXIT_INTERRUPTED

