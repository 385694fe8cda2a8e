"""nvidia-smi's outputs, parsed (pure: text in, data out): --query-gpu CSV, topo matrices, the version banner,
/proc/driver/nvidia/version. Formats and their variants: docs/FACTS.md; recorded outputs in tests/fixtures."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fleet.host import facts as F
from fleet.host.facts import Gpu

_NA = {"", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]", "[gpu is lost]",
       "[insufficient permissions]", "[requested functionality has been deprecated]"}
_FIELD_NAME = re.compile(r"^[a-z][a-z0-9_.]*(?: \[[^\]]*\])?$")
_REJECTED = re.compile(r'Field "([^"]+)" is not a valid field to query')
_FIELD_ALIASES = {"gpu_uuid": "uuid", "gpu_name": "name", "gpu_bus_id": "pci.bus_id"}


def na(value: str | None) -> str | None:
    """None for the ways nvidia-smi says 'no value' ([N/A], N/A, [Not Supported], ...)."""
    if value is None or value.strip().lower() in _NA:
        return None
    return value.strip()


def field_name(header_cell: str) -> str:
    name = re.sub(r"\s*\[[^\]]*\]$", "", header_cell.strip())  # "memory.total [MiB]" -> "memory.total"
    return _FIELD_ALIASES.get(name, name)


@dataclass
class QueryGpu:
    rows: list[dict[str, str | None]] = field(default_factory=list)
    fields: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # fields the driver did not know
    skipped: list[str] = field(default_factory=list)  # lines that were not a row of the table


def parse_query_gpu(text: str, fields: list[str] | tuple[str, ...] | None = None) -> QueryGpu:
    """`nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`; columns by header name when present."""
    names = [field_name(f) for f in fields] if fields else []
    rows: list[dict[str, str | None]] = []
    rejected: list[str] = []
    skipped: list[str] = []
    header_seen = False
    for line in text.splitlines():
        if not line.strip():
            continue
        if m := _REJECTED.search(line):
            rejected.append(m.group(1))
            continue
        cells = [c.strip() for c in line.split(",")]  # names contain spaces, never commas
        if not header_seen and not rows and all(_FIELD_NAME.match(c) for c in cells):
            names, header_seen = [field_name(c) for c in cells], True
            continue
        if not names or len(cells) != len(names):
            skipped.append(line)
            continue
        rows.append({k: na(v) for k, v in zip(names, cells, strict=True)})
    return QueryGpu(rows, names, rejected, skipped)


_NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?)(?:\s*[A-Za-z%/]+)?$")  # "97887", "97887 MiB", "28.00 W"


def number(value: str | None) -> float | None:
    m = _NUMBER.match(value or "")
    return float(m.group(1)) if m else None


def _int(value: str | None) -> int | None:
    n = number(value)
    return int(n) if n is not None else None


def gpu_from_row(row: dict[str, str | None]) -> Gpu:
    cc = row.get("compute_cap")
    cc = cc if cc and re.fullmatch(r"\d+\.\d+", cc) else None
    return Gpu(
        index=_int(row.get("index")), name=row.get("name"), uuid=row.get("uuid"),
        compute_cap=cc, sm=F.sm_of(cc), compute_cap_source="nvidia-smi" if cc else None,
        memory_total_mib=_int(row.get("memory.total")), power_draw_w=number(row.get("power.draw")),
        power_limit_w=number(row.get("power.limit")), pci_bus_id=row.get("pci.bus_id"),
        pcie_gen=_int(row.get("pcie.link.gen.current")), pcie_gen_max=_int(row.get("pcie.link.gen.max")),
        pcie_width=_int(row.get("pcie.link.width.current")),
        pcie_width_max=_int(row.get("pcie.link.width.max")),
    )


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx\d*_\d+|[a-z]+\d*_\d+)$")
_GPU = re.compile(r"^GPU(\d+)$")


@dataclass
class TopoMatrix:
    labels: list[str]  # every column label (GPUs, NICs)
    rows: dict[str, list[str]]  # complete rows only, by row label
    incomplete: list[str] = field(default_factory=list)  # row labels cut short (truncated output)

    def gpu_labels(self) -> list[str]:
        return [x for x in self.labels if _GPU.match(x)]

    def gpu_matrix(self) -> list[list[str | None]]:
        """GPU-to-GPU codes only (NIC rows and columns dropped); None for rows the output lacked."""
        gpus = self.gpu_labels()
        cols = [self.labels.index(g) for g in gpus]
        return [[self.rows[g][c] for c in cols] if g in self.rows else [None] * len(gpus) for g in gpus]


def parse_topo_matrices(text: str) -> list[TopoMatrix]:
    """Every matrix in `nvidia-smi topo -m` / `topo -p2p <c>` output (escape codes, tabs or spaces)."""
    found: list[TopoMatrix] = []
    current: TopoMatrix | None = None
    for raw in _ANSI.sub("", text).splitlines():
        tokens = raw.split()
        # a header starts GPU0 then another label or "CPU Affinity" (1 GPU); a row's 2nd token is a code
        if tokens[:1] == ["GPU0"] and (len(tokens) == 1 or _DEVICE.match(tokens[1]) or tokens[1] == "CPU"):
            labels = []
            for t in tokens:  # device columns come first; "CPU Affinity", "NUMA Affinity"... follow
                if not _DEVICE.match(t):
                    break
                labels.append(t)
            current = TopoMatrix(labels=labels, rows={})
            found.append(current)
        elif current and tokens and _DEVICE.match(tokens[0]):
            values = tokens[1:1 + len(current.labels)]
            if len(values) == len(current.labels) and not any("[" in v for v in values):
                current.rows[tokens[0]] = values
            else:
                current.incomplete.append(tokens[0])
        elif current:
            current = None  # a blank line or the legend ends the matrix
    return found


def parse_topo_matrix(text: str) -> TopoMatrix | None:
    matrices = parse_topo_matrices(text)
    return matrices[0] if matrices else None


def parse_key_colon(text: str) -> dict[str, str]:
    """`Key : value` lines (nvidia-smi --version, hostnamectl)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and value.strip():
            out.setdefault(key.strip().lower(), value.strip())
    return out


@dataclass(frozen=True)
class SmiVersion:
    driver: str | None = None
    cuda: str | None = None


def parse_smi_version(text: str) -> SmiVersion:
    """`nvidia-smi --version` (newer drivers) or the banner of a bare `nvidia-smi` (any driver)."""
    kv = parse_key_colon(text)
    driver, cuda = kv.get("driver version"), kv.get("cuda version")
    banner_driver = re.search(r"Driver Version:\s*(\d[\w.]*)", text)
    banner_cuda = re.search(r"CUDA Version:\s*(\d[\d.]*)", text)
    driver = driver if driver and driver[0].isdigit() else None
    cuda = cuda if cuda and cuda[0].isdigit() else None
    return SmiVersion(driver=driver or (banner_driver.group(1) if banner_driver else None),
                      cuda=cuda or (banner_cuda.group(1) if banner_cuda else None))


def parse_proc_driver_version(text: str) -> str | None:
    """/proc/driver/nvidia/version: 'NVRM version: NVIDIA UNIX ... Kernel Module ...  580.95.05  ...'."""
    m = re.search(r"NVRM version:.*?\s(\d{2,}\.\d+(?:\.\d+)?)\s", text + " ")
    return m.group(1) if m else None
