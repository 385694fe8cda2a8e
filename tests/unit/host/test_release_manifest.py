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


def test_a_release_says_when_it_is_one_node_of_a_multi_node_deployment():
    Release, node_of = releases.Release, releases.node_of

    def rel(nodes, playbook="glm5-2node"):
        return Release(id="r", host="n1", playbook=playbook, playbook_sha256="x", created="t",
                       config={"nodes": nodes} if nodes is not None else {})

    assert node_of(rel({"count": 2, "rank": 1, "hosts": ["n0", "n1"]})) == \
        "node 1 of 2 of the multi-node deployment of glm5-2node (n0, n1)"
    assert node_of(None) is None and node_of(rel(None)) is None and node_of(rel({"count": 1})) is None
    # what a host sent is printed only in a name's shape
    hostile = node_of(rel({"count": 2, "rank": "[red]x", "hosts": ["n0", "$(reboot)", 7]}, playbook="[b]x"))
    assert hostile == "node ? of 2 of the multi-node deployment of ? (n0)"
    assert node_of(rel({"count": True})) is None and node_of(rel("nodes")) is None


def test_a_canary_verdict_is_kept_and_one_of_another_type_is_damage():
    data = {**_written(), "canary": {"decision": "fail"}}
    assert releases.Release.from_json(releases._manifest(data, data["id"])).canary == {"decision": "fail"}
    with pytest.raises(ValueError, match="canary is a list"):
        releases._manifest({**data, "canary": ["fail"]}, data["id"])
