"""Release manifests, `current` and playbook names as a hostile host sends them: validated before the
controller puts them in a path; a playbook a host names resolves only inside playbooks/."""

from __future__ import annotations

import json

import pytest
import yaml
from hostkit import HostileFleet, answer

from fleet.deploy import rollback
from fleet.deploy.inputs import load_playbook
from fleet.errors import FleetError
from fleet.host.releases import ReleaseDamaged, ReleaseStore
from fleet.ssh.connect import ConnectOptions, open_connection

RID = "20261201T101010Z-ab12"
SHA = "0" * 64


def manifest(**changes) -> dict:
    base = {"id": RID, "host": "h", "playbook": "glm5-nvfp4", "playbook_sha256": SHA, "created": "2026-12-01",
            "status": "ok", "rung": "no-fusion", "config": {}, "facts": {}, "attempts": [],
            "files": {"/etc/systemd/system/sglang.service": {"sha256": SHA, "mode": "0o644"},
                      "before:/etc/fleet/sglang.env": {"sha256": SHA}}}
    return {**base, **changes}


def _store(tmp_path, data: bytes, current: bytes = b""):
    fleet = HostileFleet(tmp_path, {"h": (answer(b""), [
        ("manifest.json", answer(data)), ("readlink", answer(current)),
        ("ls -1", answer(f"{RID}\n../../etc\n".encode()))])})
    host = fleet.hosts()[0]
    conn = open_connection(host, ConnectOptions())
    return fleet, conn, ReleaseStore(conn, host)


def test_a_manifest_naming_a_local_path_as_its_playbook_is_never_read(tmp_path):
    evil = tmp_path / "evil.yaml"
    evil.write_text(yaml.safe_dump({"name": "evil", "model": {"path": "/models/x"}, "ladder": [{"name": "base"}]}))
    assert load_playbook(str(evil))[0].name == "evil"  # what a host could make the controller parse before
    path = "../" * 12 + str(evil)[1:].removesuffix(".yaml")
    for named in (str(evil), path):
        fleet, conn, store = _store(tmp_path, json.dumps(manifest(playbook=named)).encode())
        try:
            with pytest.raises(FleetError) as caught:
                rollback.recorded_playbook(store, fleet.hosts()[0], RID)
        finally:
            conn.close()
            fleet.__exit__()
        assert "is not a release manifest fleet wrote" in str(caught.value)


def test_a_sound_manifest_loads(tmp_path):
    fleet, conn, store = _store(tmp_path, json.dumps(manifest()).encode())
    try:
        assert store.load(RID).playbook == "glm5-nvfp4"
        assert rollback.recorded_playbook(store, fleet.hosts()[0], RID).name == "glm5-nvfp4"
    finally:
        conn.close()
        fleet.__exit__()


@pytest.mark.parametrize("data,said", [
    (json.dumps(manifest(id="../../../etc")).encode(), "not a release id"),
    (json.dumps(manifest(id="20261201T101010Z-ffff")).encode(), "is not its folder's"),
    (json.dumps(manifest(files={"/etc/shadow": {"sha256": SHA, "mode": "0o644"}})).encode(), "not one fleet installs"),
    (json.dumps(manifest(files={"/etc/fleet/../shadow": {"sha256": SHA}})).encode(), "absolute path, normalised"),
    (json.dumps(manifest(files={"/etc/fleet/x.env": {"sha256": "abc", "mode": "0o644"}})).encode(), "sha256"),
    (json.dumps(manifest(config=["not", "a", "dict"])).encode(), "config is a list"),
    (json.dumps(manifest(playbook="Bad Name")).encode(), "lower-case letters"),
    (json.dumps([1, 2]).encode(), "not a JSON object"),
    (b"\xff\xfe garbage", "not a release manifest"),
    (b"[" * 200_000, "not a release manifest"),
], ids=["id-path", "id-other", "file-outside", "file-dotdot", "bad-sha", "config-type", "playbook-name",
        "not-object", "binary", "deep-nesting"])
def test_a_damaged_or_hostile_manifest_is_refused_and_passed_over(tmp_path, data, said):
    fleet, conn, store = _store(tmp_path, data)
    try:
        with pytest.raises(ReleaseDamaged) as caught:
            store.load(RID)
        assert said in str(caught.value) and str(caught.value).startswith("h: ")
        assert store.list() == []  # neither it nor the `../../etc` folder is a release
    finally:
        conn.close()
        fleet.__exit__()


def test_current_pointing_outside_the_releases_is_refused(tmp_path):
    fleet, conn, store = _store(tmp_path, json.dumps(manifest()).encode(), current=b"releases/../../../etc\n")
    try:
        with pytest.raises(ReleaseDamaged, match="points at 'releases/../../../etc'"):
            store.current_id()
    finally:
        conn.close()
        fleet.__exit__()
