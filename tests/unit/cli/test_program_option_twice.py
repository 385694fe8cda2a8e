"""An option of one value typed twice (`-p a -p b`, `--since 1h --since 2m`, shell history edited at 3 a.m.) was
read by invoke as the first value and a task named after the second: `no such task 'llama-replicas'; a host is
named with --host: inv deploy --host llama-replicas`, which names a playbook as a host (issue 46, finding 2: invoke's
parser is a trap; the twenty-third newcomer's hour). It is one line saying the option was given twice, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


@pytest.mark.parametrize(("args", "said"), [
    (["deploy", "-H", "sbx0", "-p", "glm5-nvfp4", "-p", "llama-replicas"],
     "inv deploy: -p given twice ('glm5-nvfp4', then 'llama-replicas'): it takes one value; give it once"),
    (["deploy", "-H", "sbx0", "--playbook=glm5-nvfp4", "--playbook", "llama"],
     "inv deploy: --playbook given twice ('glm5-nvfp4', then 'llama'): it takes one value"),
    (["logs", "-H", "sbx0", "--since", "1h", "--since", "2m"],
     "inv logs: --since given twice ('1h', then '2m'): it takes one value; give it once"),
    (["logs", "-H", "sbx0", "-n", "2", "--lines", "5"], "inv logs: --lines given twice ('2', then '5')"),
    (["rollback", "-H", "sbx0", "--to", "20261206T185633Z-48ff", "--to", "before-fleet"],
     "inv rollback: --to given twice ('20261206T185633Z-48ff', then 'before-fleet')"),
    (["exec", "-H", "sbx0", "-c", "uptime", "-c", "hostname"],
     "inv exec: -c given twice ('uptime', then 'hostname'): it takes one value"),
])
def test_an_option_of_one_value_given_twice_is_said_so(args, said, tmp_path):
    done = subprocess.run([str(BIN / "inv"), *args], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.startswith(f"error: {said}") and done.stderr.count("\n") == 1, done.stderr
    assert "--host" not in done.stderr and "no such task" not in done.stderr, done.stderr
