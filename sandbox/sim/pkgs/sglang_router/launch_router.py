"""SIMULATED sglang_router.launch_router: `python -m sglang_router.launch_router --worker-urls URL ...`."""

from __future__ import annotations

import sys

from sglang_router.router_args import parse


def launch_router(argv: list[str]) -> int:
    from sglang_router.server import serve

    return serve(parse(argv))


if __name__ == "__main__":
    sys.exit(launch_router(sys.argv[1:]))
