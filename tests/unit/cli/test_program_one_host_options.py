"""A task with a positional parameter (unlock's host and token, recover's host) took an option word it does not
have as that parameter's value, as invoke does: `inv recover -g sandbox` said `--group takes no value, so 'sandbox'
was read as a task's name`, `inv unlock -g sandbox --token x` blamed `--token`, and `inv recover -i INV -g` looked for
a host named `-g` (issue 46, finding 6: a group given to a task of one host; the fifteenth newcomer's hour). Each is
now one line naming the option as fleet's other tasks have it, exit 2, nothing run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(("args", "said"), [
    (["recover", "-g", "sandbox"], "inv recover: -g is --group, an option of some tasks, not of this one: it acts on "
                                   "the one host --host names (`inv recover --help` lists its options)"),
    (["recover", "--group", "sandbox"], "inv recover: --group is an option of some tasks, not of this one: it acts on "
                                        "the one host --host names (`inv recover --help` lists its options)"),
    (["recover", "-i", "x.yaml", "-g"], "inv recover: -g is --group, an option of some tasks, not of this one: it "
                                        "acts on the one host --host names"),
    (["unlock", "-H", "sbx0", "-g", "sandbox", "--token", "x"], "inv unlock: -g is --group, an option of some "
                                                                  "tasks, not of this one: it acts on the one host "
                                                                  "--host names"),
    (["unlock", "-i", "x.yaml", "-g", "sandbox", "--token", "x"], "inv unlock: -g is --group"),
    (["unlock", "--all", "--token", "x"], "inv unlock: --all is an option of some tasks, not of this one"),
    (["recover", "--hots", "sbx0"], "inv recover: no such option --hots; did you mean --host?"),
])
def test_an_option_a_task_of_one_host_lacks_is_named_never_taken_as_its_host(args, said, tmp_path):
    done = subprocess.run([str(BIN / "inv"), *args], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.startswith(f"error: {said}") and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize(("args", "said"), [
    (["check", "-p", "a.yaml", "b.yaml"], "inv check: -p takes one value, so 'b.yaml' after it was read as a task's "
                                          "name (a shell's glob or list gives several words: give each its own -p)"),
    (["check", "--playbook=a.yaml", "b.yaml"], "inv check: --playbook takes one value, so 'b.yaml' after it"),
    (["status", "-H", "sbx0", "sbx1"], "inv status: -H takes one value, so 'sbx1' after it was read as a task's "
                                       "name"),
])
def test_a_second_word_for_an_option_of_one_value_is_said_as_the_options(args, said, tmp_path):
    """`inv check -p playbooks/*.yaml` (the shell's glob: `-p a.yaml b.yaml`) said `no such task 'b.yaml'` (issue 46,
    finding 7: checking several playbooks at once; the fifteenth newcomer's hour)."""
    done = subprocess.run([str(BIN / "inv"), *args], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.startswith(f"error: {said}") and done.stderr.count("\n") == 1, done.stderr
