"""`inv recover` stops, names and starts again the unit the host's current release serves from: a playbook's
serve.unit wins over the inventory's `unit` for the deploy, and recover stopped `sglang` (a unit fleet never wrote
there) while `sglang-b` held the GPUs (issue 46, finding 8; the fifteenth newcomer's hour)."""

from __future__ import annotations

import json
from dataclasses import replace

from test_recover_points import HOST, Machine, Session, no_pause

from fleet.host.releases import CURRENT, RELEASES, Release
from fleet.host.render import env_file, unit_file
from fleet.multihost import recover as rec
from fleet.ssh.connect import ConnectOptions

SERVED = Release(id="20261206T073921Z-9727", host="h1", playbook="llama-port", playbook_sha256="0" * 64,
                 created="now", status="ok", rung="plain",
                 files={unit_file("sglang-b"): {"sha256": "0" * 64, "mode": "0o644"},
                        env_file("sglang-b"): {"sha256": "1" * 64, "mode": "0o600"}})


class Deployed(Machine):
    def answer(self, session, command):
        if command.startswith(f"readlink {CURRENT}"):
            return 0, f"releases/{SERVED.id}\n"
        return super().answer(session, command)


class Served(Session):
    def as_host(self, host):  # the stand-in keeps its machine: the same session for the host as served
        self.host = host
        return self


def test_recover_stops_and_starts_the_unit_the_current_release_serves_from():
    m = Deployed(refuse=False)
    m.files[f"{RELEASES}/{SERVED.id}/manifest.json"] = json.dumps(SERVED.to_json()).encode()
    result = rec.recover(HOST, ConnectOptions(), None, wait_s=0.05, sleep=no_pause, sessions=lambda h, o: Served(m))
    stops = [s for s in m.steps if s.startswith("systemctl stop")]
    starts = [s for s in m.steps if s.startswith("systemctl start")]
    assert stops and all("sglang-b" in s for s in stops), m.steps
    assert starts and all("sglang-b" in s for s in starts), m.steps
    assert any("stopped sglang-b" in s for s in result.steps) or result.ok, result


def test_no_current_release_keeps_the_inventorys_unit():
    m = Machine(refuse=False)
    rec.recover(replace(HOST), ConnectOptions(), None, wait_s=0.05, sleep=no_pause, sessions=lambda h, o: Session(m))
    assert any(s.startswith("systemctl stop sglang") and "sglang-b" not in s for s in m.steps), m.steps
