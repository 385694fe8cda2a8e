"""Log lines in sglang 0.5.9's format.

sglang: `[%(asctime)s%(prefix)s] %(message)s` with datefmt %Y-%m-%d %H:%M:%S, prefix " TP0" (or
" PP0 TP0", " DP0 TP0") in scheduler processes, on stderr. flashinfer:
`%(asctime)s - %(levelname)s - %(filename)s:%(lineno)d - flashinfer.jit: %(message)s`.
uvicorn: `INFO:     ...`.
"""

from __future__ import annotations

import logging
import sys

DATEFMT = "%Y-%m-%d %H:%M:%S"


def configure_logger(prefix: str = "", level: str = "info") -> None:
    """sglang.srt.utils.configure_logger: the root logger, on stderr, sglang's format."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            pass
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format=f"[%(asctime)s{prefix}] %(message)s",
        datefmt=DATEFMT,
        force=True,
    )


def flashinfer_logger() -> logging.Logger:
    logger = logging.getLogger("flashinfer.jit")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(
            logging.Formatter("%(asctime)s - %(levelname)s - %(filename)s:%(lineno)d - flashinfer.jit: %(message)s")
        )
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


def uvicorn(message: str) -> None:
    print(f"INFO:     {message}", file=sys.stderr, flush=True)


def uvicorn_error(message: str) -> None:
    print(f"ERROR:    {message}", file=sys.stderr, flush=True)
