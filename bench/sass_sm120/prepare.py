"""Prepares the real-nvcc check of the trtllm_comm headers in .device/ (git-ignored) for the lent GPU machine:
flashinfer 0.6.16's include tree pristine, the same with fleet's sets applied (sm120-allreduce-fusion and
trtllm-custom-allreduce-fixes, planned by fleet on the real files), 0.6.17's, spdlog, and tu.cu / run.sh.

usage: .venv/bin/python bench/sass_sm120/prepare.py      then, on the device:  cd .device && ./run.sh
run.sh compiles tu.cu (every instantiation of allreduce_fusion_op and customAllReduce) with the machine's nvcc
for sm_120a (and the patched tree for sm_100a) and writes each kernel's SASS instruction count to $OUT.
An empty-bodied kernel shows as a handful of instructions.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fleet.patches import offline  # noqa: E402
from fleet.patches import sets as patchsets  # noqa: E402
from fleet.upstream import corpus as upstream  # noqa: E402


def main() -> None:
    out = REPO / ".device"
    shutil.rmtree(out, ignore_errors=True)
    fi16 = upstream.require("flashinfer-python", "0.6.16").package()
    fi17 = upstream.require("flashinfer-python", "0.6.17").package()
    for tree, src in (("fi0616", fi16), ("fi0616p", fi16), ("fi0617", fi17)):
        shutil.copytree(src / "data/include", out / tree / "include")
    shutil.copytree(fi16 / "data/spdlog/include", out / "spdlog/include")
    sets = patchsets.load_sets(["sm120-allreduce-fusion", "trtllm-custom-allreduce-fixes"])
    plan = offline.check(sets, {"sglang": "0.5.9", "flashinfer-python": "0.6.16"}, 120, fetch=False)
    for c in plan.changes:
        if c.file.startswith("data/include/"):
            (out / "fi0616p" / c.file.removeprefix("data/")).write_bytes(c.after)
    for name in ("tu.cu", "run.sh"):
        shutil.copy2(Path(__file__).parent / name, out / name)
    print(f"prepared {out}")


if __name__ == "__main__":
    main()
