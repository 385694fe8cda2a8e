"""Unit tests: the fakes beside this file (fakesession) importable from every folder below it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
