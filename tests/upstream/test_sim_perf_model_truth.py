"""The crash regions of the sandbox profiles' perf_model against the real wheels: each entry's message is the
release's own words (its evidence texts are in the files it names), and the SMs it spares match
playbooks/upstream/backend-gates.yaml where both speak of the same flag value."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from fleet.deploy import searchspace
from fleet.upstream import corpus as upstream

REPO = Path(__file__).resolve().parents[2]
PROFILES = sorted((REPO / "sandbox" / "profiles").glob("*/profile.yaml"))


def _perfmodel():
    path = REPO / "sandbox/sim/pkgs/sglang_sim_core/perfmodel.py"
    spec = importlib.util.spec_from_file_location("sim_perfmodel", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    sys.path.insert(0, str(REPO / "sandbox/sim/pkgs"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "sandbox/sim/pkgs"))
    return module


_READ = _perfmodel().read
CRASHES = [(p.parent.name, c) for p in PROFILES for c in (_READ(p.read_text()) or {}).get("crashes", [])]


@pytest.mark.parametrize("profile, crash", CRASHES, ids=[f"{p}:{c['flag']}={c['value']}" for p, c in CRASHES])
def test_each_crash_message_is_the_releases_own(profile, crash, matrix):
    assert crash["evidence"], f"{profile}: {crash['flag']}={crash['value']} cites nothing"
    for ev in crash["evidence"]:
        package, rest = ev["file"].split("/", 1)
        text = (upstream.require(ev["dist"], ev["version"]).package(package) / rest).read_text(encoding="utf-8")
        assert ev["text"] in text, f"{ev['dist']} {ev['version']} {ev['file']}: {ev['text']!r} not found"
    assert any(crash["message"].startswith(ev["text"].split("{")[0].strip()) or ev["text"] in crash["message"]
               for ev in crash["evidence"])
    gate = next((g for g in searchspace.backend_gates() if (g.flag, g.value) == (crash["flag"], crash["value"])), None)
    if gate is not None:
        assert crash["sm_majors"] == gate.sm_majors
