"""SIMULATED sglang-router for fleet's sandbox hosts (not the real SGLang router, which is Rust).

`python -m sglang_router.launch_router --worker-urls URL... [--policy round_robin] [--api-key K]` routes
/generate and the OpenAI endpoints to healthy sglang workers over real HTTP, checks the workers' health
in the background and adds or removes workers at runtime; see sandbox/sim/README.md in the fleet repository.
"""

from sglang_router.version import __version__

__all__ = ["__version__"]
