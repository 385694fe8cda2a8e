"""fleet.upstream.wheelhouse for the host it installs on: wheels chosen by the host's tags, missing ones
downloaded by pip for the host's Python and platform from a local file:// index (never the network), and one line
when they cannot be had."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest

from fleet.upstream import wheelhouse
from fleet.upstream.wheelhouse import MissingWheel, Target

HOST = Target("3.11", "x86_64", "2.36")


def wheel(folder: Path, name: str, version: str, *requires: str, tag: str = "py3-none-any") -> Path:
    """A wheel pip accepts (METADATA and WHEEL); a platform tag (cp311-cp311-manylinux_2_28_x86_64) gets a
    compiled-looking file of 200 kB."""
    stem = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{stem}-{tag}.whl"
    meta = [f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{stem}.dist-info/METADATA", "Metadata-Version: 2.1\n" + "\n".join(meta) + "\n\n")
        zf.writestr(f"{stem}.dist-info/WHEEL", f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: "
                                               f"{'true' if tag.startswith('py3') else 'false'}\nTag: {tag}\n\n")
        if not tag.startswith("py3"):
            zf.writestr(f"{name.replace('-', '_')}/_core.so", b"\0" * 200_000)
    return path


def index(remote: Path, root: Path) -> str:
    """A PEP 503 simple index of the wheels in `remote`, as files, and its file:// URL."""
    for w in remote.glob("*.whl"):
        project = root / w.name.split("-")[0].replace("_", "-").lower()
        project.mkdir(parents=True, exist_ok=True)
        shutil.copy(w, project / w.name)
    for project in root.iterdir():
        links = "".join(f'<a href="{w.name}">{w.name}</a>\n' for w in sorted(project.glob("*.whl")))
        (project / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    (root / "index.html").write_text("".join(f'<a href="{p.name}/">{p.name}</a>\n' for p in root.iterdir()))
    return root.as_uri()


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    """What the index has: sglang (pure), its torch for cp311 and for cp312 on x86_64, and for aarch64."""
    src = tmp_path / "remote"
    src.mkdir()
    wheel(src, "sglang", "0.5.9", "torch==2.9.1")
    for tag in ("cp311-cp311-manylinux_2_28_x86_64", "cp312-cp312-manylinux_2_28_x86_64",
                "cp311-cp311-manylinux_2_28_aarch64"):
        wheel(src, "torch", "2.9.1", tag=tag)
    return src


def test_a_host_installs_only_wheels_of_its_python_and_platform():
    assert HOST.fits("torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert HOST.fits("sglang-0.5.9-py3-none-any.whl") and HOST.fits("x-1-cp39-abi3-manylinux2014_x86_64.whl")
    assert not HOST.fits("torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl")
    assert not HOST.fits("torch-2.9.1-cp311-cp311-manylinux_2_28_aarch64.whl")
    assert not HOST.fits("torch-2.9.1-cp311-cp311-manylinux_2_38_x86_64.whl")  # newer glibc than the host's
    assert not HOST.fits("not a wheel name.whl")
    assert Target("3.11", "aarch64").platforms()[0] == "manylinux_2_17_aarch64"  # no glibc said: the oldest
    assert str(HOST) == "CPython 3.11 on x86_64 (glibc 2.36)"
    assert len(Target("3.11", "x86_64", "2.999").platforms()) == 60 - 17 + 1 + 2  # a host's glibc is its word


def test_closure_for_a_host_passes_over_wheels_it_cannot_install(remote, tmp_path):
    with pytest.raises(MissingWheel, match=r"sglang 0.5.9 requires torch==2.9.1; .* for CPython 3.11 on aarch64"):
        wheelhouse.closure({"sglang": "0.5.9"}, "3.11", remote, target=Target("3.11", "aarch64", "2.17"))
    chosen = wheelhouse.closure({"sglang": "0.5.9"}, "3.11", remote, target=HOST)
    assert [w.filename for w in chosen] == ["sglang-0.5.9-py3-none-any.whl",
                                            "torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl"]


def test_fill_downloads_what_the_host_needs_from_a_file_index_saying_each(remote, tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", index(remote, tmp_path / "simple"))
    house = tmp_path / "house"
    said: list[str] = []
    got = wheelhouse.fill({"sglang": "0.5.9"}, HOST, house, said.append)
    assert got == ["sglang-0.5.9-py3-none-any.whl", "torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl"]
    assert sorted(p.name for p in house.iterdir()) == got  # no other platform's torch, no temporary folder left
    assert said[0] == (f"downloading sglang==0.5.9 for CPython 3.11 on x86_64 (glibc 2.36) from "
                       f"{os.environ['PIP_INDEX_URL']} into {house}")
    assert said[1].startswith("downloading torch==2.9.1 for CPython 3.11")
    assert wheelhouse.fill({"sglang": "0.5.9"}, HOST, house, said.append) == [] and len(said) == 2  # all there


def test_a_wheel_the_index_lacks_is_one_line_naming_it_the_host_and_how_to_provide_it(remote, tmp_path, monkeypatch):
    (remote / "torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl").unlink()
    monkeypatch.setenv("PIP_INDEX_URL", index(remote, tmp_path / "simple"))
    house = tmp_path / "house"
    house.mkdir()
    shutil.copy(remote / "sglang-0.5.9-py3-none-any.whl", house)  # what it has stays; only torch is asked for
    with pytest.raises(MissingWheel) as caught:
        wheelhouse.fill({"sglang": "0.5.9"}, HOST, house)
    text = str(caught.value)
    assert "\n" not in text and caught.value.requirement == "torch==2.9.1"
    assert text.startswith(f"sglang 0.5.9 requires torch==2.9.1; no wheel in the wheelhouse {house} has it for "
                           "CPython 3.11 on x86_64 (glibc 2.36); pip download torch==2.9.1 from file://")
    assert "--python-version 3.11 --implementation cp --abi cp311" in text and "FLEET_WHEELHOUSE" in text
    assert [p.name for p in house.iterdir()] == ["sglang-0.5.9-py3-none-any.whl"]  # what it got stays


def test_the_sandbox_guard_asks_no_index_but_a_local_one(remote, tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_SANDBOX_ONLY", "1")
    monkeypatch.setenv("PIP_INDEX_URL", "https://pypi.org/simple")
    assert "FLEET_SANDBOX_ONLY=1 allows no index but a file:// one" in (wheelhouse.fetch_refused() or "")
    said: list[str] = []
    with pytest.raises(MissingWheel, match="FLEET_SANDBOX_ONLY=1 allows no index"):
        wheelhouse.fill({"sglang": "0.5.9"}, HOST, tmp_path / "house", said.append)
    assert said == []  # nothing was asked of the network
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "simple").as_uri())
    assert wheelhouse.fetch_refused() is None


def test_the_unpacked_size_is_what_the_zip_directories_say(remote):
    wheels = wheelhouse.scan(remote)
    assert wheelhouse.unpacked_size(wheels) > 3 * 200_000
    (remote / "broken-1-py3-none-any.whl").write_bytes(b"not a zip")
    assert wheelhouse.unpacked_size(wheelhouse.scan(remote)) == wheelhouse.unpacked_size(wheels)
