"""Ctrl-C while `inv` is still loading (issue 46, finding 4, found again by the fifth newcomer): invoke and
fleet's modules take about 0.3 s to import on a quiet machine, tasks.py and a task's modules more. A Ctrl-C
then was a Python traceback (while fleet.cli imported invoke) or exit 1 with nothing said
(invoke's Program ends a KeyboardInterrupt as 1, which reads as a host that failed). Each is now `interrupted`,
exit 130, as a task's own Ctrl-C ends. The real script, a real SIGINT; a sitecustomize on PYTHONPATH holds the
import of one module (says LOADING, then waits) so that the signal lands there every time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
INV = Path(sys.executable).parent / "inv"
HOLD = '''
import sys, time
class Hold:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.stderr.write("LOADING\\n"); sys.stderr.flush()
            time.sleep(30)
        return None
sys.meta_path.insert(0, Hold())
'''


@pytest.mark.parametrize("module", [
    "invoke.program",    # fleet.cli imports invoke: before main() (a traceback)
    "fleet.parallel",    # every task's wrapper imports it, inside invoke's Program (exit 1, nothing said)
    "fleet.cli.status",  # the task's own modules (130 before too: the wrapper's handling had begun)
])
def test_ctrl_c_while_loading_is_interrupted_and_130(module, tmp_path):
    (tmp_path / "sitecustomize.py").write_text(HOLD.format(module=module))
    (tmp_path / "hosts.yaml").write_text("hosts:\n  h:\n    address: 127.0.0.1\n    port: 9\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "FLEET_SANDBOX_ONLY": "1",
           "PYTHONPATH": f"{tmp_path}:{REPO}", "FLEET_STATE_DIR": str(tmp_path / "state")}
    inv = subprocess.Popen([str(INV), "status", "-i", str(tmp_path / "hosts.yaml")], cwd=tmp_path, env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert inv.stderr is not None
        assert inv.stderr.readline() == "LOADING\n"
        inv.send_signal(signal.SIGINT)
        out, err = inv.communicate(timeout=30)
    finally:
        inv.kill()
    assert (inv.returncode, out, err) == (130, "", "interrupted\n")
