"""`inv probe`, the pure half: the one remote script (`command`) and the parser of what it prints (`parse`).

The script runs every fact-gathering command in one `sh -c` over a single exec channel and prints each
command's output between `@@fleet:begin NAME@@` and `@@fleet:end NAME rc=N@@` (stderr folded in).
Parsing is split into one small pure parser per command, so each can be tested on recorded output.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field

from fleet import facts as F
from fleet import hostside
from fleet.facts import DiskFree, Dmi, FlashinferCache, Gpu, HostFacts, OsInfo, Package, UnitState

QUERY_FIELDS = (
    "index", "name", "uuid", "compute_cap", "pci.bus_id", "memory.total", "power.draw", "power.limit",
    "driver_version", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
    "pcie.link.width.max",
)
# Distribution name -> import folder in site-packages; dist-info folders use the name with "_" for "-".
PACKAGE_DIRS = {
    "sglang": "sglang", "sgl-kernel": "sgl_kernel", "flashinfer-python": "flashinfer",
    "flashinfer": "flashinfer", "flashinfer-jit-cache": "flashinfer_jit_cache",
    "flashinfer-cubin": "flashinfer_cubin", "torch": "torch", "nvidia-nccl-cu12": "nvidia/nccl",
    "nvidia-nccl-cu13": "nvidia/nccl",
}
def command(venv: str, unit: str) -> str:
    """The exec-channel command line that runs the probe script (fleet/hostside/probe.sh) with its arguments."""
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


# --- per-command parsers (pure: text in, data out) ---------------------------------------------------

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
    out = QueryGpu(fields=[field_name(f) for f in fields] if fields else [])
    header_seen = False
    for line in text.splitlines():
        if not line.strip():
            continue
        if m := _REJECTED.search(line):
            out.rejected.append(m.group(1))
            continue
        cells = [c.strip() for c in line.split(",")]  # names contain spaces, never commas
        if not header_seen and not out.rows and all(_FIELD_NAME.match(c) for c in cells):
            out.fields, header_seen = [field_name(c) for c in cells], True
            continue
        if not out.fields or len(cells) != len(out.fields):
            out.skipped.append(line)
            continue
        out.rows.append({k: na(v) for k, v in zip(out.fields, cells, strict=True)})
    return out


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
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and value.strip():
            out.setdefault(key.strip().lower(), value.strip())
    return out


@dataclass
class SmiVersion:
    driver: str | None = None
    cuda: str | None = None


def parse_smi_version(text: str) -> SmiVersion:
    """`nvidia-smi --version` (newer drivers) or the banner of a bare `nvidia-smi` (any driver)."""
    kv = parse_key_colon(text)
    out = SmiVersion(driver=kv.get("driver version"), cuda=kv.get("cuda version"))
    banner_driver = re.search(r"Driver Version:\s*(\d[\w.]*)", text)
    banner_cuda = re.search(r"CUDA Version:\s*(\d[\d.]*)", text)
    out.driver = out.driver if out.driver and out.driver[0].isdigit() else None
    out.driver = out.driver or (banner_driver.group(1) if banner_driver else None)
    out.cuda = out.cuda if out.cuda and out.cuda[0].isdigit() else None
    out.cuda = out.cuda or (banner_cuda.group(1) if banner_cuda else None)
    return out


def parse_proc_driver_version(text: str) -> str | None:
    """/proc/driver/nvidia/version: 'NVRM version: NVIDIA UNIX ... Kernel Module ...  580.95.05  ...'."""
    m = re.search(r"NVRM version:.*?\s(\d{2,}\.\d+(?:\.\d+)?)\s", text + " ")
    return m.group(1) if m else None


def parse_os_release(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and re.fullmatch(r"[A-Z_][A-Z0-9_]*", key.strip()):
            try:
                parts = shlex.split(value)
            except ValueError:
                parts = [value.strip("'\"")]
            out[key.strip()] = " ".join(parts)
    return out


def parse_df(text: str) -> dict[str, DiskFree]:
    """The df section: `path LABEL PATH` lines, then `df -Pk` rows in the same order."""
    asked: list[tuple[str, str]] = []
    rows: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("path "):
            _, label, path = line.split(" ", 2)
            asked.append((label, path))
        elif (cols := line.split(None, 5)) and len(cols) == 6 and cols[1].isdigit():
            rows.append(cols)
    out = {label: DiskFree(path=path) for label, path in asked}
    if len(rows) == len(asked):  # rows follow the arguments' order; a failed one would shift them
        for (label, _), cols in zip(asked, rows, strict=True):
            out[label] = DiskFree(path=out[label].path, mount=cols[5], total_kib=int(cols[1]),
                                  avail_kib=int(cols[3]))
    return out


def parse_metadata(text: str) -> tuple[str | None, str | None]:
    """(Name, Version) from a dist-info METADATA header."""
    name = version = None
    for line in text.splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        if key == "Name":
            name = value.strip()
        elif key == "Version":
            version = value.strip()
    return name, version


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_packages(text: str) -> tuple[dict[str, Package], list[str]]:
    """The packages section: `@sp`/`@dir`/`@file` lines and the METADATA / direct_url.json contents."""
    dirs: set[str] = set()
    files: dict[str, list[str]] = {}
    warnings: list[str] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("@novenv "):
            warnings.append(f"venv {line[8:]} not found: no package versions")
        elif line.startswith("@dir "):
            dirs.add(line[5:])
        elif line.startswith("@file "):
            current = files.setdefault(line[6:], [])
        elif current is not None and not line.startswith("@sp "):
            current.append(line)
    packages: dict[str, Package] = {}
    for path, lines in files.items():
        if not path.endswith("/METADATA"):
            continue
        name, version = parse_metadata("\n".join(lines))
        if not name:
            continue
        dist_info = path.rsplit("/", 1)[0]
        site = dist_info.rsplit("/", 1)[0]
        key = normalize(name)
        top = f"{site}/{PACKAGE_DIRS[key]}" if key in PACKAGE_DIRS else None
        pkg = Package(version=version, path=top if top in dirs else None)
        editable_src = _editable_source("\n".join(files.get(f"{dist_info}/direct_url.json", [])))
        if editable_src:
            pkg.editable, pkg.path = True, editable_src
        elif pkg.path is None:
            warnings.append(f"{key} {version}: metadata found but no package folder in {site}")
        if key in packages:
            warnings.append(f"{key} is installed twice ({packages[key].version} and {version})")
        packages[key] = pkg
    return packages, warnings


def _editable_source(direct_url: str) -> str | None:
    try:
        info = json.loads(direct_url) if direct_url.strip() else {}
    except ValueError:
        return None
    url = info.get("url", "") if isinstance(info, dict) else ""
    if isinstance(info, dict) and info.get("dir_info", {}).get("editable") and url.startswith("file://"):
        return url.removeprefix("file://")
    return None


def parse_torch_version(text: str) -> tuple[str | None, str | None]:
    """(torch version, CUDA it was built for) from torch/version.py; cuda is None on CPU builds."""
    version = re.search(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
    cuda = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return (version.group(1) if version else None), (cuda.group(1) if cuda else None)


def parse_torch_archs(text: str) -> list[str] | None:
    """The arch list torch.cuda.get_arch_list() returns, as compiled into libtorch_python.so."""
    first = _first_line(text)
    return first.split() if re.fullmatch(r"((sm|compute)_\d+[a-z]?\s*)+", first) else None


def parse_dmi(text: str) -> Dmi:
    """The dmi section: sysfs or dmidecode as key=value, or raw `hostnamectl status`."""
    kv = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    source = kv.get("source")
    if source == "hostnamectl":
        hn = parse_key_colon(text)
        return Dmi(vendor=hn.get("hardware vendor"), product=hn.get("hardware model"), source=source)

    def clean(value: str | None) -> str | None:
        # dmidecode errors ("/dev/mem: Permission denied") are not a vendor name
        if not value or value.startswith("#") or re.search(r"denied|not found|No SMBIOS|/dev/mem", value):
            return None
        return value.strip() or None

    return Dmi(vendor=clean(kv.get("vendor")), product=clean(kv.get("product")), source=source)


def parse_unit(text: str) -> UnitState:
    """The unit section: `Unit=NAME`, then `systemctl show -p ...` key=value lines."""
    kv = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    pid = kv.get("MainPID", "")
    return UnitState(
        name=kv.get("Unit", ""), load_state=kv.get("LoadState") or None,
        active_state=kv.get("ActiveState") or None, sub_state=kv.get("SubState") or None,
        unit_file_state=kv.get("UnitFileState") or None,
        main_pid=int(pid) if pid.isdigit() and pid != "0" else None,
    )


def parse_flashinfer_cache(text: str) -> FlashinferCache:
    out = FlashinferCache()
    for line in text.splitlines():
        kind, _, value = line.partition(" ")
        if kind == "path":
            out.path = value
        elif kind == "exists":
            out.exists = True
        elif kind == "ws" and value[:1].isdigit():  # <version>/<archs>; skips e.g. cubins/
            out.workspaces.append(value)
        elif kind == "op" and value[:1].isdigit():
            out.modules.append(value.replace("/cached_ops/", "/"))
    return out


# --- assembly ----------------------------------------------------------------------------------------

def _first_line(text: str) -> str:
    return next((x.strip() for x in text.splitlines() if x.strip()), "")


def _failure(what: str, s: Section) -> str | None:
    """A warning for a section whose command did not succeed, or None."""
    if s.rc is None:
        return f"{what}: output cut short"
    if s.rc == 127 or (s.rc != 0 and "not found" in _first_line(s.text)):
        return f"{what}: command not found"
    if s.rc == 124:
        return f"{what}: timed out"
    if s.rc != 0:
        return f"{what} failed (rc={s.rc}): {_first_line(s.text) or 'no output'}"
    return None


def parse(output: str, host: str, address: str) -> HostFacts:
    """HostFacts from the probe script's output. Pure: the same output always gives the same facts."""
    sections = split_sections(output)
    if not sections:
        return HostFacts.failed(host, address, f"probe printed no sections: {_first_line(output)[:200]!r}")
    by_name: dict[str, list[Section]] = {}
    for s in sections:
        by_name.setdefault(s.name, []).append(s)
    f = HostFacts(host=host, address=address)
    if DONE not in output:
        f.warn("probe output ended early: facts after the last complete section are missing")
    _gpus(f, by_name.get("query-gpu", []))
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
    if (problem := _failure("nvidia-smi --query-gpu", last)) and last.rc != 0:
        f.warn(problem)
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
        word = _first_line(virt.text)
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
        parts = _first_line(kernel.text).split()
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
