"""`python -m flashinfer` / `flashinfer` CLI (SIMULATED flashinfer 0.6.3): show-config, clear-cache."""

from __future__ import annotations

import argparse
import os
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
        print("✅ Cache cleared successfully.")
        return 0
    if args.command == "clear-cubin":
        print("✅ Cubin cleared successfully.")
        return 0
    if args.command == "show-config":
        import flashinfer
        from flashinfer.jit import env as jit_env

        # the headings and names of flashinfer 0.6.3's __main__.py show_config_cmd (a subset of its variables)
        print("=== Version Info ===")
        print(f"FlashInfer version: {flashinfer.__version__}")
        print("")
        print("=== Environment Variables ===")
        print(f"FLASHINFER_CACHE_DIR: {jit_env.FLASHINFER_CACHE_DIR}")
        print(f"FLASHINFER_CUDA_ARCH_LIST: {os.environ.get('FLASHINFER_CUDA_ARCH_LIST', '')}")
        print("CUDA_HOME: ")
        print("NVCC found: No")
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(cli())
