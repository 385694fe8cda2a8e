"""`inv probe`, the pure half: the one remote script (`command`) and the parser of what it prints (`parse`).

The script runs every fact-gathering command in one `sh -c` over a single exec channel and prints each
command's output between `@@fleet:begin NAME@@` and `@@fleet:end NAME rc=N@@` (stderr folded in).
Parsing is split into one small pure parser per command (fleet.host.nvsmi, fleet.host.sysinfo), so each can be
tested on recorded output; `parse` assembles their results into HostFacts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fleet.host import facts as F
from fleet.host import programs as hostside
from fleet.host.facts import DiskFree, Dmi, FlashinferCache, Gpu, HostFacts, OsInfo, Package, Topology, UnitState
from fleet.host.gpuhealth import KernelLog, LostGpu, health_from_row, lost_gpus, parse_kernel_log, pci_key
from fleet.host.nvsmi import (
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


@dataclass(frozen=True)
class Section:
    name: str
    rc: int | None  # None: the output ended inside this section
    text: str


def split_sections(output: str) -> list[Section]:
    sections: list[Section] = []
    current: str | None = None  # the name of the section being read
    lines: list[str] = []
    for line in output.replace("\r\n", "\n").split("\n"):
        end = _END.match(line) if current else None
        if current and end and end.group(1) == current:
            sections.append(Section(current, int(end.group(2)), "\n".join(lines)))
            current = None
        elif current:
            lines.append(line)
        elif begin := _BEGIN.match(line):
            current, lines = begin.group(1), []
    if current:
        sections.append(Section(current, None, "\n".join(lines)))
    return sections


# --- assembly ----------------------------------------------------------------------------------------

Sections = dict[str, list[Section]]


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
    by_name: Sections = {}
    for s in sections:
        by_name.setdefault(s.name, []).append(s)
    warnings: list[str] = []
    if DONE not in output:
        warnings.append("probe output ended early: facts after the last complete section are missing")
    query = _gpus(by_name.get("query-gpu", []))
    health = _health(query.gpus, by_name)
    smi_missing = any(s.rc == 127 for s in by_name.get("query-gpu", []))
    # one "not found" warning is enough: the other nvidia-smi calls failed alike
    links = _Links() if smi_missing else _topology(health.gpus, by_name)
    driver = _driver(query.driver_version, by_name, smi_missing)
    system = _system(by_name)
    software = _software(by_name)
    agree, family, mixed = F.gpu_warnings(health.gpus)
    warnings += (query.warnings + health.warnings + links.warnings + driver.warnings + system.warnings
                 + software.warnings + mixed)
    facts = HostFacts(
        host=host, address=address, gpus=health.gpus, topology=links.topology,
        driver_version=driver.version, cuda_version=driver.cuda, virtualization=system.virtualization,
        virt_verdict=system.virt_verdict, dmi=system.dmi, os=system.os, arch_family=family, gpus_agree=agree,
        interconnect=links.interconnect, pcie_link=links.pcie_link, p2p=links.p2p, packages=software.packages,
        torch_cuda=software.torch_cuda, torch_cuda_archs=software.torch_cuda_archs,
        nccl_version=software.nccl_version, flashinfer_jit_cache=software.flashinfer_jit_cache,
        flashinfer_cache=software.flashinfer_cache, disk=system.disk, unit=system.unit,
        lost_gpus=health.lost_gpus, smi_error=query.smi_error, kernel_log=health.kernel_log)
    return facts.model_copy(update={"warnings": list(dict.fromkeys(warnings + F.known_bad(facts)))})


@dataclass(frozen=True)
class _Query:
    """What nvidia-smi --query-gpu said."""

    gpus: list[Gpu] = field(default_factory=list)
    driver_version: str | None = None
    smi_error: str | None = None
    warnings: list[str] = field(default_factory=list)


def _gpus(attempts: list[Section]) -> _Query:
    if not attempts:
        return _Query(warnings=["no nvidia-smi --query-gpu output"])
    last = attempts[-1]
    rejected = [r for s in attempts for r in parse_query_gpu(s.text).rejected]
    if last.rc == 127:
        return _Query(warnings=["nvidia-smi not found: no GPU facts"])
    # 15: a GPU is lost (fallen off the bus); the others' rows still come
    if (problem := _failure("nvidia-smi --query-gpu", last)) and last.rc not in (0, 15):
        return _Query(smi_error=problem[:300], warnings=[problem])
    q = parse_query_gpu(last.text, [x for x in QUERY_FIELDS if x not in rejected])
    gpus = [gpu_from_row(r) for r in q.rows]
    warnings = [f"nvidia-smi --query-gpu: ignored line {line.strip()[:120]!r}" for line in q.skipped]
    warnings += [f"the driver's nvidia-smi rejects the field {name!r}" for name in rejected]
    drivers = sorted({v for r in q.rows if (v := r.get("driver_version"))})
    missing: dict[str, list[str]] = {}
    for row, gpu in zip(q.rows, gpus, strict=True):
        for name in QUERY_FIELDS:
            if name not in rejected and row.get(name) is None and name != "compute_cap":
                missing.setdefault(name, []).append(str(gpu.index))
    warnings += [f"nvidia-smi reports no {name} for GPU {','.join(idx)}" for name, idx in missing.items()]
    gpus, unknown_cc = _cc_fallback(gpus)
    return _Query(gpus, drivers[0] if len(drivers) == 1 else None, None, warnings + unknown_cc)


@dataclass(frozen=True)
class _Health:
    """The GPUs with their health, the GPUs nvidia-smi could not open, the kernel's Xid events."""

    gpus: list[Gpu]
    lost_gpus: list[LostGpu]
    kernel_log: KernelLog | None
    warnings: list[str]


def _health(gpus: list[Gpu], by_name: Sections) -> _Health:
    """Health fields onto the GPUs (by index, else bus id), GPUs nvidia-smi could not open, Xid events."""
    smi = [s for key in ("query-gpu", "health-gpu") for s in by_name.get(key, [])]
    lost = lost_gpus("\n".join(s.text for s in smi))
    warnings = [f"GPU {x.pci_bus_id}: nvidia-smi cannot open it ({x.reason})" for x in lost]
    if attempts := by_name.get("health-gpu"):
        last = attempts[-1]
        if last.rc not in (0, 15, 127) and (problem := _failure("nvidia-smi health query", last)):
            warnings.append(problem)
        rows = parse_query_gpu(last.text).rows
        by_index = {r.get("index"): r for r in rows}
        by_bus = {pci_key(r.get("pci.bus_id")): r for r in rows}
        gpus = [gpu.model_copy(update={"health": health_from_row(row) if row else None})
                for gpu in gpus
                for row in [by_index.get(str(gpu.index)) or by_bus.get(pci_key(gpu.pci_bus_id))]]
    kernel_log = None
    if xid := by_name.get("xid"):
        read = parse_kernel_log(xid[-1].text)
        gpu_of = {pci_key(g.pci_bus_id): g.index for g in gpus}
        events = [e.model_copy(update={"gpu_index": gpu_of.get(e.pci)}) for e in read.events]
        kernel_log = read.model_copy(update={"events": events})
        if read.problem:
            warnings.append(read.problem)
    return _Health(gpus, lost, kernel_log, warnings)


def _cc_fallback(gpus: list[Gpu]) -> tuple[list[Gpu], list[str]]:
    """Old drivers cannot say compute_cap: a well-known name gives it, flagged as such; else None.
    The GPUs with it filled in where it was missing, and a warning per GPU name that lacked it."""
    by_name: dict[str | None, list[Gpu]] = {}
    for gpu in gpus:
        if gpu.compute_cap is None:
            by_name.setdefault(gpu.name, []).append(gpu)
    warnings = []
    for name, same in by_name.items():
        idx = ",".join(str(g.index) for g in same)
        if cc := F.cc_from_name(name):
            warnings.append(f"GPU {idx}: the driver did not report compute_cap; {cc} taken from fleet's table of "
                            f"known names for {name!r}")
        else:
            warnings.append(f"GPU {idx}: compute capability unknown (the driver did not report it and {name!r} "
                            "is not in fleet's name table)")
    return [gpu if gpu.compute_cap is not None else _named_cc(gpu) for gpu in gpus], warnings


def _named_cc(gpu: Gpu) -> Gpu:
    cc = F.cc_from_name(gpu.name)
    return gpu.model_copy(update={"compute_cap": cc, "sm": F.sm_of(cc),
                                  "compute_cap_source": "name-table" if cc else None})


@dataclass(frozen=True)
class _Links:
    """What nvidia-smi topo said of the links between the GPUs."""

    topology: Topology = field(default_factory=Topology)
    interconnect: str = "unknown"
    pcie_link: str | None = None
    p2p: str = "unknown"
    warnings: list[str] = field(default_factory=list)


def _topology(gpus: list[Gpu], by_name: Sections) -> _Links:
    warnings: list[str] = []
    matrices: dict[str, list[list[str | None]]] = {}
    for key, what in (("topo-m", "nvidia-smi topo -m"), ("topo-p2p-r", "nvidia-smi topo -p2p r")):
        s = by_name.get(key, [None])[-1]
        if s is None:
            warnings.append(f"no {what} output")
            continue
        if problem := _failure(what, s):
            warnings.append(problem)
        m = parse_topo_matrix(s.text)
        if m is None:
            warnings.append(f"{what}: no GPU matrix in its output")
            continue
        if m.incomplete:
            warnings.append(f"{what}: rows {', '.join(m.incomplete)} cut short")
        matrix = m.gpu_matrix()
        missing = [g for g in m.gpu_labels() if g not in m.rows]
        if missing:
            warnings.append(f"{what}: no row for {', '.join(missing)}")
        if gpus and len(matrix) != len(gpus):
            warnings.append(f"{what} shows {len(matrix)} GPUs but --query-gpu lists {len(gpus)}")
        matrices[key] = matrix
    links, p2p_read = matrices.get("topo-m"), matrices.get("topo-p2p-r")
    nvlink = bool(links) and any(re.match(r"NV\d+$", c) for c in F.off_diagonal(links or []))
    kind, pcie_link, found = F.interconnect(links)
    p2p = F.p2p_status(p2p_read, len(gpus) or len(links or []))
    return _Links(Topology(links=links, nvlink=nvlink, p2p_read=p2p_read), kind, pcie_link, p2p, warnings + found)


@dataclass(frozen=True)
class _Driver:
    version: str | None
    cuda: str | None
    warnings: list[str]


def _driver(from_query: str | None, by_name: Sections, smi_missing: bool) -> _Driver:
    """The driver's version (--query-gpu's, else nvidia-smi --version or banner, else the kernel module's) and
    the highest CUDA it supports."""
    said = [parse_smi_version(s.text) for key in ("smi-version", "smi-plain") for s in by_name.get(key, [])
            if s.rc == 0]
    smi_driver = next((v.driver for v in said if v.driver), None)
    cuda = next((v.cuda for v in said if v.cuda), None)
    proc = by_name.get("proc-driver", [None])[-1]
    proc_driver = parse_proc_driver_version(proc.text) if proc and proc.rc == 0 else None
    version = from_query or smi_driver or proc_driver
    warnings = []
    if proc_driver and version and proc_driver != version:
        warnings.append(f"kernel module {proc_driver} differs from nvidia-smi's driver {version}: "
                        "driver/library mismatch (reboot or reload the nvidia module)")
    if version is None:
        warnings.append("driver version not reported (nvidia-smi and /proc/driver/nvidia/version)")
    if cuda is None and not smi_missing:
        warnings.append("the driver's CUDA version not reported (no nvidia-smi --version, no banner)")
    return _Driver(version, cuda, warnings)


@dataclass(frozen=True)
class _System:
    """The machine: virtualization, DMI, OS and kernel, free disk, the service's unit."""

    virtualization: str | None
    virt_verdict: str | None
    dmi: Dmi
    os: OsInfo
    disk: dict[str, DiskFree]
    unit: UnitState | None
    warnings: list[str]


def _system(by_name: Sections) -> _System:
    def last(name: str) -> Section | None:
        return by_name.get(name, [None])[-1]

    warnings = []
    virtualization = None
    if (virt := last("virt")) is not None:
        word = first_line(virt.text)
        if virt.rc in (0, 1) and re.fullmatch(r"[a-z0-9-]+", word):
            virtualization = word
        else:
            warnings.append(f"virtualization unknown: {_failure('systemd-detect-virt', virt) or word}")
    dmi = parse_dmi(d.text) if (d := last("dmi")) is not None else Dmi()
    if dmi.vendor is None and dmi.product is None:
        warnings.append("DMI vendor/product not readable (sysfs, dmidecode, hostnamectl)")
    osr = last("os-release")
    kv = parse_os_release(osr.text) if osr is not None and osr.rc == 0 else {}
    kernel, machine = None, None
    if (uname := last("kernel")) is not None and uname.rc == 0:
        parts = first_line(uname.text).split()
        kernel, machine = (parts[1], parts[-1]) if len(parts) >= 3 else (None, None)
    os_info = OsInfo(id=kv.get("ID"), version_id=kv.get("VERSION_ID"), pretty_name=kv.get("PRETTY_NAME"),
                     kernel=kernel, machine=machine)
    disk: dict[str, DiskFree] = {}
    if (df := last("df")) is not None:
        disk = parse_df(df.text)
        if any(x.avail_kib is None for x in disk.values()):
            warnings.append(f"free disk unknown: {_failure('df', df) or 'df rows did not match the paths asked'}")
    unit_state = None
    if (unit := last("unit")) is not None:
        unit_state = parse_unit(unit.text)
        said = "\n".join(x for x in unit.text.splitlines() if not x.startswith("Unit="))
        if problem := _failure("systemctl show", Section(unit.name, unit.rc, said)):
            warnings.append(problem)
    return _System(virtualization, F.virt_verdict(virtualization, dmi), dmi, os_info, disk, unit_state, warnings)


@dataclass(frozen=True)
class _Software:
    """The venv: its packages, the CUDA and archs torch was built for, NCCL, flashinfer's JIT cache."""

    packages: dict[str, Package]
    torch_cuda: str | None
    torch_cuda_archs: list[str] | None
    nccl_version: str | None
    flashinfer_jit_cache: bool
    flashinfer_cache: FlashinferCache
    warnings: list[str]


def _software(by_name: Sections) -> _Software:
    packages: dict[str, Package] = {}
    warnings: list[str] = []
    if pk := by_name.get("packages"):
        packages, warnings = parse_packages(pk[-1].text)
        warnings = list(warnings)
        warnings += [f"{needed} is not installed in the venv (no {needed} metadata in site-packages)"
                     for needed in ("sglang", "flashinfer-python", "torch") if needed not in packages]
    torch_cuda = None
    if tv := by_name.get("torch-version"):
        _, torch_cuda = parse_torch_version(tv[-1].text)
        if "torch" in packages and torch_cuda is None:
            warnings.append("torch/version.py names no CUDA version: a CPU-only torch?")
    archs = None
    if "torch" in packages and (ta := by_name.get("torch-archs")):
        archs = parse_torch_archs(ta[-1].text)
        if archs is None and torch_cuda:
            warnings.append("torch's CUDA arch list not found in libtorch_python.so")
    nccl = [p.version for k, p in packages.items() if k.startswith("nvidia-nccl-")]
    fc = by_name.get("flashinfer-cache")
    return _Software(packages, torch_cuda, archs, nccl[-1] if nccl else None, "flashinfer-jit-cache" in packages,
                     parse_flashinfer_cache(fc[-1].text) if fc else FlashinferCache(), warnings)
