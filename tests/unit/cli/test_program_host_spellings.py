"""A host named as ssh, pdsh and Ansible users name one (issue 46, finding 6; the eighteenth newcomer's hour): a bare
host word, `-l`/`--limit`, pdsh's `-w` and `-x`. Each is one line saying fleet's --host, exit 2, nothing run; they
were answered as something else: `no such task 'sbx0'`, `-i takes one value ... give each its own -i` (a second
inventory file for a host), `--cmd takes no value` (it takes one), `--list sbx0: no such namespace of tasks`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(("args", "said"), [
    (["status", "sbx0"], "inv status: no such task 'sbx0'; a host is named with --host: `inv status --host sbx0`"),
    (["status", "-i", "x.yaml", "sbx0"], "inv status: -i takes one value, so 'sbx0' after it was read as a task's "
                                         "name; a host is named with --host: `inv status --host sbx0`"),
    (["exec", "sbx0", "--cmd", "uptime"], "inv exec: --cmd given twice: 'sbx0' before it was read as its value (the "
                                          "task's first word); a host is named with --host: `inv exec --host sbx0`"),
    (["history", "-l", "sbx0"], "inv history: -l is --list, an option before a task (it lists the tasks); the hosts "
                                "a task acts on are --host (-H), as Ansible's -l/--limit: `inv history --host sbx0`"),
    (["history", "--limit", "sbx0"], "inv history: no such option --limit; Ansible's --limit: fleet's is --host "
                                     "(-H), which reads as it does (globs, '!NAME', commas)"),
    (["exec", "-x", "sbx0"], "inv exec: no such option -x; pdsh's -x (hosts left out): fleet's is --host '!NAME' "
                             "(with --all in a task that changes hosts)"),
    (["exec", "-w", "sbx0"], "inv exec: -w is --watch, an option of some tasks, not of this one; as pdsh's -w (the "
                             "hosts), fleet's is --host (-H)"),
    # held: a second word after a repeatable option is still the shell's glob or list
    (["status", "-H", "sbx0", "sbx1"], "inv status: -H takes one value, so 'sbx1' after it was read as a task's name "
                                       "(a shell's glob or list gives several words: give each its own -H)"),
    (["status", "-w", "2"], "inv status: -w takes no value, so '2' was read as a task's name"),
])
def test_a_host_named_as_other_tools_name_one_is_said_as_fleets_host(args, said, tmp_path):
    done = subprocess.run([str(BIN / "inv"), *args], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.partition(" (`")[0].rstrip("\n") == f"error: {said}", done.stderr
