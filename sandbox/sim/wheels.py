"""The SIMULATED stack as wheels, named and versioned like the real releases, for fleet's wheelhouse.

    build(dest: Path, pairs=PAIRS, corpus=None) -> list[Path]
    python -m sandbox.sim.wheels DEST

For each (sglang, flashinfer-python) pair: `sglang-<v>-py3-none-any.whl`, `flashinfer_python-<v>-...whl` and the
torch that sglang release pins (`torch-<v>+cu130`), plus `sglang_sim_core-0.1.0` (the simulator). What differs
between releases (flags, startup lines, where the fusion gates sit and what they say, flashinfer's JIT and kernel
gates) is generated into each wheel from that release's real wheel in the corpus (sandbox/sim/releases.py).
Each METADATA carries the real Requires-Dist lines between these distributions, read from the real wheel's
METADATA in the upstream corpus (`inv upstream`; ~/.cache/fleet/upstream), so pip resolves them as it would
the real ones; sglang also requires sglang-sim-core. Built with zipfile, deterministic (fixed times, sorted
entries): the same input gives the same sha256. Standard library and fleet.upstream.corpus only.
"""

from __future__ import annotations

import base64
import hashlib
import re
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from fleet.upstream import corpus
from sandbox.sim import releases
from sandbox.sim.install import DISTS, PKGS, SERVER_ARGS_JSON, SIM_NOTE, Dist

PAIRS = (("0.5.9", "0.6.3"), ("0.5.23", "0.7.2"))
SIM_CORE = next(d for d in DISTS if d.package == "sglang_sim_core")
TORCH_LOCAL = "+cu130"  # the CUDA build the simulated torch reports (torch.version.cuda)
_VERSION_FILES = {"sglang": "sglang/version.py", "flashinfer": "flashinfer/__init__.py", "torch": "torch/version.py"}
_EPOCH = (2026, 1, 1, 0, 0, 0)
_BETWEEN = {"sglang", "flashinfer-python", "torch"}


class CorpusMissing(RuntimeError):
    """The real METADATA a simulated wheel copies its pins from is not in the corpus."""


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _real_metadata(dist: str, version: str, cache: Path | None) -> str:
    text = corpus.metadata(dist, version, cache)
    if text is None:
        raise CorpusMissing(f"no METADATA of {dist} {version} in the upstream corpus ({cache or corpus.cache_dir()});"
                            " run `inv upstream` first")
    return text


def _pins_between(metadata: str) -> tuple[list[str], list[str]]:
    """(Requires-Dist lines naming the simulated distributions, Provides-Extra lines) of a real METADATA."""
    head = HeaderParser().parsestr(metadata)
    reqs = [str(r) for r in head.get_all("Requires-Dist") or []
            if _canon(re.split(r"[\s\[<>=!~;(]", str(r), maxsplit=1)[0]) in _BETWEEN and "extra ==" not in str(r)]
    return reqs, [str(e) for e in head.get_all("Provides-Extra") or []]


def _torch_pin(requires: list[str]) -> str:
    for line in requires:
        m = re.fullmatch(r"torch\s*==\s*([0-9.]+)", line.strip())
        if m:
            return m.group(1)
    raise CorpusMissing(f"no exact torch pin among {requires}")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _files(dist: Dist, version: str, cache: Path | None = None) -> dict[str, bytes]:
    root = PKGS / dist.package
    out = {f"{dist.package}/{p.relative_to(root).as_posix()}": p.read_bytes() for p in sorted(root.rglob("*"))
           if p.is_file() and "__pycache__" not in p.parts and p.suffix not in {".pyc", ".pyo"}}
    if dist.package == "sglang":
        out["sglang/srt/server_args_v0_5_9.json"] = SERVER_ARGS_JSON.read_bytes()
        out.update(releases.sglang_files(version, cache))  # what this release says and gates, from its real wheel
    elif dist.package == "flashinfer":
        out.update(releases.flashinfer_files(version, out, cache))
    where = _VERSION_FILES.get(dist.package)
    if where:  # the module's own __version__ says the wheel's version
        out[where] = re.sub(rb'__version__ = "[^"]*"', f'__version__ = "{version}"'.encode(), out[where], count=1)
    return out


def _wheel(dest: Path, dist: Dist, version: str, requires: list[str], extras: list[str],
           cache: Path | None = None) -> Path:
    stem = f"{re.sub(r'[-_.]+', '_', dist.name)}-{version}"
    info = f"{stem}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {dist.name}", f"Version: {version}",
            f"Summary: {dist.summary} [{SIM_NOTE}]", "License: Apache-2.0", "Requires-Python: >=3.10",
            *(f"Provides-Extra: {e}" for e in extras), *(f"Requires-Dist: {r}" for r in requires), "", SIM_NOTE, ""]
    files = _files(dist, version, cache)
    files[f"{info}/METADATA"] = "\n".join(meta).encode()
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: fleet-sandbox-sim\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n")
    files[f"{info}/top_level.txt"] = f"{dist.package}\n".encode()
    if dist.console_scripts:
        body = "".join(f"{n} = {t}\n" for n, t in dist.console_scripts)
        files[f"{info}/entry_points.txt"] = ("[console_scripts]\n" + body).encode()
    record = "".join(f"{name},sha256={_b64(data)},{len(data)}\n" for name, data in sorted(files.items()))
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    path = dest / f"{stem}-py3-none-any.whl"
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            entry = zipfile.ZipInfo(name, date_time=_EPOCH)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(entry, files[name])
    tmp.replace(path)
    return path


def build(dest: Path, pairs: tuple[tuple[str, str], ...] = PAIRS, cache: Path | None = None) -> list[Path]:
    """Write the wheels of every pair (and the simulator's) into dest; returns their paths, sorted."""
    dest.mkdir(parents=True, exist_ok=True)
    by_package = {d.package: d for d in DISTS}
    out = {_wheel(dest, SIM_CORE, SIM_CORE.version, [], [])}
    for sglang, flashinfer in pairs:
        s_req, s_extra = _pins_between(_real_metadata("sglang", sglang, cache))
        f_req, f_extra = _pins_between(_real_metadata("flashinfer-python", flashinfer, cache))
        torch = _torch_pin(s_req)
        out.add(_wheel(dest, by_package["sglang"], sglang, [*s_req, f"{SIM_CORE.name}=={SIM_CORE.version}"], s_extra,
                       cache))
        out.add(_wheel(dest, by_package["flashinfer"], flashinfer, f_req, f_extra, cache))
        out.add(_wheel(dest, by_package["torch"], torch + TORCH_LOCAL, [], []))
    return sorted(out)


def torch_wheel(dest: Path, version: str, requires: tuple[str, ...] = ()) -> Path:
    """The simulated torch alone, under any version (a build without the local label, or another build of the
    same one: `requires` changes its bytes, not its name)."""
    return _wheel(dest, next(d for d in DISTS if d.package == "torch"), version, list(requires), [])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m sandbox.sim.wheels DEST", file=sys.stderr)
        return 2
    try:
        paths = build(Path(args[0]))
    except (CorpusMissing, releases.ReleaseMissing) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("\n".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
