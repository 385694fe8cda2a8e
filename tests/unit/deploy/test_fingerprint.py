"""fleet.deploy.fingerprint's known-good.json under concurrent learners: separate processes (a rolling deploy in
two terminals, two CI jobs) each add their entry; none is lost."""

from __future__ import annotations

import json
import multiprocessing

from fleet.deploy import fingerprint
from fleet.host.facts import Gpu, HostFacts, Package
from fleet.playbook import Playbook

BOOK = Playbook.model_validate({"name": "glm5", "model": {"path": "/m"}, "flags": {"tp-size": 8},
                                "ladder": [{"name": "no-fusion"}]})
LEARNERS, EACH = 8, 4


def _facts(driver: str) -> HostFacts:
    gpu = Gpu(index=0, name="NVIDIA RTX PRO 6000 Blackwell Workstation Edition", compute_cap="12.0", sm=120)
    return HostFacts(host="h", address="10.0.0.1", gpus=[gpu], interconnect="pcie", driver_version=driver,
                     packages={"sglang": Package(version="0.5.9")})


def _learner(n: int, start: multiprocessing.synchronize.Barrier) -> None:
    start.wait()
    for i in range(EACH):
        fingerprint.learn(BOOK, _facts(f"580.{n}.{i}"), BOOK.rung("no-fusion"), f"h{n}", f"r{n}.{i}", [])


def test_parallel_learners_in_separate_processes_keep_every_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))
    forked = multiprocessing.get_context("fork")
    for _ in range(3):
        start = forked.Barrier(LEARNERS)
        procs = [forked.Process(target=_learner, args=(n, start)) for n in range(LEARNERS)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0] * LEARNERS
        entries = json.loads(fingerprint.path().read_text())["entries"]
        assert len(entries) == LEARNERS * EACH
        assert {e["release"] for e in entries.values()} == {f"r{n}.{i}" for n in range(LEARNERS) for i in range(EACH)}
        fingerprint.path().unlink()


def test_the_sglang_versions_hosts_reported_are_ordered_as_pep_440_and_normalised(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))
    reported = ["0.5.10", "0.5.9.post1", "0.5.9", "0.5.10rc1", "0.5.9-post2", "0.5.9\x1b[2J", "latest", 7]
    fingerprint.path().parent.mkdir(parents=True)
    fingerprint.path().write_text(json.dumps({"entries": {
        str(i): {"fingerprint": {"packages": {"sglang": v}}} for i, v in enumerate(reported)}}))
    assert fingerprint.sglang_versions() == ["0.5.9", "0.5.9.post1", "0.5.9.post2", "0.5.10rc1", "0.5.10"]
