"""Unit tests: the fakes beside this file (fakesession) importable from every folder below it."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A folder every user may pass through (0755, as /home is), unlike tmp_path's 0700 parents: where a test
    run as root makes a server's user's home for a program that works as that user."""
    made = Path(tempfile.mkdtemp(prefix="fleet-open-"))
    made.chmod(0o755)
    yield made
    shutil.rmtree(made, ignore_errors=True)
