"""One simulated scheduler (TP worker) process: its GPU, its memory, its live-state file, its facts.

Memory is accounted per GPU the way sglang sees it: total (nvidia-smi memory.total) minus what other
live processes hold on that GPU (apps/<pid> files of processes that are not this server's ranks,
e.g. workers a careless stop left behind) minus what this rank has allocated so far.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from sglang_sim_core import behaviour, livestate
from sglang_sim_core.device import Gpu

GIB = 1024.0  # MiB per GiB


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def format_size(gib: float) -> str:
    """torch's memory size format: 2 decimals in the largest unit below 1024."""
    size = max(gib, 0.0) * 2**30
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} GiB"


@dataclass
class RankContext:
    gpu: Gpu
    gpu_ordinal: int  # CUDA ordinal inside this process's CUDA_VISIBLE_DEVICES
    group: list[Gpu]  # GPUs of the TP group, rank order
    process_name: str
    facts: dict[str, Any] = field(default_factory=dict)
    used_gib: float = 0.0
    pid: int = field(default_factory=os.getpid)

    # ------------------------------------------------------------------ live state
    def set_process_name(self) -> None:
        try:
            with open("/proc/self/comm", "w") as f:
                f.write(self.process_name[:15])
        except OSError:
            pass

    def publish(self) -> None:
        livestate.write_app(self.pid, self.gpu.index, self.used_gib * GIB, self.process_name)

    def unpublish(self) -> None:
        livestate.remove_app(self.pid)

    def allocate(self, gib: float) -> None:
        self.used_gib += gib
        self.publish()

    # ------------------------------------------------------------------ memory
    def others_on(self, gpu_index: int) -> list[livestate.App]:
        """Live GPU processes on gpu_index that are not ranks of this server."""
        parent = os.getppid()
        return [
            a
            for a in livestate.live_apps()
            if a.gpu_index == gpu_index and a.pid != self.pid and _ppid(a.pid) != parent
        ]

    def free_gib(self, gpu: Gpu | None = None) -> float:
        gpu = gpu or self.gpu
        others = sum(a.used_mib for a in self.others_on(gpu.index)) / GIB
        mine = self.used_gib if gpu.index == self.gpu.index else 0.0
        return gpu.memory_gib - others - mine

    def oom_message(self, alloc_gib: float) -> str:
        others = self.others_on(self.gpu.index)
        parts = [
            f"CUDA out of memory. Tried to allocate {format_size(alloc_gib)}. GPU {self.gpu_ordinal} has a total "
            f"capacity of {format_size(self.gpu.memory_gib)} of which {format_size(self.free_gib())} is free."
        ]
        parts += [f"Process {a.pid} has {format_size(a.used_mib / GIB)} memory in use." for a in others]
        torch_alloc = max(self.used_gib - 0.63, 0.0)
        parts.append(
            f"Including non-PyTorch memory, this process has {format_size(self.used_gib)} memory in use. Of the "
            f"allocated memory {format_size(torch_alloc)} is allocated by PyTorch, and "
            f"{format_size(min(0.2, torch_alloc))} is reserved by PyTorch but unallocated. If reserved but "
            "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
            "fragmentation.  See documentation for Memory Management  "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
        )
        return " ".join(parts)

    # ------------------------------------------------------------------ behaviour
    def decide(self, phase: str) -> list[dict[str, Any]]:
        return behaviour.decide(phase, self.facts)

    def hang(self) -> None:
        """Stuck inside a collective: no output, never returns (SIGTERM still ends the process)."""
        while True:
            time.sleep(3600)
