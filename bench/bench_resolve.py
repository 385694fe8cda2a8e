"""Resolve and lock a pin set, cold and warm, against pip's own resolve of the same set in the same run; and how
often fleet's answer is pip's (same distributions, same versions; or both refuse).

The wheelhouse: the upstream corpus's real METADATA as wheels (sandbox/sim/metawheels.py: every sglang and
flashinfer-python release, and every distribution they require at each version their specifiers name, torch
also with +cu130, and a newer 99.0). The pin sets: metawheels.pin_sets (each release alone, each sglang with
its flashinfer and with the newest and oldest). fleet: fleet.upstream.lockfile.ensure for this machine as a host
(its CPython X.Y and full X.Y.Z, machine and glibc: what venvs.host_target reads on a host; cold: no lock, pip's
resolve and the lock written; warm: the lock there, each wheel's sha256 checked). pip: `python -m pip install
--dry-run --ignore-installed --report - --no-index --find-links DIR PINS` on this machine's own Python, no target
options. "same": the same distributions at the same versions, or both refuse (counted apart).

usage: python3 bench/bench_resolve.py [--skip K] [--sets N]     (needs the corpus: `inv upstream`)
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fleet.upstream import lockfile
from fleet.upstream.wheelhouse import Target, WheelhouseError
from sandbox.sim import metawheels

_V = sys.version_info
TARGET = Target(f"{_V.major}.{_V.minor}", platform.machine(), platform.libc_ver()[1] or None,
                f"{_V.major}.{_V.minor}.{_V.micro}")


def pip_resolve(pins: dict[str, str], house: Path) -> dict[str, str] | None:
    """pip's own answer (name -> version), None when pip refuses."""
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed",
                          "--quiet", "--report", "-", "--no-index", "--find-links", str(house),
                          "--disable-pip-version-check", *(f"{d}=={v}" for d, v in sorted(pins.items()))],
                         capture_output=True, text=True, timeout=300, env={"PIP_CONFIG_FILE": "/dev/null",
                                                                           "PATH": "/usr/bin:/bin"})
    if res.returncode != 0:
        return None
    return {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
            for i in json.loads(res.stdout)["install"]}


def fleet_lock(pins: dict[str, str], house: Path, lock: Path) -> dict[str, str] | None:
    try:
        return {w.name: str(w.version) for w in lockfile.ensure(lock, pins, TARGET, house)}
    except WheelhouseError:
        return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", type=int, default=0, help="only N pin sets")
    ap.add_argument("--skip", type=int, default=0, help="after the first N (the pairs begin after the releases)")
    args = ap.parse_args()
    sets = metawheels.pin_sets()[args.skip:]
    sets = sets[:args.sets] if args.sets else sets
    with tempfile.TemporaryDirectory() as tmp:
        house = Path(tmp) / "house"
        metawheels.build(house)
        print(f"wheelhouse: {len(list(house.glob('*.whl')))} wheels from the corpus; {len(sets)} pin sets")
        print(f"fleet resolves for {TARGET} (full version {TARGET.full_version}); pip runs on {sys.executable}")
        agree, refused, times = 0, 0, {"cold": [], "warm": [], "pip": []}
        for i, pins in enumerate(sets):
            lock = Path(tmp) / f"set{i}.lock"
            t0 = time.monotonic()
            cold = fleet_lock(pins, house, lock)
            t1 = time.monotonic()
            warm = fleet_lock(pins, house, lock)
            t2 = time.monotonic()
            theirs = pip_resolve(pins, house)
            t3 = time.monotonic()
            times["cold"].append(t1 - t0)
            times["pip"].append(t3 - t2)
            if cold is not None:
                times["warm"].append(t2 - t1)
            same = cold == theirs and warm == cold
            agree += same
            refused += same and theirs is None
            shown = " ".join(f"{d}=={v}" for d, v in sorted(pins.items()))
            print(f"{'same' if same else 'DIFF'}  {shown:55}  {len(cold or {}):3} dists  "
                  f"cold {t1 - t0:5.2f}s  warm {t2 - t1:5.3f}s  pip {t3 - t2:5.2f}s"
                  + ("  (both refuse)" if same and theirs is None else ""))
            if not same:
                print(f"      fleet {cold}\n      pip   {theirs}")
    print(f"agreement with pip: {agree}/{len(sets)} pin sets ({agree - refused} resolved alike, {refused} refused "
          "by both)")
    for k, v in times.items():
        print(f"{k:5} median {statistics.median(v):.3f}s  max {max(v):.3f}s  (n={len(v)})")
    return 0 if agree == len(sets) else 1


if __name__ == "__main__":
    raise SystemExit(main())
