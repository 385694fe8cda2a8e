"""fleet.upstream.wheelhouse: which pins the controller's wheels cover, and the venv's name (which wheels a venv
needs: tests/unit/upstream/test_resolver.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_resolver import stack

from fleet.upstream import wheelhouse


@pytest.fixture
def house(tmp_path: Path) -> Path:
    """The resolver tests' stack, with a file named like a wheel that is none."""
    stack(tmp_path)
    (tmp_path / "not-a-wheel.whl").write_text("x")
    return tmp_path


def test_a_pin_is_covered_by_its_wheel_and_a_local_label_meets_its_release(house):
    assert wheelhouse.missing({"sglang": "0.5.9", "torch": "2.9.1"}, house) == []
    assert wheelhouse.missing({"sglang": "0.5.10", "flashinfer_python": "0.6.3"}, house) == [
        ("sglang", f"no wheel of sglang 0.5.10 in the wheelhouse {house} (fleet installs only from it: "
                   f"pip download --no-deps sglang==0.5.10 -d {house}, or FLEET_WHEELHOUSE=a folder with it)")]


def test_a_wheelhouse_that_does_not_exist_covers_nothing(tmp_path):
    assert [d for d, _ in wheelhouse.missing({"sglang": "0.5.9"}, tmp_path / "absent")] == ["sglang"]


def test_the_venv_name_depends_on_the_pins_and_python_not_on_how_they_are_written():
    a = wheelhouse.digest({"sglang": "0.5.9", "flashinfer_python": "0.6.3"}, "3.11")
    assert a == wheelhouse.digest({"flashinfer-python": "0.6.3", "sglang": "0.5.9"}, "3.11")
    assert a != wheelhouse.digest({"sglang": "0.5.9", "flashinfer_python": "0.6.3"}, "3.12")
    assert a != wheelhouse.digest({"sglang": "0.5.23", "flashinfer_python": "0.6.3"}, "3.11")
    assert len(a) == 16 and int(a, 16) >= 0
    # a wheel rebuilt under the same version is another venv
    pins = {"sglang": "0.5.9"}
    assert wheelhouse.digest(pins, "3.11", ["a" * 64]) != wheelhouse.digest(pins, "3.11", ["b" * 64])
    a, b = "a" * 64, "b" * 64
    assert wheelhouse.digest(pins, "3.11", [a, b]) == wheelhouse.digest(pins, "3.11", [b, a])
