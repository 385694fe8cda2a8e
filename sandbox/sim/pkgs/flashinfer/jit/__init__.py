"""JIT compilation (SIMULATED flashinfer 0.6.3)."""

from .core import JitSpec, clear_cache_dir, gen_jit_spec

__all__ = ["JitSpec", "clear_cache_dir", "gen_jit_spec"]
