"""`inv --help WORD more words` (fleet.cli.typedwords.help_first) beyond a task's name right after -h/--help: the
`--help=deploy` spelling, and a word that is no task. Both said `--host is a task's option, given after the task's
name: inv TASK --host ...`, exit 2, to someone who had given it after the task's name (`deploi`: a typo; `sandbox`:
a namespace) (h-adv18)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "inv"), *args], capture_output=True, text=True,
                          cwd=REPO, timeout=60)


@pytest.mark.parametrize(("args", "said"), [
    (["--help", "deploi", "--host", "x"], "error: inv: no such task 'deploi'; did you mean deploy? (`inv --list` "
                                          "lists the tasks)\n"),
    (["--help", "sandbox", "x"], "error: inv: 'sandbox' is a namespace of tasks, not a task: `inv --list sandbox` "
                                 "lists its tasks (`inv sandbox.TASK ...`)\n"),
])
def test_a_word_after_help_that_is_no_task_is_said_as_such(args, said):
    done = run(*args)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", said)


def test_help_with_its_task_after_an_equals_sign_is_its_help_whatever_follows():
    asked, plain = run("--help=deploy", "--host", "x"), run("deploy", "--help")
    assert (asked.returncode, asked.stdout, asked.stderr) == (0, plain.stdout, ""), asked.stderr


def test_help_alone_or_before_an_option_is_invokes_own():
    from fleet.cli.typedwords import help_first

    tasks = {"deploy": [], "sandbox.up": []}
    assert help_first(["inv", "--help"], tasks) == ["inv", "--help"]
    assert help_first(["inv", "--help", "--list"], tasks) == ["inv", "--help", "--list"]
    assert help_first(["inv", "-h", "sandbox.up", "x"], tasks) == ["inv", "sandbox.up", "--help"]
    assert help_first(["inv", "-h=deploy", "-H", "x"], tasks) == ["inv", "deploy", "--help"]
