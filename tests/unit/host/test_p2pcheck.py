"""The P2P data check: the real program (fleet/host/programs/p2p_check.py) over a stand-in torch whose copies
are right or land wrong, and the parser of what it prints."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from fleet.host import p2pcheck
from fleet.host import programs as hostside

# A torch with N GPUs whose device copies can corrupt one word (as peer writes landing in the wrong place do).
FAKE_TORCH = '''
import os
N = int(os.environ["FAKE_GPUS"]); BAD = os.environ.get("FAKE_BAD", "")
int32 = "int32"
class T:
    def __init__(s, v, d): s.v, s.d = list(v), d
    def __mul__(s, k): return T([x * k for x in s.v], s.d)
    def __add__(s, k): return T([x + k for x in s.v], s.d)
    def __and__(s, k): return T([x & k for x in s.v], s.d)
    def __ne__(s, o): return T([int(a != b) for a, b in zip(s.v, o.v)], s.d)
    def sum(s): return T([sum(s.v)], s.d)
    def item(s): return s.v[0]
    def copy_(s, o):
        s.v = list(o.v)
        if BAD == "%s->%s" % (o.d, s.d): s.v[3] ^= 1
        return s
    def to(s, d): return T(s.v, d)
def arange(n, dtype=None, device=None): return T(range(n), device)
def empty(n, dtype=None, device=None): return T([0] * n, device)
class cuda:
    is_available = staticmethod(lambda: N > 0)
    device_count = staticmethod(lambda: N)
    can_device_access_peer = staticmethod(lambda i, j: True)
    synchronize = staticmethod(lambda d=None: None)
'''


def run(tmp_path: Path, gpus: int, bad: str = "", torch: bool = True) -> p2pcheck.P2PCheck:
    if torch:
        (tmp_path / "torch.py").write_text(FAKE_TORCH)
    done = subprocess.run([sys.executable, "-c", hostside.text("p2p_check.py"), "1"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env={"FAKE_GPUS": str(gpus), "FAKE_BAD": bad,
                                                         "PYTHONPATH": str(tmp_path)})
    return p2pcheck.parse(done.stdout, done.returncode)


def test_one_gpu_has_nothing_to_check(tmp_path):
    assert run(tmp_path, 1).model_dump() == {"verdict": "nothing to check", "gpus": 1, "pairs": [], "error": None}


def test_every_ordered_pair_is_copied_and_compared_and_a_wrong_landing_is_a_mismatch(tmp_path):
    good = run(tmp_path, 2)
    assert good.verdict == "ok" and [(p.src, p.dst, p.mismatched) for p in good.pairs] == [(0, 1, 0), (1, 0, 0)]
    bad = run(tmp_path, 3, bad="2->0")
    assert bad.verdict == "mismatch" and [(p.src, p.dst) for p in bad.bad_pairs] == [(2, 0)]
    assert len(bad.pairs) == 6


def test_no_torch_timeouts_and_garbage_are_failures_that_say_why(tmp_path):
    failed = run(tmp_path, 2, torch=False)
    assert failed.verdict == "failed" and failed.error.startswith("ModuleNotFoundError")
    assert p2pcheck.parse("", 124).error == "no answer from the check (timed out)"
    assert p2pcheck.parse("{not json\n\x1b[2J", 1).verdict == "failed"
    assert p2pcheck.parse('{"gpus": 2, "pairs": [{"src": "x"}], "error": null}', 0).verdict == "failed"


def test_the_command_runs_the_venv_python_under_a_deadline_as_the_venvs_owner():
    cmd = p2pcheck.command("/root/ml-env/")
    words = shlex.split(cmd)
    assert words[:10] == ["timeout", str(p2pcheck.LIMIT_S), "sh", "-c", hostside.text("interpreter.sh"),
                          "fleet-interpreter", hostside.SYSTEM_PYTHON, "-I", "-S", "-c"]
    assert words[10] == hostside.text("as_owner.py")
    assert words[11:] == ["fleet-as_owner", "/root/ml-env/", "/root/ml-env/bin/python", "-c",
                         hostside.text("p2p_check.py"), "64"]


def test_on_a_real_one_gpu_h200_the_check_says_there_is_nothing_to_check():
    """Recorded on a lent H200 (torch 2.11.0+cu130, driver 580): one GPU, no pair; `topo -p2p r` beside it."""
    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "gpu-health"
    check = p2pcheck.parse((fixtures / "p2p_check_h200_1gpu.json").read_text(), 0)
    assert (check.verdict, check.gpus, check.pairs, check.error) == ("nothing to check", 1, [], None)
    assert "GPU0\tX" in (fixtures / "topo_p2p_r_h200_1gpu.txt").read_text()
