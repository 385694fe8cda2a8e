"""fleet.upstream.wheelhouse: which pins the controller's wheels cover, and the venv's name (which wheels a venv
needs: tests/unit/upstream/test_resolver.py)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from fleet.upstream import wheelhouse


def wheel(folder: Path, name: str, version: str, *requires: str, extras: tuple[str, ...] = ()) -> Path:
    stem = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{stem}-py3-none-any.whl"
    meta = [f"Name: {name}", f"Version: {version}", *(f"Provides-Extra: {e}" for e in extras),
            *(f"Requires-Dist: {r}" for r in requires)]
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{stem}.dist-info/METADATA", "Metadata-Version: 2.1\n" + "\n".join(meta) + "\n\n")
    return path


@pytest.fixture
def house(tmp_path: Path) -> Path:
    """Two releases of a stack, with Requires-Dist as the real wheels write them (sglang 0.5.23's METADATA)."""
    wheel(tmp_path, "sglang", "0.5.9", "flashinfer_python==0.6.3", "torch==2.9.1", 'pytest; extra == "test"')
    wheel(tmp_path, "sglang", "0.5.23", "flashinfer_python[cu13]==0.7.2", "torch==2.14.1",
          'torchcodec==0.17.0; sys_platform != "linux"')
    wheel(tmp_path, "flashinfer-python", "0.6.3", "torch")
    wheel(tmp_path, "flashinfer-python", "0.7.2", "torch", 'cuda-tile>=1.4; extra == "cu13"', extras=("cu13",))
    wheel(tmp_path, "torch", "2.9.1+cu130")
    wheel(tmp_path, "torch", "2.14.1+cu130")
    wheel(tmp_path, "cuda-tile", "1.4.0")
    (tmp_path / "README.txt").write_text("not a wheel")
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
