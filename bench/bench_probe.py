"""Probe speed on sandbox hosts (a benchmark, not a test): wall time for 1, 8 and 32 hosts, CPU time the
hosts spent, and SSH channels opened per host, against a baseline measured in the same run: the same
facts gathered the way an operator does by hand, one `ssh host <command>` per fact.

usage (root): .venv/bin/python bench/bench_probe.py [--sizes 1,8,32] [--repeat 3]
It uses the "bench" sandbox instance, so it never replaces the demo or test fleets.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import paramiko

os.environ["FLEET_SANDBOX_ONLY"] = "1"

from fleet import inventory  # noqa: E402
from fleet.host import probe_run  # noqa: E402
from fleet.ssh.connect import ConnectOptions  # noqa: E402
from sandbox.config import config  # noqa: E402
from sandbox.hosts import Sandbox  # noqa: E402

PROFILES = ["rtx-pro-6000-x8-proxmox", "h100-sxm-x8", "rtx5090-x2-workstation", "b200-x8"]
BY_HAND = [
    "nvidia-smi --query-gpu=index,name,uuid,compute_cap,pci.bus_id,memory.total,power.draw,power.limit "
    "--format=csv,nounits", "nvidia-smi topo -m", "nvidia-smi topo -p2p r", "nvidia-smi --version",
    "systemd-detect-virt", "dmidecode -s system-manufacturer", "dmidecode -s system-product-name",
    "cat /etc/os-release", "df -Pk / /root/ml-env", "systemctl show sglang",
    "/root/ml-env/bin/python -c 'import importlib.metadata as m; print(m.version(\"pip\"))'",
]

channels = 0
_open = paramiko.Transport.open_channel


def _counting_open(self, *a, **kw):
    global channels
    channels += 1
    return _open(self, *a, **kw)


paramiko.Transport.open_channel = _counting_open


def by_hand(sb: Sandbox, hosts) -> None:
    def one(h):
        for cmd in BY_HAND:
            subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={sb.cfg.known_hosts}",
                            "-i", str(sb.cfg.identity_file), f"root@{h.address}", cmd], capture_output=True)

    with ThreadPoolExecutor(max_workers=32) as pool:
        list(pool.map(one, hosts))


def measure(fn, sb, repeat):
    walls, cpus = [], []
    for _ in range(repeat):
        cpu0, t0 = sb.cpu_seconds(), time.monotonic()
        fn()
        walls.append(time.monotonic() - t0)
        cpus.append(sb.cpu_seconds() - cpu0)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,8,32")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sb = Sandbox(config("bench"), log=lambda m: None)
    print(f"{'hosts':>5} {'probe s':>8} {'by hand s':>9} {'ratio':>6} {'host CPU s probe/hand':>22} "
          f"{'channels/host':>13}")
    for n in [int(s) for s in args.sizes.split(",")]:
        sb.up(n, PROFILES)
        hosts = inventory.load(sb.cfg.inventory_path).select(default_file=sb.cfg.inventory_path)
        global channels
        channels = 0
        wall, cpu = measure(lambda h=hosts: probe_run.probe_hosts(h, ConnectOptions(), save=False), sb, args.repeat)
        per_host = channels / (n * args.repeat)
        hand_wall, hand_cpu = measure(lambda h=hosts: by_hand(sb, h), sb, args.repeat)
        print(f"{n:>5} {wall:>8.2f} {hand_wall:>9.2f} {hand_wall / wall:>5.1f}x {cpu:>10.2f} / {hand_cpu:<9.2f} "
              f"{per_host:>13.1f}")


if __name__ == "__main__":
    main()
