"""`inv tune --slo`: bad input is one line naming the option, exit 2, before the inventory or any host is read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
INV = Path(sys.executable).parent / "inv"


@pytest.mark.parametrize(("args", "says"), [
    (("--slo", "ttft_p99=2"), "--slo: 'ttft_p99=2' is not METRIC_pNN=DURATION"),
    (("--slo", "ttft_p99=2s,ttft_p99=3s"), "--slo: 'ttft_p99=3s' is given twice"),
    (("--budget", "3"), "--budget, --requests and --pairs go with --slo"),
    (("--pairs", "4"), "--budget, --requests and --pairs go with --slo"),
    (("--slo", "ttft_p99=2s", "--pairs", "1"), "--pairs '1': 0 (no replicates) or a whole number of interleaved"),
    (("--slo", "ttft_p99=2s", "--pairs", "21"), "--pairs '21': 0 (no replicates) or a whole number of interleaved"),
    (("--slo", "ttft_p99=2s", "--pairs", "x"), "--pairs 'x': 0 (no replicates) or a whole number of interleaved"),
    (("--slo", "ttft_p99=2s", "--requests", "5"), "--requests '5': a whole number of requests per load point"),
    (("--slo", "ttft_p99=2s", "--budget", "0"), "--budget '0': a whole number of server starts"),
])
def test_bad_slo_input_is_one_line_and_exit_2_before_any_host(args, says, tmp_path):
    done = subprocess.run([str(INV), "tune", "-i", str(tmp_path / "none.yaml"), "--host", "h", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "none.yaml" not in done.stderr  # refused before the inventory was looked for


def test_pairs_reach_the_search_and_default_to_three():
    from fleet.cli import tune

    assert tune.slo_settings("ttft_p99=2s", None, None).pairs == 3
    assert tune.slo_settings("ttft_p99=2s", None, None, 0).pairs == 0  # none: the best full result wins
    assert tune.slo_settings("ttft_p99=2s", 2, 100, 6).pairs == 6
