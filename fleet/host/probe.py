"""`inv probe`, the pure half: the one remote script (`command`) and the parser of what it prints (`parse`).

The script runs every fact-gathering command in one `sh -c` over a single exec channel and prints each
command's output between `@@fleet:begin NAME@@` and `@@fleet:end NAME rc=N@@` (stderr folded in).
Parsing is split into one small pure parser per command (fleet.host.nvsmi, fleet.host.sysinfo), so each can be
tested on recorded output; `parse` assembles their results into HostFacts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fleet.host import facts as F
from fleet.host import programs as hostside
from fleet.host.facts import Gpu, HostFacts, OsInfo
from fleet.host.gpuhealth import health_from_row, lost_gpus, parse_kernel_log, pci_key
from fleet.host.nvsmi import (
    SmiVersion,
    gpu_from_row,
    parse_proc_driver_version,
    parse_query_gpu,
    parse_smi_version,
    parse_topo_matrix,
)
from fleet.host.sysinfo import (
    first_line,
    parse_df,
    parse_dmi,
    parse_flashinfer_cache,
    parse_os_release,
    parse_packages,
    parse_torch_archs,
    parse_torch_version,
    parse_unit,
)

QUERY_FIELDS = (
    "index", "name", "uuid", "compute_cap", "pci.bus_id", "memory.total", "power.draw", "power.limit",
    "driver_version", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
    "pcie.link.width.max",
)


def command(venv: str, unit: str) -> str:
    """The exec-channel command line that runs the probe script (fleet/host/programs/probe.sh) with its arguments."""
    return hostside.sh_command("probe.sh", venv, unit, ",".join(QUERY_FIELDS))


# --- sections ----------------------------------------------------------------------------------------

_BEGIN = re.compile(r"^@@fleet:begin (\S+)@@$")
_END = re.compile(r"^@@fleet:end (\S+) rc=(\d+)@@$")
DONE = "@@fleet:done@@"


@dataclass
class Section:
    name: str
    rc: int | None  # None: the output ended inside this section
    text: str


def split_sections(output: str) -> list[Section]:
    sections: list[Section] = []
    current: Section | None = None
    lines: list[str] = []
    for line in output.replace("\r\n", "\n").split("\n"):
        end = _END.match(line) if current else None
        if current and end and end.group(1) == current.name:
            current.rc, current.text = int(end.group(2)), "\n".join(lines)
            sections.append(current)
            current = None
        elif current:
            lines.append(line)
        elif begin := _BEGIN.match(line):
            current, lines = Section(begin.group(1), None, ""), []
    if current:
        current.text = "\n".join(lines)
        sections.append(current)
    return sections


# --- assembly ----------------------------------------------------------------------------------------

def _failure(what: str, s: Section) -> str | None:
    """A warning for a section whose command did not succeed, or None."""
    if s.rc is None:
        return f"{what}: output cut short"
    if s.rc == 127 or (s.rc != 0 and "not found" in first_line(s.text)):
        return f"{what}: command not found"
    if s.rc == 124:
        return f"{what}: timed out"
    if s.rc != 0:
        return f"{what} failed (rc={s.rc}): {first_line(s.text) or 'no output'}"
    return None


def parse(output: str, host: str, address: str) -> HostFacts:
    """HostFacts from the probe script's output. Pure: the same output always gives the same facts."""
    sections = split_sections(output)
    if not sections:
        return HostFacts.failed(host, address, f"probe printed no sections: {first_line(output)[:200]!r}")
    by_name: dict[str, list[Section]] = {}
    for s in sections:
        by_name.setdefault(s.name, []).append(s)
    f = HostFacts(host=host, address=address)
    if DONE not in output:
        f.warn("probe output ended early: facts after the last complete section are missing")
    _gpus(f, by_name.get("query-gpu", []))
    _health(f, by_name)
    smi_missing = any(s.rc == 127 for s in by_name.get("query-gpu", []))
    if not smi_missing:  # one "not found" warning is enough: the other nvidia-smi calls failed alike
        _topology(f, by_name)
    _driver(f, by_name, smi_missing)
    _system(f, by_name)
    _software(f, by_name)
    f.gpus_agree, f.arch_family, warnings = F.gpu_warnings(f.gpus)
    for w in warnings + F.known_bad(f):
        f.warn(w)
    return f


def _gpus(f: HostFacts, attempts: list[Section]) -> None:
    if not attempts:
        f.warn("no nvidia-smi --query-gpu output")
        return
    last = attempts[-1]
    rejected = [r for s in attempts for r in parse_query_gpu(s.text).rejected]
    if last.rc == 127:
        f.warn("nvidia-smi not found: no GPU facts")
        return
    # 15: a GPU is lost (fallen off the bus); the others' rows still come
    if (problem := _failure("nvidia-smi --query-gpu", last)) and last.rc not in (0, 15):
        f.warn(problem)
        f.smi_error = problem[:300]
        return
    q = parse_query_gpu(last.text, [x for x in QUERY_FIELDS if x not in rejected])
    f.gpus = [gpu_from_row(r) for r in q.rows]
    for line in q.skipped:
        f.warn(f"nvidia-smi --query-gpu: ignored line {line.strip()[:120]!r}")
    for name in rejected:
        f.warn(f"the driver's nvidia-smi rejects the field {name!r}")
    drivers = sorted({v for r in q.rows if (v := r.get("driver_version"))})
    f.driver_version = drivers[0] if len(drivers) == 1 else None
    missing: dict[str, list[str]] = {}
    for row, gpu in zip(q.rows, f.gpus, strict=True):
        for name in QUERY_FIELDS:
            if name not in rejected and row.get(name) is None and name != "compute_cap":
                missing.setdefault(name, []).append(str(gpu.index))
    for name, idx in missing.items():
        f.warn(f"nvidia-smi reports no {name} for GPU {','.join(idx)}")
    _cc_fallback(f, [g for g in f.gpus if g.compute_cap is None])


def _health(f: HostFacts, by_name: dict[str, list[Section]]) -> None:
    """Health fields onto the GPUs (by index, else bus id), GPUs nvidia-smi could not open, Xid events."""
    smi = [s for key in ("query-gpu", "health-gpu") for s in by_name.get(key, [])]
    f.lost_gpus = lost_gpus("\n".join(s.text for s in smi))
    for lost in f.lost_gpus:
        f.warn(f"GPU {lost.pci_bus_id}: nvidia-smi cannot open it ({lost.reason})")
    if attempts := by_name.get("health-gpu"):
        last = attempts[-1]
        if last.rc not in (0, 15, 127) and (problem := _failure("nvidia-smi health query", last)):
            f.warn(problem)
        rows = parse_query_gpu(last.text).rows
        by_index = {r.get("index"): r for r in rows}
        by_bus = {pci_key(r.get("pci.bus_id")): r for r in rows}
        for gpu in f.gpus:
            row = by_index.get(str(gpu.index)) or by_bus.get(pci_key(gpu.pci_bus_id))
            gpu.health = health_from_row(row) if row else None
    if xid := by_name.get("xid"):
        f.kernel_log = parse_kernel_log(xid[-1].text)
        gpu_of = {pci_key(g.pci_bus_id): g.index for g in f.gpus}
        for event in f.kernel_log.events:
            event.gpu_index = gpu_of.get(event.pci)
        if f.kernel_log.problem:
            f.warn(f.kernel_log.problem)


def _cc_fallback(f: HostFacts, gpus: list[Gpu]) -> None:
    """Old drivers cannot say compute_cap: a well-known name gives it, flagged as such; else None."""
    by_name: dict[str | None, list[Gpu]] = {}
    for gpu in gpus:
        by_name.setdefault(gpu.name, []).append(gpu)
    for name, same in by_name.items():
        idx = ",".join(str(g.index) for g in same)
        cc = F.cc_from_name(name)
        for gpu in same:
            gpu.compute_cap, gpu.sm = cc, F.sm_of(cc)
            gpu.compute_cap_source = "name-table" if cc else None
        if cc:
            f.warn(f"GPU {idx}: the driver did not report compute_cap; {cc} taken from fleet's table of "
                   f"known names for {name!r}")
        else:
            f.warn(f"GPU {idx}: compute capability unknown (the driver did not report it and {name!r} "
                   "is not in fleet's name table)")


def _topology(f: HostFacts, by_name: dict[str, list[Section]]) -> None:
    for key, what in (("topo-m", "nvidia-smi topo -m"), ("topo-p2p-r", "nvidia-smi topo -p2p r")):
        s = by_name.get(key, [None])[-1]
        if s is None:
            f.warn(f"no {what} output")
            continue
        if problem := _failure(what, s):
            f.warn(problem)
        m = parse_topo_matrix(s.text)
        if m is None:
            f.warn(f"{what}: no GPU matrix in its output")
            continue
        if m.incomplete:
            f.warn(f"{what}: rows {', '.join(m.incomplete)} cut short")
        matrix = m.gpu_matrix()
        missing = [g for g in m.gpu_labels() if g not in m.rows]
        if missing:
            f.warn(f"{what}: no row for {', '.join(missing)}")
        if f.gpus and len(matrix) != len(f.gpus):
            f.warn(f"{what} shows {len(matrix)} GPUs but --query-gpu lists {len(f.gpus)}")
        if key == "topo-m":
            f.topology.links = matrix
        else:
            f.topology.p2p_read = matrix
    links = f.topology.links
    f.topology.nvlink = bool(links) and any(re.match(r"NV\d+$", c) for c in F.off_diagonal(links or []))
    f.interconnect, f.pcie_link, warnings = F.interconnect(links)
    for w in warnings:
        f.warn(w)
    count = len(f.gpus) or len(links or [])
    f.p2p = F.p2p_status(f.topology.p2p_read, count)


def _driver(f: HostFacts, by_name: dict[str, list[Section]], smi_missing: bool) -> None:
    version = SmiVersion()
    for key in ("smi-version", "smi-plain"):
        for s in by_name.get(key, []):
            if s.rc == 0:
                got = parse_smi_version(s.text)
                version.driver, version.cuda = version.driver or got.driver, version.cuda or got.cuda
    proc = by_name.get("proc-driver", [None])[-1]
    proc_driver = parse_proc_driver_version(proc.text) if proc and proc.rc == 0 else None
    f.driver_version = f.driver_version or version.driver or proc_driver
    if proc_driver and f.driver_version and proc_driver != f.driver_version:
        f.warn(f"kernel module {proc_driver} differs from nvidia-smi's driver {f.driver_version}: "
               "driver/library mismatch (reboot or reload the nvidia module)")
    if f.driver_version is None:
        f.warn("driver version not reported (nvidia-smi and /proc/driver/nvidia/version)")
    f.cuda_version = version.cuda
    if f.cuda_version is None and not smi_missing:
        f.warn("the driver's CUDA version not reported (no nvidia-smi --version, no banner)")


def _system(f: HostFacts, by_name: dict[str, list[Section]]) -> None:
    def last(name: str) -> Section | None:
        return by_name.get(name, [None])[-1]

    if (virt := last("virt")) is not None:
        word = first_line(virt.text)
        if virt.rc in (0, 1) and re.fullmatch(r"[a-z0-9-]+", word):
            f.virtualization = word
        else:
            f.warn(f"virtualization unknown: {_failure('systemd-detect-virt', virt) or word}")
    if (dmi := last("dmi")) is not None:
        f.dmi = parse_dmi(dmi.text)
    if f.dmi.vendor is None and f.dmi.product is None:
        f.warn("DMI vendor/product not readable (sysfs, dmidecode, hostnamectl)")
    f.virt_verdict = F.virt_verdict(f.virtualization, f.dmi)
    if (osr := last("os-release")) is not None and osr.rc == 0:
        kv = parse_os_release(osr.text)
        f.os = OsInfo(id=kv.get("ID"), version_id=kv.get("VERSION_ID"), pretty_name=kv.get("PRETTY_NAME"))
    if (kernel := last("kernel")) is not None and kernel.rc == 0:
        parts = first_line(kernel.text).split()
        f.os.kernel, f.os.machine = (parts[1], parts[-1]) if len(parts) >= 3 else (None, None)
    if (df := last("df")) is not None:
        f.disk = parse_df(df.text)
        if any(d.avail_kib is None for d in f.disk.values()):
            f.warn(f"free disk unknown: {_failure('df', df) or 'df rows did not match the paths asked'}")
    if (unit := last("unit")) is not None:
        f.unit = parse_unit(unit.text)
        said = "\n".join(x for x in unit.text.splitlines() if not x.startswith("Unit="))
        if problem := _failure("systemctl show", Section(unit.name, unit.rc, said)):
            f.warn(problem)


def _software(f: HostFacts, by_name: dict[str, list[Section]]) -> None:
    if pk := by_name.get("packages"):
        f.packages, warnings = parse_packages(pk[-1].text)
        for w in warnings:
            f.warn(w)
        for needed in ("sglang", "flashinfer-python", "torch"):
            if needed not in f.packages:
                f.warn(f"{needed} is not installed in the venv (no {needed} metadata in site-packages)")
    if tv := by_name.get("torch-version"):
        _, f.torch_cuda = parse_torch_version(tv[-1].text)
        if "torch" in f.packages and f.torch_cuda is None:
            f.warn("torch/version.py names no CUDA version: a CPU-only torch?")
    if "torch" in f.packages and (ta := by_name.get("torch-archs")):
        f.torch_cuda_archs = parse_torch_archs(ta[-1].text)
        if f.torch_cuda_archs is None and f.torch_cuda:
            f.warn("torch's CUDA arch list not found in libtorch_python.so")
    nccl = [p.version for k, p in f.packages.items() if k.startswith("nvidia-nccl-")]
    f.nccl_version = nccl[-1] if nccl else None
    f.flashinfer_jit_cache = "flashinfer-jit-cache" in f.packages
    if fc := by_name.get("flashinfer-cache"):
        f.flashinfer_cache = parse_flashinfer_cache(fc[-1].text)
