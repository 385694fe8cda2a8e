"""`inv probe --json` of every recorded probe output, pinned: the JSON parse() gave before it was rebuilt to
make HostFacts once (issue 44) is kept in tests/fixtures/probe-json, and must stay exactly the same.

Inputs: the real probe output of an H200 host (tests/fixtures/gpu-health) and the output the script prints on
a host of each shipped hardware profile (sandbox/profiles, assembled as the profile tests do). To accept a
change of facts on purpose, rerun with FLEET_RECORD_PROBE_JSON=1 and review the diff of the JSON files."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from fleet.host import probe

REPO = Path(__file__).resolve().parents[3]
EXPECTED = REPO / "tests/fixtures/probe-json"
PROFILES = REPO / "sandbox/profiles"


def _assemble(profile: Path) -> str:
    spec = importlib.util.spec_from_file_location("probe_profiles_for_golden",
                                                  REPO / "tests/unit/host/test_probe_profiles.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.assemble(profile)


def _output(name: str) -> str:
    if name == "h200-580-recorded":
        return (REPO / "tests/fixtures/gpu-health/probe_output_h200_580.txt").read_text()
    return _assemble(PROFILES / name.removeprefix("profile-"))


CASES = ["h200-580-recorded"] + [f"profile-{p.name}" for p in sorted(PROFILES.iterdir()) if p.is_dir()]


def test_every_profile_and_recorded_output_has_its_json():
    assert sorted(p.stem for p in EXPECTED.glob("*.json")) == sorted(CASES)


@pytest.mark.parametrize("name", CASES)
def test_probe_json_is_what_it_was(name):
    got = probe.parse(_output(name), name, "10.0.0.1").model_dump_json(indent=2) + "\n"
    path = EXPECTED / f"{name}.json"
    if os.environ.get("FLEET_RECORD_PROBE_JSON") == "1":
        path.write_text(got)
    assert got == path.read_text()
