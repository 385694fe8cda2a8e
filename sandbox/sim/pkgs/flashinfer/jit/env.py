"""JIT paths (SIMULATED flashinfer 0.6.3), as upstream lays them out.

  FLASHINFER_CACHE_DIR      = ${FLASHINFER_WORKSPACE_BASE:-$HOME}/.cache/flashinfer
  FLASHINFER_WORKSPACE_DIR  = <cache>/<flashinfer version>/<target archs joined by _>  (e.g. 120a)
  FLASHINFER_JIT_DIR        = <workspace>/cached_ops    (module <name> at cached_ops/<name>/<name>.so)
  FLASHINFER_GEN_SRC_DIR    = <workspace>/generated
Sources compile from <package>/data/include and <package>/data/csrc; prebuilt AOT modules in
<package>/data/aot/<name>/<name>.so (or an installed flashinfer_jit_cache) win over the sources.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib

from flashinfer import __version__ as flashinfer_version
from flashinfer.compilation_context import CompilationContext

FLASHINFER_BASE_DIR = pathlib.Path(os.getenv("FLASHINFER_WORKSPACE_BASE", pathlib.Path.home().as_posix()))
FLASHINFER_CACHE_DIR = FLASHINFER_BASE_DIR / ".cache" / "flashinfer"


def _get_workspace_dir_name() -> pathlib.Path:
    ctx = CompilationContext()
    arch = "_".join(f"{major}{minor}" for major, minor in sorted(ctx.TARGET_CUDA_ARCHS))
    return FLASHINFER_CACHE_DIR / flashinfer_version / arch


FLASHINFER_WORKSPACE_DIR = _get_workspace_dir_name()
FLASHINFER_JIT_DIR = FLASHINFER_WORKSPACE_DIR / "cached_ops"
FLASHINFER_GEN_SRC_DIR = FLASHINFER_WORKSPACE_DIR / "generated"
FLASHINFER_JIT_LOG = FLASHINFER_WORKSPACE_DIR / "flashinfer_jit.log"

_package_root = pathlib.Path(__file__).resolve().parents[1]
FLASHINFER_DATA = _package_root / "data"
FLASHINFER_INCLUDE_DIR = FLASHINFER_DATA / "include"
FLASHINFER_CSRC_DIR = FLASHINFER_DATA / "csrc"
FLASHINFER_AOT_DIR = FLASHINFER_DATA / "aot"


def jit_cache_package_dir() -> pathlib.Path | None:
    """The flashinfer-jit-cache package's prebuilt modules, when that package is installed."""
    spec = importlib.util.find_spec("flashinfer_jit_cache")
    if spec is None or not spec.submodule_search_locations:
        return None
    return pathlib.Path(list(spec.submodule_search_locations)[0]) / "jit_cache"
