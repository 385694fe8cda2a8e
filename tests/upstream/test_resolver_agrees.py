"""fleet.upstream.resolver against pip itself, over the real corpus's Requires-Dist (sandbox/sim/metawheels.py: the
corpus's METADATA as wheels, what they require at every version their specifiers name): the same distributions
at the same versions, or both refuse. bench/bench_resolve.py measures it over every pin set, with timings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.upstream import resolver
from fleet.upstream.wheelhouse import Target, WheelhouseError
from sandbox.sim import metawheels
from sandbox.sim import wheels as simwheels

V = sys.version_info
HERE = Target(f"{V.major}.{V.minor}", full=f"{V.major}.{V.minor}.{V.micro}")  # this machine, where pip_says runs
SETS = ({"sglang": "0.5.9", "flashinfer-python": "0.6.3"}, {"sglang": "0.5.23", "flashinfer-python": "0.7.2"},
        {"sglang": "0.5.9", "flashinfer-python": "0.7.4"}, {"flashinfer-python": "0.7.4"})


@pytest.fixture(scope="module")
def house(tmp_path_factory, matrix) -> Path:
    folder = tmp_path_factory.mktemp("metawheels")
    metawheels.build(folder)
    return folder


def pip_says(pins: dict[str, str], house: Path) -> dict[str, str] | None:
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed",
                          "--quiet", "--report", "-", "--no-index", "--find-links", str(house),
                          *(f"{d}=={v}" for d, v in pins.items())], capture_output=True, text=True, timeout=600,
                         env={"PIP_CONFIG_FILE": "/dev/null", "PATH": "/usr/bin:/bin"})
    if res.returncode:
        return None
    return {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
            for i in json.loads(res.stdout)["install"]}


@pytest.mark.parametrize("pins", SETS, ids=lambda p: "+".join(f"{d}-{v}" for d, v in p.items()))
def test_fleet_resolves_as_pip_does_over_the_corpus(house, pins):
    try:
        ours: dict[str, str] | None = {w.name: str(w.version) for w in resolver.resolve(pins, HERE, house)}
    except WheelhouseError:
        ours = None
    theirs = pip_says(pins, house)
    assert ours == theirs
    if pins == {"sglang": "0.5.9", "flashinfer-python": "0.7.4"}:
        assert ours is None  # sglang 0.5.9 pins flashinfer-python 0.6.3: both refuse
    else:
        assert ours is not None and len(ours) > 10
        if "sglang" in pins:
            assert ours["torch"].endswith("+cu130")  # sglang pins torch exactly: the local build meets it and wins


def test_the_upgrade_case_with_the_simulated_releases_resolves(tmp_path, matrix):
    simwheels.build(tmp_path)  # both releases: torch 2.9.1+cu130 and 2.14.1+cu130 side by side
    got = {w.name: str(w.version) for w in resolver.resolve({"flashinfer-python": "0.6.3", "sglang": "0.5.9"},
                                                            Target("3.11", "x86_64", "2.36"), tmp_path)}
    assert got == {"sglang": "0.5.9", "flashinfer-python": "0.6.3", "torch": "2.9.1+cu130", "sglang-sim-core": "0.1.0"}
