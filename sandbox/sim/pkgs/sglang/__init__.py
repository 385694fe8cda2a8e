"""SIMULATED sglang 0.5.9 for fleet's sandbox hosts (not the real SGLang).

`python -m sglang.launch_server` and `python -m sglang.bench_serving` behave, log and fail the way
sglang 0.5.9 does on the modelled GPUs; see sandbox/sim/README.md in the fleet repository.
"""

from sglang.version import __version__

__all__ = ["__version__"]
