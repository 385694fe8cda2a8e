"""The fault suite shares the integration tests' CLI and SSH helpers (tests/integration)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
