"""Human view of probe results: a summary row per host, then per host its GPUs and GPU-to-GPU links."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleet.cli import fit, real_console
from fleet.cli.hosttext import about, escape, visible
from fleet.deploy import hardware
from fleet.host.facts import Gpu, HostFacts
from fleet.host.gpuhealth import SLOWDOWNS
from fleet.host.p2pcheck import P2PCheck

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


def gpu_health(g: Gpu) -> tuple[str, str]:
    """One GPU's health cell: what is wrong, most urgent first, or 'ok' ('-' when the driver said nothing)."""
    h = g.health
    if h is None:
        return "-", ""
    bad = [f"recovery: {h.recovery_action}"] if h.recovery_action not in (None, "none") else []
    bad += ["remap failed"] if h.remapped_rows_failed else []
    bad += ["repair pending"] if h.remapped_rows_pending or h.retired_pages_pending else []
    ecc = [f"ECC {h.ecc_uncorrected_volatile}"] if h.ecc_uncorrected_volatile else []
    if bad:
        return ", ".join(bad + ecc), "bold red"
    warn = ecc + [r for r in h.clock_events if r in SLOWDOWNS]
    return (", ".join(warn), "yellow") if warn else ("ok", "green")


def p2p_line(check: P2PCheck) -> tuple[str, str]:
    """What `--p2p-check` found, in one line with its style."""
    if check.verdict == "ok":
        peers = sum(p.peer_access for p in check.pairs)
        how = "all peer to peer" if peers == len(check.pairs) else \
            "no peer access: through host memory" if not peers else f"{peers} peer to peer"
        return f"P2P data check: ok, {len(check.pairs)} GPU pairs copied and compared ({how})", "green"
    if check.verdict == "nothing to check":
        return f"P2P data check: nothing to check ({check.gpus} GPU)", ""
    if check.verdict == "mismatch":
        bad = ", ".join(f"GPU{p.src}->GPU{p.dst} ({p.mismatched} words differ)" for p in check.bad_pairs)
        return visible(f"P2P data check: MISMATCH {bad}"), "bold red"
    return visible(f"P2P data check failed: {check.error}"), "bold red"


def health_cell(f: HostFacts) -> tuple[str, str]:
    """A host's health at a glance: FAULT, notes (past Xids, slowdowns), ok, or '-' when nothing was read."""
    hw = hardware.assess(f)
    if hw.fault:
        return f"FAULT ({len(hw.fault)})", "bold red"
    if hw.notes:
        return f"notes ({len(hw.notes)})", "yellow"
    return ("ok", "green") if f.kernel_log is not None or any(g.health for g in f.gpus) else ("-", "")


def gpu_table(f: HostFacts, width: int = 80, ascii_only: bool = False, wide: bool = False) -> Table:
    rows = f.gpus
    sm = [(g.compute_cap or "?") + (" (by name)" if g.compute_cap_source == "name-table" else "") for g in rows]
    pcie = []
    for g in rows:
        text = f"{_num(g.pcie_gen)} / x{_num(g.pcie_width)}"
        if g.pcie_gen_max and g.pcie_gen and g.pcie_gen < g.pcie_gen_max:
            text += f" (max {g.pcie_gen_max})"  # idle GPUs drop link speed; worth seeing at a glance
        pcie.append(text)
    cols = [fit.Col("GPU", [(_num(g.index), "") for g in rows], right=True),
            fit.Col("name", [(short_name(g.name), "") for g in rows], cap=28),
            fit.Col("SM", [(t, "") for t in sm]),
            fit.Col("memory", [("-" if g.memory_total_mib is None else f"{g.memory_total_mib / 1024:.0f} GiB", "")
                               for g in rows], right=True),
            fit.Col("power / limit", [(f"{_num(g.power_draw_w)} / {_num(g.power_limit_w)} W", "") for g in rows],
                    right=True),
            fit.Col("PCIe gen / width", [(t, "") for t in pcie]),
            fit.Col("temp", [("-" if g.health is None else f"{_num(g.health.temperature_c)} C", "") for g in rows],
                    right=True),
            fit.Col("health", [gpu_health(g) for g in rows], cap=30)]
    return fit.table(fit.choose(cols, width, wide, ascii_only), f"{f.host} GPUs")


def link_table(f: HostFacts) -> Table | None:
    links = f.topology.links
    if not links or len(links) < 2:
        return None
    p2p = f.topology.p2p_read
    title = f"{f.host} links" + (" / P2P read" if p2p else "")
    t = Table(title=title, title_justify="left", box=None, pad_edge=False, header_style="bold")
    t.add_column("")
    for j in range(len(links)):
        t.add_column(f"GPU{j}", justify="center", no_wrap=True)
    for i, row in enumerate(links):
        cells = []
        for j, code in enumerate(row):
            if i == j:
                cells.append("X")
                continue
            peer = p2p[i][j] if p2p and i < len(p2p) and j < len(p2p[i]) else None
            cells.append(escape(f"{code or '?'}" + (f" {peer}" if peer else ""), lines=False))
        t.add_row(f"GPU{i}", *cells)
    return t


def _gpus_cell(f: HostFacts) -> str:
    if not f.gpus:
        return "no GPUs"
    counts = Counter(short_name(g.name) for g in f.gpus)
    return " + ".join(f"{n}x {name}" for name, n in counts.items())


def _link_cell(f: HostFacts) -> str:
    if f.interconnect == "nvlink":
        codes = sorted({c for row in f.topology.links or [] for c in row if c and c.startswith("NV")})
        return f"NVLink {'/'.join(codes)}"
    return {"pcie": f"PCIe {f.pcie_link or '?'}", "none": "single GPU"}.get(f.interconnect, "unknown")


def summary_table(facts: list[HostFacts], width: int = 80, ascii_only: bool = False, wide: bool = False) -> Table:
    """One line per host; the whole verdict sentence is under each host's heading below."""
    def cell(fn: Callable[[HostFacts], str]) -> list[tuple[str, str]]:
        return [(fn(f), "") if f.ok else ("-", "") for f in facts]

    cols = [fit.Col("host", [(f.host, "bold" if f.ok else "bold red") for f in facts], cap=24),
            fit.Col("GPUs", [(_gpus_cell(f), "") if f.ok else (str(f.unreached or "probe failed"), "red")
                                for f in facts], cap=30),
            fit.Col("health", [health_cell(f) if f.ok else ("-", "") for f in facts]),
            fit.Col("SM", cell(lambda f: ",".join(sorted({g.compute_cap or "?" for g in f.gpus})) or "-")),
            fit.Col("link", cell(_link_cell)),
            fit.Col("P2P", cell(lambda f: f.p2p.split(" ")[0])),
            fit.Col("VM", cell(lambda f: f.virtualization or "?"), cap=10),
            fit.Col("driver", cell(lambda f: f.driver_version or "-")),
            fit.Col("address", [(f.address, "") for f in facts])]
    errors = [escape(about(f.host, f.error)) for f in facts if not f.ok and f.error]  # host text: not markup
    return fit.table(fit.choose(cols, width, wide, ascii_only), "probe", "\n".join(errors) or None,
                     "red" if errors else None)


def render(facts: list[HostFacts], console: Console, wide: bool = False) -> None:
    """The summary, then each host's verdict, GPUs, links and health: within the terminal's width, or with wide
    every value in full, each line whole however wide it is."""
    screen = real_console(console)
    ascii_only = fit.plain_terminal(screen)

    def line(text: str, style: str = "") -> None:
        screen.print(Text(visible(text), style=style), soft_wrap=wide)

    fit.emit(screen, summary_table(facts, screen.width, ascii_only, wide), wide)
    for f in facts:
        if not f.ok:
            continue
        screen.print()
        line(f"{f.host} ({f.address}): {verdict_line(f)}", "bold")
        if f.gpus:
            fit.emit(screen, gpu_table(f, screen.width, ascii_only, wide), wide)
        if (links := link_table(f)) is not None:
            fit.emit(screen, links, wide)
        if f.p2p_check is not None:
            line(*p2p_line(f.p2p_check))
        hw = hardware.assess(f)
        for fault in hw.fault:
            line(f"GPU fault: {fault}", "bold red")
        for note in hw.notes:
            line(f"note: {note}", "yellow")
        if f.kernel_log is not None and f.kernel_log.events:
            line(f"Xid events since boot ({f.kernel_log.source}):", "bold")
            for e in f.kernel_log.events:
                gpu = f"GPU {e.gpu_index}" if e.gpu_index is not None else f"PCI {e.pci}"
                line(f"  Xid {e.code} on {gpu} x{e.count}, last: {e.last}")
        for w in f.warnings:
            line(f"warning: {w}", "yellow")
