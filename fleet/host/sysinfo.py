"""The host's system and software facts, parsed (pure): os-release, df, DMI, the unit's state, the venv's
packages (dist-info METADATA), torch's version and archs, flashinfer's JIT cache."""

from __future__ import annotations

import json
import re
import shlex

from fleet.host.facts import DiskFree, Dmi, FlashinferCache, Package, UnitState
from fleet.host.nvsmi import parse_key_colon


def first_line(text: str) -> str:
    return next((x.strip() for x in text.splitlines() if x.strip()), "")

# Distribution name -> import folder in site-packages; dist-info folders use the name with "_" for "-".
PACKAGE_DIRS = {
    "sglang": "sglang", "sgl-kernel": "sgl_kernel", "sglang-kernel": "sgl_kernel", "flashinfer-python": "flashinfer",
    "flashinfer": "flashinfer", "flashinfer-jit-cache": "flashinfer_jit_cache",
    "flashinfer-cubin": "flashinfer_cubin", "torch": "torch", "nvidia-nccl-cu12": "nvidia/nccl",
    "nvidia-nccl-cu13": "nvidia/nccl",
}


def parse_os_release(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
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
        editable_src = _editable_source("\n".join(files.get(f"{dist_info}/direct_url.json", [])))
        pkg = (Package(version=version, path=editable_src, editable=True) if editable_src
               else Package(version=version, path=top if top in dirs else None))
        if not editable_src and pkg.path is None:
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
    version = re.search(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    cuda = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    return (version.group(1) if version else None), (cuda.group(1) if cuda else None)


def parse_torch_archs(text: str) -> list[str] | None:
    """The arch list torch.cuda.get_arch_list() returns, as compiled into libtorch_python.so."""
    first = first_line(text)
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
    path: str | None = None
    exists = False
    workspaces: list[str] = []
    modules: list[str] = []
    for line in text.splitlines():
        kind, _, value = line.partition(" ")
        if kind == "path":
            path = value
        elif kind == "exists":
            exists = True
        elif kind == "ws" and value[:1].isdigit():  # <version>/<archs>; skips e.g. cubins/
            workspaces.append(value)
        elif kind == "op" and value[:1].isdigit():
            modules.append(value.replace("/cached_ops/", "/"))
    return FlashinferCache(path=path, exists=exists, workspaces=workspaces, modules=modules)
