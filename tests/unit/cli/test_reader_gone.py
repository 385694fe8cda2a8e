"""`inv probe | head -2`: the reader goes away after two lines. rich's console then exited 1 with nothing said,
which the exit-code table reads as "some host failed" (all hosts were fine). Now the rest of the output is
dropped and the task ends with its own exit code; the same for --json's document."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

TABLE = ("from fleet.cli import console\n"
         "for i in range(20000):\n"
         "    console.print(f'sbx{i}  8x H100 80GB HBM3  ok  9.0  NVLink NV18')\n"
         "raise SystemExit(0)\n")
JSON = ("from fleet.cli import print_json, print_results\n"
        "print_json({'hosts': [{'host': f'sbx{i}', 'gpus': 'H100' * 20} for i in range(20000)]})\n"
        "print_results([], True, print)\n"
        "raise SystemExit(0)\n")


@pytest.mark.parametrize("program", [TABLE, JSON], ids=["table", "json"])
def test_a_reader_that_goes_away_leaves_the_exit_code_the_tasks(program):
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    writer = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env, cwd=REPO)
    assert writer.stdout is not None and writer.stderr is not None
    first = writer.stdout.readline()
    writer.stdout.close()  # as `head -1` does
    err = writer.stderr.read().decode()
    writer.stderr.close()
    assert writer.wait(timeout=60) == 0, err
    assert first and err == ""
