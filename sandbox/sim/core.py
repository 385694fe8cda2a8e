"""One module of the simulator's core (sandbox/sim/pkgs/sglang_sim_core), loaded from its file for a reader on the
controller: a bench or a test that reads the simulator's own formulas instead of copying them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

PKGS = Path(__file__).resolve().parent / "pkgs"


def module(name: str) -> ModuleType:
    """sglang_sim_core/<name>.py as the module `sim_<name>` (its own `from sglang_sim_core import ...` resolve)."""
    sys.path.insert(0, str(PKGS))
    try:
        spec = importlib.util.spec_from_file_location(f"sim_{name}", PKGS / "sglang_sim_core" / f"{name}.py")
        assert spec and spec.loader
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = loaded  # dataclasses look their module up there
        spec.loader.exec_module(loaded)
        return loaded
    finally:
        sys.path.pop(0)
