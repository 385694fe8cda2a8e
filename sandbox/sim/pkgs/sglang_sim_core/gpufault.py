"""A GPU that dies under the server (SGLANG_SIM_XID=CODE:GPU, e.g. 79:3): the driver's Xid line goes to the
host's kernel log (the stand-in dmesg reads $R/kmsg), a GPU off the bus is gone from nvidia-smi ($R/lost),
and the server dies of the CUDA error its kernels then get, as on the RTX PRO 6000 / 5090 hosts of
open-gpu-kernel-modules issues 1151 and 1159 (Xid 79 then 154 under load). An uncorrectable ECC error (48)
leaves the GPU listed but asking for a reset (Xid 154 to GPU Reset Required, a row remapping pending: the
stand-in nvidia-smi answers that from $R/gpustate until `nvidia-smi -r` clears it)."""

from __future__ import annotations

import os
import time

from sglang_sim_core import env

_TEXT = {79: "GPU has fallen off the bus.", 119: "Timeout after 6s of waiting for RPC response from GPU0 GSP!",
         48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer."}


def planned() -> tuple[int, int] | None:
    raw = os.environ.get("SGLANG_SIM_XID", "")
    code, _, gpu = raw.partition(":")
    return (int(code), int(gpu or 0)) if code.isdigit() and (gpu or "0").isdigit() else None


def strike(code: int, gpu: int) -> str:
    """Write what the driver would (kernel log, lost GPU); return the error the server then dies of."""
    bus = ""
    csv = env.profile_dir() / "nvidia-smi" / "query-gpu.csv"
    lines = csv.read_text().splitlines()
    head = [h.split(" [")[0] for h in lines[0].split(", ")]
    for line in lines[1:]:
        row = dict(zip(head, line.split(", "), strict=False))
        if row.get("index") == str(gpu):
            bus = row.get("pci.bus_id", "")
    short = bus[4:-2].lower() if len(bus) == 16 else "0000:00:00"  # 00000000:04:00.0 -> 0000:04:00
    stamp = f"[{time.monotonic():12.6f}]"
    run = env.run_dir()
    run.mkdir(parents=True, exist_ok=True)
    with open(run / "kmsg", "a") as log:
        log.write(f"{stamp} NVRM: Xid (PCI:{short}): {code}, pid={os.getpid()}, name=python3, "
                  f"{_TEXT.get(code, 'GPU error')}\n")
        if code == 79:
            log.write(f"{stamp} NVRM: Xid (PCI:{short}): 154, GPU recovery action changed from 0x0 (None) to "
                      "0x2 (Node Reboot Required)\n")
        if code == 48:
            log.write(f"{stamp} NVRM: Xid (PCI:{short}): 154, GPU recovery action changed from 0x0 (None) to "
                      "0x1 (GPU Reset Required)\n")
    if code == 48 and bus:
        with open(run / "gpustate", "a") as state:
            state.write(f"{bus} gpu_recovery_action=GPU Reset\n{bus} remapped_rows.pending=Yes\n"
                        f"{bus} ecc.errors.uncorrected.volatile.total=1\n")
    if code == 79 and bus:
        with open(run / "lost", "a") as lost:
            lost.write(bus + "\n")
    return "CUDA error: unspecified launch failure"
