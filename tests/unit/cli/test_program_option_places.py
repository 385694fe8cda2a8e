"""An option typed in the wrong place is said as the option it is, exit 2, nothing run (issue 46, finding 2;
newcomer h-new17). A task's long option before the task's name said `no such option --dry-run`, as if fleet had
no dry run; invoke's own options after a task's name were taken without a word (`inv status -F json` printed the
board, exit 0, and `| jq` failed; `inv deploy ... -V` deployed; `inv status -H x -l` listed the tasks instead).
Run as a user runs them: the venv's `inv`, in a fresh process each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
INV = Path(sys.executable).parent / "inv"


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(INV), *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("args", "said"), [
    (["--dry-run", "deploy", "-H", "x"], "inv: --dry-run is a task's option, given after the task's name: `inv "
                                         "deploy --dry-run ...`"),
    (["--json", "status"], "inv: --json is a task's option, given after the task's name: `inv status --json ...`"),
    (["--timeout", "5", "exec"], "inv: --timeout is a task's option, given after the task's name: `inv exec "
                                 "--timeout ...`"),
    (["--dry-run", "status"], "inv: --dry-run is an option of some tasks, not of status (`inv --help` lists the "
                              "options before a task, `inv TASK --help` a task's)"),
    (["--hots", "deploy"], "inv: no such option --hots (`inv --help` lists the options before a task, `inv TASK "
                           "--help` a task's)"),
])
def test_a_tasks_option_before_the_tasks_name_is_said_as_one(args, said, tmp_path):
    done = run(*args, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"error: {said}\n")


@pytest.mark.parametrize(("args", "typed"), [
    (["status", "-F", "json"], "-F"),
    (["status", "--list-format=json"], "--list-format"),
    (["status", "-H", "x", "-V"], "-V"),
    (["deploy", "-H", "x", "-p", "glm5-nvfp4", "--version"], "--version"),
    (["status", "-H", "x", "-l"], "-l"),
    (["status", "--list"], "--list"),
    (["status", "-D", "2"], "-D"),
    (["status", "--print-completion-script", "bash"], "--print-completion-script"),
])
def test_invokes_own_options_after_a_tasks_name_are_refused_not_dropped(args, typed, tmp_path):
    """No inventory exists in tmp_path: a task that ran would fail on it; the refusal comes first."""
    done = run(*args, cwd=tmp_path)
    task = args[0]
    json = "; a task's JSON is its --json (-j)" if typed in ("-F", "--list-format") else ""
    assert (done.returncode, done.stdout) == (2, ""), done.stdout
    assert done.stderr == (f"error: inv {task}: {typed} is an option of `inv` itself, given before a task's name "
                           f"(`inv {typed} ...`), not of {task}{json} (`inv {task} --help` lists its options)\n")


@pytest.mark.parametrize("args", [["status", "-h"], ["status", "--help"], ["--help", "status"]])
def test_help_after_or_before_the_tasks_name_is_still_its_help(args):
    done = run(*args)
    assert done.returncode == 0 and done.stdout.startswith("Usage: inv status [--options]")


@pytest.mark.parametrize(("args", "said"), [
    # exec acts on every host it is given: it said `it acts on the one host --host names`, unlock's words
    (["exec", "-H", "a", "--dry-run"], "inv exec: --dry-run is an option of some tasks, not of this one (`inv exec "
                                       "--help` lists its options)"),
    (["recover", "-g", "x"], "inv recover: -g is --group, an option of some tasks, not of this one: it acts on the "
                             "one host --host names (`inv recover --help` lists its options)"),
    # patch's dry run is --check: it said `no such option --dry-run`
    (["patch", "-H", "a", "--dry-run"], "inv patch: --dry-run is no option of patch: its dry run is --check, which "
                                        "changes nothing (`inv patch --help` lists its options)"),
    (["patch", "-H", "a", "-n"], "inv patch: -n is no option of patch: its dry run is --check, which changes "
                                 "nothing (`inv patch --help` lists its options)"),
])
def test_an_option_a_task_lacks_is_said_in_that_tasks_own_terms(args, said, tmp_path):
    done = run(*args, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"error: {said}\n")
