"""The host's GPUs, read the way a CUDA program on that host would see them.

nvidia-smi (the sandbox's stand-in, answering from the host profile) gives every GPU of the host;
CUDA_VISIBLE_DEVICES then selects and reorders them, exactly as the CUDA runtime does. P2P and NVLink
come from `nvidia-smi topo`. Results are cached per process (workers inherit them through fork).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

QUERY_FIELDS = "index,uuid,name,compute_cap,memory.total,power.draw,power.limit"

NO_DRIVER = (
    "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
    "driver from http://www.nvidia.com/Download/index.aspx"
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class Gpu:
    index: int  # nvidia-smi (physical) index
    uuid: str
    name: str
    major: int
    minor: int
    memory_mib: int
    idle_power_w: float
    power_limit_w: float

    @property
    def sm(self) -> int:
        return self.major * 10 + self.minor

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024.0


class NoDriverError(RuntimeError):
    pass


_cache: dict[str, object] = {}


def _run_smi(*args: str) -> str:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise NoDriverError(NO_DRIVER)
    proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise NoDriverError(f"nvidia-smi {' '.join(args)} failed ({proc.returncode}): {proc.stdout.strip()}")
    return proc.stdout


def _num(text: str, default: float = 0.0) -> float:
    m = re.search(r"-?\d+(?:\.\d+)?", text)
    return float(m.group(0)) if m else default


def all_gpus() -> list[Gpu]:
    """Every GPU nvidia-smi reports, in nvidia-smi order."""
    if "all" not in _cache:
        out = _run_smi(f"--query-gpu={QUERY_FIELDS}", "--format=csv,noheader,nounits")
        gpus = []
        for line in out.splitlines():
            if not line.strip():
                continue
            cols = [c.strip() for c in line.split(",")]
            if len(cols) < 7:
                continue
            major, _, minor = cols[3].partition(".")
            gpus.append(
                Gpu(
                    index=int(cols[0]),
                    uuid=cols[1],
                    name=cols[2],
                    major=int(_num(major)),
                    minor=int(_num(minor)),
                    memory_mib=int(_num(cols[4])),
                    idle_power_w=_num(cols[5]),
                    power_limit_w=_num(cols[6]),
                )
            )
        _cache["all"] = gpus
    return list(_cache["all"])  # type: ignore[arg-type]


def visible_gpus() -> list[Gpu]:
    """The GPUs a CUDA program sees, in CUDA device order (CUDA_VISIBLE_DEVICES applied)."""
    if "visible" in _cache:
        return list(_cache["visible"])  # type: ignore[arg-type]
    try:
        gpus = all_gpus()
    except NoDriverError:
        gpus = []
    spec = os.environ.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        visible = gpus
    else:
        visible = []
        by_index = {g.index: g for g in gpus}
        for item in spec.split(","):
            item = item.strip()
            if not item:
                break
            if item.isdigit():
                gpu = by_index.get(int(item))
            else:
                matches = [g for g in gpus if g.uuid.startswith(item)]
                gpu = matches[0] if len(matches) == 1 else None
            if gpu is None or gpu in visible:
                break  # CUDA stops at the first invalid entry
            visible.append(gpu)
    _cache["visible"] = visible
    return list(visible)


def _topo_matrix(args: tuple[str, ...]) -> dict[tuple[int, int], str]:
    out = _ANSI.sub("", _run_smi(*args))
    matrix: dict[tuple[int, int], str] = {}
    header: list[str] = []
    for line in out.splitlines():
        cells = line.split()
        if not cells:
            continue
        if not header and cells[0].startswith("GPU"):
            header = cells
            continue
        if header and re.fullmatch(r"GPU\d+", cells[0]):
            row = int(cells[0][3:])
            for name, value in zip(header, cells[1:], strict=False):
                if re.fullmatch(r"GPU\d+", name):
                    matrix[(row, int(name[3:]))] = value
    return matrix


def p2p_read_status() -> dict[tuple[int, int], str]:
    """`nvidia-smi topo -p2p r`: OK, CNS, GNS, TNS, NS, DR, U per GPU pair (physical indices)."""
    if "p2p" not in _cache:
        try:
            _cache["p2p"] = _topo_matrix(("topo", "-p2p", "r"))
        except (NoDriverError, subprocess.SubprocessError):
            _cache["p2p"] = {}
    return dict(_cache["p2p"])  # type: ignore[arg-type]


def nvlink_pairs() -> dict[tuple[int, int], str]:
    """`nvidia-smi topo -m` link types per GPU pair (NV18, PHB, SYS ...)."""
    if "topo" not in _cache:
        try:
            _cache["topo"] = _topo_matrix(("topo", "-m"))
        except (NoDriverError, subprocess.SubprocessError):
            _cache["topo"] = {}
    return dict(_cache["topo"])  # type: ignore[arg-type]


def p2p_ok(indices: list[int]) -> bool:
    status = p2p_read_status()
    return all(status.get((a, b)) == "OK" for a in indices for b in indices if a != b)


def full_nvlink(indices: list[int]) -> bool:
    links = nvlink_pairs()
    return all(links.get((a, b), "").startswith("NV") for a in indices for b in indices if a != b)


def prefetch() -> None:
    """Fill the caches before forking workers so that children never run nvidia-smi again."""
    visible_gpus()
