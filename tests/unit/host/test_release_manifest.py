"""A release manifest as fleet writes it passes the checks a manifest from a host gets (fleet.host.releases):
its own files (unit, env, key, launcher and their before-copies), modes as oct() writes them, its id."""

from __future__ import annotations

import json

import pytest

from fleet.host import releases
from fleet.host.render import LAUNCHER, env_file, key_file, unit_file
from fleet.outcomes import ReleaseStatus


def _written() -> dict:
    rel = releases.Release(id=releases.new_id(), host="gpu-node-1", playbook="glm5-nvfp4", playbook_sha256="0" * 64,
                           created=releases.now(), status=ReleaseStatus.OK, rung="no-fusion", config={"rung": "x"},
                           attempts=[{"rung": "x", "outcome": "READY"}], bench={"result": {"ok": True}})
    for path, mode in ((unit_file("sglang"), 0o644), (env_file("sglang"), 0o600), (LAUNCHER, 0o755),
                       (unit_file("sglang-router"), 0o644)):
        rel.files[path] = {"sha256": "a" * 64, "mode": oct(mode)}
    rel.files[f"before:{env_file('sglang')}"] = {"sha256": "b" * 64}
    rel.files[key_file("sglang")] = {"sha256": "c" * 64, "mode": oct(0o600)}
    return json.loads(json.dumps(rel.to_json()))  # as it comes back from the host


def test_what_fleet_writes_is_what_it_accepts():
    data = _written()
    assert releases.Release.from_json(releases._manifest(data, data["id"])).to_json() == data


@pytest.mark.parametrize("rid", ["..", ".", "../x", "a/b", "-x", "", "x" * 65, "a\nb"])
def test_a_release_id_is_never_a_path(rid):
    with pytest.raises(ValueError, match="not a release id"):
        releases.release_id(rid)
