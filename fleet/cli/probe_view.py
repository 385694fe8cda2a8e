"""Human view of probe results: a summary row per host, then per host its GPUs and GPU-to-GPU links."""

from __future__ import annotations

import re
from collections import Counter

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleet.facts import HostFacts

# Edition suffixes say nothing about what deploy chooses, and make the verdict line unreadable.
_NAME_NOISE = re.compile(r"^NVIDIA\s+|\s+(Workstation|Server) Edition$")


def short_name(name: str | None) -> str:
    return _NAME_NOISE.sub("", name or "unknown GPU").strip() or "unknown GPU"


def _gpus_part(f: HostFacts) -> str:
    if not f.gpus:
        return "no GPUs"
    counts = Counter((short_name(g.name), g.compute_cap) for g in f.gpus)
    parts = []
    for (name, cc), n in counts.items():
        cc_text = f"SM {cc}" if cc else "SM unknown"
        parts.append(f"{n}x {name} ({cc_text})")
    return " + ".join(parts)


def _link_part(f: HostFacts) -> str:
    if f.interconnect == "nvlink":
        codes = sorted({c for row in f.topology.links or [] for c in row if c and c.startswith("NV")})
        extra = f", rest PCIe ({f.pcie_link})" if f.pcie_link else ""
        return f"NVLink ({'/'.join(codes)}{extra})"
    if f.interconnect == "pcie":
        return f"PCIe only ({f.pcie_link})"
    if f.interconnect == "none":
        return "single GPU"
    return "interconnect unknown"


def _p2p_part(f: HostFacts) -> str | None:
    if f.p2p == "n/a":
        return None
    if f.p2p == "ok":
        return "P2P ok"
    return f"P2P {f.p2p}"


def verdict_line(f: HostFacts) -> str:
    """One line per host, e.g. '8x RTX PRO 6000 Blackwell (SM 12.0), PCIe only (PHB), P2P refused (CNS),
    KVM guest (QEMU Q35: Proxmox-style)'."""
    if not f.ok:
        return f"probe failed: {f.error}"
    parts = [_gpus_part(f), _link_part(f), _p2p_part(f), f.virt_verdict or "virtualization unknown"]
    return ", ".join(p for p in parts if p)


def _num(value: float | int | None, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def gpu_table(f: HostFacts) -> Table:
    t = Table(title=f"{f.host} GPUs", title_justify="left")
    for col in ("GPU", "name", "SM", "memory", "power draw / limit", "PCIe gen / width"):
        t.add_column(col)
    for g in f.gpus:
        sm = g.compute_cap or "?"
        if g.compute_cap_source == "name-table":
            sm += " (by name)"
        mem = "-" if g.memory_total_mib is None else f"{g.memory_total_mib / 1024:.0f} GiB"
        power = f"{_num(g.power_draw_w)} / {_num(g.power_limit_w)} W"
        pcie = f"{_num(g.pcie_gen)} / x{_num(g.pcie_width)}"
        if g.pcie_gen_max and g.pcie_gen and g.pcie_gen < g.pcie_gen_max:
            pcie += f" (max gen {g.pcie_gen_max})"  # idle GPUs drop link speed; worth seeing at a glance
        t.add_row(_num(g.index), g.name or "-", sm, mem, power, pcie)
    return t


def link_table(f: HostFacts) -> Table | None:
    links = f.topology.links
    if not links or len(links) < 2:
        return None
    p2p = f.topology.p2p_read
    title = f"{f.host} links" + (" / P2P read" if p2p else "")
    t = Table(title=title, title_justify="left")
    t.add_column("")
    for j in range(len(links)):
        t.add_column(f"GPU{j}", justify="center")
    for i, row in enumerate(links):
        cells = []
        for j, code in enumerate(row):
            if i == j:
                cells.append("X")
                continue
            peer = p2p[i][j] if p2p and i < len(p2p) and j < len(p2p[i]) else None
            cells.append(f"{code or '?'}" + (f" {peer}" if peer else ""))
        t.add_row(f"GPU{i}", *cells)
    return t


def summary_table(facts: list[HostFacts]) -> Table:
    t = Table(title="probe", title_justify="left")
    for col in ("host", "address", "verdict"):
        t.add_column(col)
    for f in facts:
        verdict = Text(verdict_line(f), style="" if f.ok else "bold red")
        t.add_row(f.host, f.address, verdict)
    return t


def render(facts: list[HostFacts], console: Console) -> None:
    console.print(summary_table(facts))
    for f in facts:
        if not f.ok:
            continue
        console.print()
        console.print(Text(f"{f.host} ({f.address}): {verdict_line(f)}", style="bold"))
        if f.gpus:
            console.print(gpu_table(f))
        if (links := link_table(f)) is not None:
            console.print(links)
        for w in f.warnings:
            console.print(Text(f"warning: {w}", style="yellow"))
