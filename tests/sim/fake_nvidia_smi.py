#!/usr/bin/env python3
"""Test double of the sandbox's stand-in nvidia-smi (sandbox/profiles/FORMAT.md), for tests/sim only.

Answers from ${FLEET_SANDBOX_PROFILE}/nvidia-smi/* plus the simulator's live state in
${FLEET_SIM_RUN}: apps/<pid> (compute apps, memory.used) and load (power.draw, utilization.gpu).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

PROFILE = Path(os.environ.get("FLEET_SANDBOX_PROFILE", "/usr/share/fleet-sandbox/profile"))
RUN = Path(os.environ.get("FLEET_SIM_RUN", "/run/fleet-sim"))


def alive(pid: str) -> bool:
    return Path(f"/proc/{pid}").exists()


def apps() -> list[tuple[str, int, int, str]]:
    out = []
    d = RUN / "apps"
    if d.is_dir():
        for f in sorted(d.iterdir()):
            if f.name.isdigit() and alive(f.name):
                try:
                    gpu, used, name = f.read_text().split(maxsplit=2)
                except ValueError:
                    continue
                out.append((f.name, int(gpu), int(used), name.strip()))
    return out


def load() -> dict[int, tuple[str, str]]:
    try:
        lines = (RUN / "load").read_text().splitlines()
    except OSError:
        return {}
    if not lines or not lines[0].startswith("pid ") or not alive(lines[0].split()[1]):
        return {}
    result = {}
    for line in lines[1:]:
        parts = line.split()
        if len(parts) == 3:
            result[int(parts[0])] = (parts[1], parts[2])
    return result


def query_gpu(fields: list[str], noheader: bool, nounits: bool, index: int | None) -> int:
    rows = (PROFILE / "nvidia-smi" / "query-gpu.csv").read_text().splitlines()
    header = [h.strip() for h in rows[0].split(",")]
    names = [re.sub(r"\s*\[.*\]$", "", h) for h in header]
    for f in fields:
        if f not in names:
            print(f'Field "{f}" is not a valid field to query.\n')
            return 2
    used = {}
    for _, gpu, mib, _ in apps():
        used[gpu] = used.get(gpu, 0) + mib
    live = load()
    data = [[c.strip() for c in r.split(",")] for r in rows[1:] if r.strip()]
    if index is not None:
        data = [r for r in data if r[0] == str(index)]
        if not data:
            print("No devices were found")
            return 6
    if not noheader:
        print(", ".join(header[names.index(f)] for f in fields))
    for r in data:
        gpu = int(r[0])
        vals = []
        for f in fields:
            v = r[names.index(f)]
            if f == "memory.used":
                v = f"{used.get(gpu, 0)} MiB"
            elif f == "power.draw" and gpu in live:
                v = f"{float(live[gpu][0]):.2f} W"
            elif f == "utilization.gpu" and gpu in live:
                v = f"{live[gpu][1]} %"
            if nounits:
                v = re.sub(r"\s+(MiB|W|%|MHz)$", "", v)
            vals.append(v)
        print(", ".join(vals))
    return 0


def main(argv: list[str]) -> int:
    fmt = next((a.split("=", 1)[1] for a in argv if a.startswith("--format=")), "csv")
    noheader, nounits = "noheader" in fmt, "nounits" in fmt
    index = None
    if "-i" in argv:
        index = int(argv[argv.index("-i") + 1])
    for a in argv:
        if a.startswith("--query-gpu="):
            return query_gpu(a.split("=", 1)[1].split(","), noheader, nounits, index)
        if a.startswith("--query-compute-apps="):
            if not noheader:
                print("pid, process_name, used_gpu_memory [MiB]")
            for pid, _, mib, name in apps():
                print(f"{pid}, {name}, {mib}" if nounits else f"{pid}, {name}, {mib} MiB")
            return 0
    files = {("topo", "-m"): "topo-m.txt", ("-L",): "L.txt", ("--version",): "version.txt", (): "smi.txt"}
    if len(argv) == 3 and argv[:2] == ["topo", "-p2p"]:
        files[tuple(argv)] = f"topo-p2p-{argv[2]}.txt"
    name = files.get(tuple(argv))
    path = PROFILE / "nvidia-smi" / name if name else None
    if path is None or not path.exists():
        print(f'Option "{argv[0] if argv else ""}" is not recognized.')
        return 2
    sys.stdout.write(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
