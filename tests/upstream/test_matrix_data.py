"""The matrix as data agrees with the real wheels: each sglang release pins the flashinfer-python it says."""

from __future__ import annotations

import re
from pathlib import Path

from fleet.upstream import corpus as upstream


def test_each_sglang_pins_the_flashinfer_the_matrix_names(matrix):
    for sg, pin in matrix.sglang.items():
        rel = upstream.require("sglang", sg)
        (meta,) = Path(rel.root).glob("*.dist-info/METADATA")
        pins = re.findall(r"^Requires-Dist: flashinfer[_-]python(?:\[[^\]]*\])?==([^\s;]+)", meta.read_text(), re.M)
        assert pins == [pin], (sg, pins)


def test_every_release_was_checked_against_the_registry(matrix):
    for dist, version in matrix.releases():
        rel = upstream.require(dist, version)
        assert len(rel.sha256) == 64 and rel.wheel.startswith(dist.replace("-", "_")) and rel.files > 100
