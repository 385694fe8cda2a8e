"""The simulated stack as wheels (sandbox/sim/wheels.py): named and versioned like the real releases, their
Requires-Dist between sglang, flashinfer-python and torch the real wheels' (the upstream corpus), and built the
same byte for byte each time (the wheelhouse sends a host only what it lacks, by sha256)."""

from __future__ import annotations

import hashlib
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from fleet.upstream import corpus, pins
from sandbox.sim import wheels


def _meta(path: Path) -> tuple[dict[str, str], list[str]]:
    with zipfile.ZipFile(path) as zf:
        head = HeaderParser().parsestr(zf.read(next(n for n in zf.namelist() if n.endswith("/METADATA"))).decode())
    return {"name": head["Name"], "version": head["Version"]}, [str(r) for r in head.get_all("Requires-Dist") or []]


def test_each_pair_is_built_as_wheels_of_the_real_names_and_versions(tmp_path):
    names = sorted(p.name for p in wheels.build(tmp_path))
    assert names == ["flashinfer_python-0.6.3-py3-none-any.whl", "flashinfer_python-0.7.2-py3-none-any.whl",
                     "sglang-0.5.23-py3-none-any.whl", "sglang-0.5.9-py3-none-any.whl",
                     "sglang_sim_core-0.1.0-py3-none-any.whl", "torch-2.14.1+cu130-py3-none-any.whl",
                     "torch-2.9.1+cu130-py3-none-any.whl"]
    with zipfile.ZipFile(tmp_path / "sglang-0.5.23-py3-none-any.whl") as zf:
        assert b'__version__ = "0.5.23"' in zf.read("sglang/version.py")
        assert "sglang/srt/server_args_v0_5_9.json" in zf.namelist()  # the same simulator inside
        assert "SIMULATED" in zf.read("sglang-0.5.23.dist-info/METADATA").decode()


def test_the_pins_between_them_are_the_real_wheels_requires_dist(tmp_path):
    wheels.build(tmp_path)
    for sglang, flashinfer in wheels.PAIRS:
        _, reqs = _meta(tmp_path / f"sglang-{sglang}-py3-none-any.whl")
        real = [str(r) for r in pins.requirements(corpus.metadata("sglang", sglang) or "")
                if pins.canonical(r.name) in {"flashinfer-python", "torch"} and r.marker is None]
        assert reqs == [*real, "sglang-sim-core==0.1.0"] and len(real) == 2
        # the pins agree with each other as the real ones do: fleet's own check finds nothing
        metadata = {"sglang": "\n".join(f"Requires-Dist: {r}" for r in reqs)}
        torch = next(r.split("==")[1] for r in reqs if r.startswith("torch=="))
        assert pins.conflicts({"sglang": sglang, "flashinfer-python": flashinfer, "torch": torch}, metadata,
                              "3.11") == []


def test_two_builds_are_the_same_bytes(tmp_path):
    def digests(folder: Path) -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in wheels.build(folder)}

    assert digests(tmp_path / "a") == digests(tmp_path / "b")
