"""A Ctrl-C while `inv`/`fleet` loads (invoke and fleet's modules take about 0.3 s to import) ends it as a
task's own Ctrl-C does, `interrupted` and exit 130, not as a traceback. Imported first by fleet.cli; only the
console scripts are guarded (an import from pytest or another program changes nothing), and
fleet.cli.program.main puts Python's own handler back before any task runs."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType


def _quit(signum: int, frame: FrameType | None) -> None:
    os.write(2, b"interrupted\n")
    os._exit(130)  # nothing was done yet: no file, no host, no buffered output to lose


def guard() -> None:
    script = getattr(sys.modules.get("__main__"), "__file__", None) or ""
    if Path(script).name in ("inv", "fleet"):
        signal.signal(signal.SIGINT, _quit)


guard()
