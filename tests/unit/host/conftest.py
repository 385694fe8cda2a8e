"""Fixtures of the host-side programs' tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def top() -> Iterator[Path]:
    """A folder of root's others may reach, as /home is (pytest's tmp_path is root's alone: 0700 above it)."""
    made = Path(tempfile.mkdtemp(prefix="fleet-owner-"))
    made.chmod(0o755)
    try:
        yield made
    finally:
        shutil.rmtree(made)
