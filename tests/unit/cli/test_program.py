"""`inv` is fleet's program (fleet/cli/program.py, installed by pip over invoke's): `inv --version` says fleet's
version, and a command line it cannot parse is one line naming the option, exit 2, with nothing run. Run as a user
runs them: the venv's `inv` and `fleet` scripts, in a fresh process each, from a folder outside the clone."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from invoke.exceptions import ParseError
from invoke.parser.context import ParserContext

from fleet.cli.program import miscast, refusal

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def run(script: str, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / script), *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_both_scripts_are_fleets_program():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["inv"] == scripts["fleet"] == "fleet.cli.program:main"
    assert "fleet.cli.program" in (BIN / "inv").read_text(), (
        f"{BIN / 'inv'} is still invoke's: reinstall fleet into the venv (./bootstrap.sh, or pip install -e .)")


@pytest.mark.parametrize("script", ["inv", "fleet"])
def test_version_is_fleets_from_any_folder(script, tmp_path):
    done = run(script, "--version", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"fleet {version('fleet')}\n", "")


@pytest.mark.parametrize(("args", "said"), [
    (["deploy", "--hots", "x"], "inv deploy: no such option --hots (`inv deploy --help` lists its options)"),
    (["deploy", "-H", "x", "--serial"], "inv deploy: --serial needs a value (`inv deploy --help` lists its options)"),
    (["recover", "--host"], "inv recover: --host needs a value (`inv recover --help` lists its options)"),
    (["unlock"], "inv unlock: missing host, token (`inv unlock --help` lists its options)"),
    (["deploi"], "inv: no such task 'deploi' (`inv --list` lists the tasks)"),
    (["--help", "deploi"], "inv: no such task 'deploi' (`inv --list` lists the tasks)"),
    (["--hots"], "inv: no such option --hots (`inv --help` lists the options before a task, `inv TASK --help` a "
                 "task's)"),
])
def test_a_command_line_invoke_cannot_parse_is_one_line_and_exit_2(args, said):
    done = run("inv", *args)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"error: {said}\n")


def test_fleet_names_itself_in_the_error(tmp_path):
    done = run("fleet", "deploy", "--hots", "x", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (2, "error: fleet deploy: no such option --hots "
                                                 "(`fleet deploy --help` lists its options)\n")


def test_a_message_invoke_may_add_later_still_names_the_task_in_one_line():
    exc = ParseError("'x' is ambiguous when given after an optional-value flag", ParserContext(name="logs"))
    assert refusal(exc, "inv") == ("inv logs: 'x' is ambiguous when given after an optional-value flag "
                                   "(`inv logs --help` lists its options)")


@pytest.mark.parametrize(("argv", "said"), [
    (["recover", "--host", "h", "--wait", "abc"], "inv: --wait 'abc': want a whole number"),
    (["recover", "--host", "h", "--wait=abc"], "inv: --wait 'abc': want a whole number"),
    (["recover", "abc"], "inv: an option 'abc': want a whole number"),
])
def test_a_value_invokes_own_cast_refuses_is_one_line_naming_the_option(argv, said):
    """An int or float option not in tasking.NUMBERS (none today): invoke's int('abc') says which option."""
    line = miscast(ValueError("invalid literal for int() with base 10: 'abc'"), ["inv", *argv], "inv")
    assert line == f"{said} (`inv TASK --help` lists a task's options)"
