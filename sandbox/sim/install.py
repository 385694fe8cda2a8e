"""Install the SIMULATED sglang/flashinfer stack into a site-packages directory.

    install(site_packages: pathlib.Path) -> None
    python -m sandbox.sim.install DIR

Copies the packages `sglang` (0.5.9), `flashinfer` (distribution flashinfer-python 0.6.3), `torch`
(2.9.1+cu130, metadata and device queries only) and `sglang_sim_core` (the simulator) into DIR (the router
is the real one: sandbox/router.py),
each with a `*.dist-info` (METADATA, WHEEL, INSTALLER, top_level.txt, RECORD, entry_points.txt where
the real package has console scripts), so `importlib.metadata` and `pip list` report them as the
real releases. Reinstalling replaces earlier copies (any version) of the same distributions. When
DIR is a venv's lib/pythonX.Y/site-packages, the `flashinfer` console script goes to <venv>/bin.
Standard library only; nothing here runs on import.
"""

from __future__ import annotations

import base64
import compileall
import hashlib
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PKGS = HERE / "pkgs"
SERVER_ARGS_JSON = HERE / "data" / "sglang-v0.5.9-server-args.json"

SIM_NOTE = "SIMULATED by fleet's sandbox (sandbox/sim): not the real package."


@dataclass(frozen=True)
class Dist:
    name: str  # distribution name as pip shows it
    version: str
    package: str  # top-level import package
    summary: str
    console_scripts: tuple[tuple[str, str], ...] = ()


DISTS = (
    Dist("sglang", "0.5.9", "sglang", "SGLang is a fast serving framework for large language models and vision "
         "language models."),
    Dist("flashinfer-python", "0.6.3", "flashinfer", "FlashInfer: Kernel Library for LLM Serving",
         (("flashinfer", "flashinfer.__main__:cli"),)),
    Dist("torch", "2.9.1+cu130", "torch", "Tensors and Dynamic neural networks in Python with strong GPU "
         "acceleration"),
    Dist("sglang-sim-core", "0.1.0", "sglang_sim_core", "The fleet sandbox's sglang/flashinfer simulator."),
)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _dist_info_name(dist: Dist) -> str:
    return f"{re.sub(r'[-_.]+', '_', dist.name)}-{dist.version}.dist-info"


def _record_line(path: Path, site: Path) -> str:
    data = path.read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{os.path.relpath(path, site)},sha256={digest},{len(data)}"


def _remove_existing(site: Path, dist: Dist) -> None:
    target = site / dist.package
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.exists() or target.is_symlink():
        target.unlink()
    for info in site.glob("*.dist-info"):
        meta = info / "METADATA"
        try:
            names = [ln.split(":", 1)[1].strip() for ln in meta.read_text().splitlines() if ln.startswith("Name:")]
        except OSError:
            continue
        if names and _normalize(names[0]) == _normalize(dist.name):
            shutil.rmtree(info)


def _copy_package(site: Path, dist: Dist) -> list[Path]:
    src = PKGS / dist.package
    dst = site / dist.package
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo"))
    if dist.package == "sglang":
        shutil.copyfile(SERVER_ARGS_JSON, dst / "srt" / "server_args_v0_5_9.json")
    # byte-compile as pip does (harmless when the host's Python differs: its cache tag differs)
    compileall.compile_dir(dst, quiet=1)
    return sorted(p for p in dst.rglob("*") if p.is_file())


def _venv_bin(site: Path) -> Path | None:
    """<venv>/bin when site is <venv>/lib/pythonX.Y/site-packages."""
    if site.name == "site-packages" and site.parent.name.startswith("python") and site.parent.parent.name == "lib":
        venv = site.parent.parent.parent
        if (venv / "bin").is_dir():
            return venv / "bin"
    return None


def _console_script(bin_dir: Path, name: str, target: str) -> Path:
    module, func = target.split(":")
    python = bin_dir / "python"
    script = bin_dir / name
    script.write_text(
        f"#!{python}\n# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom {module} import {func}\n"
        f"if __name__ == '__main__':\n"
        f"    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
        f"    sys.exit({func}())\n"
    )
    script.chmod(0o755)
    return script


def _write_dist_info(site: Path, dist: Dist, files: list[Path], scripts: list[Path]) -> None:
    info = site / _dist_info_name(dist)
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\n"
        f"Name: {dist.name}\n"
        f"Version: {dist.version}\n"
        f"Summary: {dist.summary} [{SIM_NOTE}]\n"
        "License: Apache-2.0\n"
        "Requires-Python: >=3.10\n"
        "\n"
        f"{SIM_NOTE}\n"
    )
    (info / "WHEEL").write_text(
        "Wheel-Version: 1.0\nGenerator: fleet-sandbox-sim\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    (info / "INSTALLER").write_text("fleet-sandbox-sim\n")
    (info / "top_level.txt").write_text(dist.package + "\n")
    if dist.console_scripts:
        body = "".join(f"{name} = {target}\n" for name, target in dist.console_scripts)
        (info / "entry_points.txt").write_text("[console_scripts]\n" + body)
    meta_files = sorted(p for p in info.iterdir() if p.is_file())
    lines = [_record_line(p, site) for p in [*files, *scripts, *meta_files]]
    lines.append(f"{os.path.relpath(info / 'RECORD', site)},,")
    (info / "RECORD").write_text("\n".join(lines) + "\n")


def install(site_packages: Path) -> None:
    """Install (or reinstall) the simulated stack into site_packages."""
    site = Path(site_packages)
    site.mkdir(parents=True, exist_ok=True)
    bin_dir = _venv_bin(site)
    for dist in DISTS:
        _remove_existing(site, dist)
        files = _copy_package(site, dist)
        scripts = []
        if bin_dir is not None:
            scripts = [_console_script(bin_dir, name, target) for name, target in dist.console_scripts]
        _write_dist_info(site, dist, files, scripts)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m sandbox.sim.install SITE_PACKAGES_DIR", file=sys.stderr)
        return 2
    install(Path(args[0]))
    print(f"installed simulated {', '.join(f'{d.name} {d.version}' for d in DISTS)} into {args[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
