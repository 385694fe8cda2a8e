"""`python -m flashinfer` / `flashinfer` CLI (SIMULATED flashinfer 0.6.3): show-config, clear-cache."""

from __future__ import annotations

import argparse
import sys


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="flashinfer", description="FlashInfer CLI")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("show-config", help="Show FlashInfer configuration")
    sub.add_parser("clear-cache", help="Clear the JIT cache of this version and architecture")
    sub.add_parser("clear-cubin", help="Clear the downloaded cubins")
    args = parser.parse_args(argv)
    if args.command == "clear-cache":
        from flashinfer.jit import clear_cache_dir
        from flashinfer.jit import env as jit_env

        clear_cache_dir()
        print(f"Cleared JIT cache: {jit_env.FLASHINFER_JIT_DIR}")
        return 0
    if args.command == "clear-cubin":
        print("No cubins to clear.")
        return 0
    if args.command == "show-config":
        import flashinfer
        from flashinfer.jit import env as jit_env

        print("=== Version Info ===")
        print(f"FlashInfer version: {flashinfer.__version__}")
        print("=== Environment Variables ===")
        print(f"FLASHINFER_CACHE_DIR: {jit_env.FLASHINFER_CACHE_DIR}")
        print(f"FLASHINFER_WORKSPACE_DIR: {jit_env.FLASHINFER_WORKSPACE_DIR}")
        print(f"FLASHINFER_JIT_DIR: {jit_env.FLASHINFER_JIT_DIR}")
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(cli())
