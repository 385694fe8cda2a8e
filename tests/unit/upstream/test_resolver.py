"""fleet.upstream.resolver: pip's own resolver over the wheelhouse alone, for one host's Python and platform: it
backtracks where a walk of Requires-Dist took the first wheel, follows markers for the host (not the controller)
and says in one line what is missing or cannot go together."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from fleet.upstream import resolver
from fleet.upstream.wheelhouse import MissingWheel, Target, WheelhouseError

HOST = Target("3.11", "x86_64", "2.36")


def wheel(folder: Path, name: str, version: str, *requires: str, extras: tuple[str, ...] = (),
          python: str | None = None) -> Path:
    stem = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{stem}-py3-none-any.whl"
    meta = [f"Name: {name}", f"Version: {version}", *(f"Provides-Extra: {e}" for e in extras),
            *([f"Requires-Python: {python}"] if python else []), *(f"Requires-Dist: {r}" for r in requires)]
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{stem}.dist-info/METADATA", "Metadata-Version: 2.1\n" + "\n".join(meta) + "\n\n")
        zf.writestr(f"{stem}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n\n")
    return path


@pytest.fixture
def house(tmp_path: Path) -> Path:
    return stack(tmp_path)


def stack(tmp_path: Path) -> Path:
    """Two releases of the stack as an upgraded wheelhouse holds them, Requires-Dist as the real wheels write them
    (sglang 0.5.9's and 0.5.23's METADATA: torch pinned exactly, flashinfer-python asking for any torch)."""
    wheel(tmp_path, "sglang", "0.5.9", "flashinfer_python==0.6.3", "torch==2.9.1", 'pytest; extra == "test"')
    wheel(tmp_path, "sglang", "0.5.23", "flashinfer_python[cu13]==0.7.2", "torch==2.14.1",
          'torchcodec==0.17.0; sys_platform != "linux"')
    wheel(tmp_path, "flashinfer-python", "0.6.3", "torch")
    wheel(tmp_path, "flashinfer-python", "0.7.2", "torch", 'cuda-tile>=1.4; extra == "cu13"', extras=("cu13",))
    wheel(tmp_path, "torch", "2.9.1+cu130")
    wheel(tmp_path, "torch", "2.14.1+cu130")
    wheel(tmp_path, "cuda-tile", "1.4.0")
    (tmp_path / "README.txt").write_text("not a wheel")
    return tmp_path


def chosen(pins: dict[str, str], house: Path, target: Target = HOST) -> dict[str, str]:
    return {w.name: str(w.version) for w in resolver.resolve(pins, target, house)}


def test_the_upgrade_case_backtracks_to_the_torch_sglang_pins_as_pip_does(house):
    # issue 45: flashinfer-python asks for any torch; the walk took the newest (2.14.1) and refused sglang's ==2.9.1
    pins = {"flashinfer-python": "0.6.3", "sglang": "0.5.9"}
    assert chosen(pins, house) == {"sglang": "0.5.9", "flashinfer-python": "0.6.3", "torch": "2.9.1+cu130"}
    wheels = resolver.resolve(pins, HOST, house)
    assert [w.path for w in wheels] == [house / "flashinfer_python-0.6.3-py3-none-any.whl",
                                        house / "sglang-0.5.9-py3-none-any.whl",
                                        house / "torch-2.9.1+cu130-py3-none-any.whl"]


def test_markers_and_extras_are_the_hosts(house):
    # torchcodec's marker excludes Linux; [cu13] brings cuda-tile; the local label +cu130 meets ==2.14.1
    assert chosen({"sglang": "0.5.23"}, house) == {"sglang": "0.5.23", "flashinfer-python": "0.7.2",
                                                   "torch": "2.14.1+cu130", "cuda-tile": "1.4.0"}
    wheel(house, "torch", "2.9.1+cu130", 'arm-helper==1.0; platform_machine == "aarch64"')
    wheel(house, "arm-helper", "1.0")
    # the controller is x86_64: the marker is judged for the host pip resolves for, not for pip's own machine
    assert "arm-helper" in chosen({"sglang": "0.5.9"}, house, Target("3.11", "aarch64", "2.36"))
    assert "arm-helper" not in chosen({"sglang": "0.5.9"}, house)


def test_markers_and_requires_python_read_the_hosts_full_python_version(house):
    # the review: every 3.11 host was resolved as 3.11.0 (python_full_version, and pip's --python-version)
    wheel(house, "torch", "2.9.1+cu130", 'micro-helper==1.0; python_full_version >= "3.11.4"')
    wheel(house, "micro-helper", "1.0")
    wheel(house, "late", "1.0", python=">=3.11.4")
    newer, older = Target("3.11", "x86_64", "2.36", "3.11.7"), Target("3.11", "x86_64", "2.36", "3.11.2")
    assert "micro-helper" in chosen({"sglang": "0.5.9"}, house, newer)
    assert "micro-helper" not in chosen({"sglang": "0.5.9"}, house, older)
    assert chosen({"late": "1.0"}, house, newer) == {"late": "1.0"}
    with pytest.raises(WheelhouseError):
        resolver.resolve({"late": "1.0"}, older, house)
    assert newer.full_version == "3.11.7" and HOST.full_version == "3.11.0"  # no host asked: pip's X.Y reading


def test_a_requirement_no_wheel_meets_is_missing_and_named(house):
    (house / "cuda_tile-1.4.0-py3-none-any.whl").unlink()
    with pytest.raises(MissingWheel, match=r"^flashinfer-python requires cuda-tile>=1.4; no wheel in the") as exc:
        resolver.resolve({"sglang": "0.5.23"}, HOST, house)
    assert exc.value.requirement == "cuda-tile>=1.4"


def test_pins_that_cannot_go_together_say_why_in_one_line(house):
    with pytest.raises(WheelhouseError) as exc:
        resolver.resolve({"torch": "2.14.1", "sglang": "0.5.9"}, HOST, house)
    assert str(exc.value) == ("pip finds no set of them that goes together: sglang 0.5.9 requires torch==2.9.1")
    assert "\n" not in str(exc.value)


def test_the_controllers_pip_settings_never_steer_it(house, monkeypatch, tmp_path):
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("PIP_NO_DEPS", "1")
    assert chosen({"sglang": "0.5.9"}, house)["torch"] == "2.9.1+cu130"


def test_a_report_naming_a_file_outside_the_wheelhouse_is_refused(house, tmp_path):
    report = '{"install": [{"download_info": {"url": "file:///etc/x-1-py3-none-any.whl"}, ' \
             '"metadata": {"name": "x", "version": "1"}}]}'
    with pytest.raises(WheelhouseError, match="not in the wheelhouse"):
        resolver.parse_report(report, house)
