"""fleet.multihost.canary: the window's order (numerics before traffic, hardware read around it, looks until a final
verdict) with a fake Traffic that plays the simulator's regressions (tests/unit/judge_traffic.py)."""

from __future__ import annotations

import random
from pathlib import Path

from judge_traffic import side

from fleet.deploy.judge import Decision
from fleet.deploy.numerics import Answer
from fleet.host.facts import Gpu, HostFacts
from fleet.host.gpuhealth import GpuHealth, KernelLog, XidEvent
from fleet.inventory import Host
from fleet.multihost import canary
from fleet.policy import Canary

XID79 = "[  812.10] NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus."
PROMPTS = ["2+2=", "rivers"]


def facts(*events: XidEvent, gpu: str = "NVIDIA H100 80GB HBM3") -> HostFacts:
    gpus = [Gpu(index=0, name=gpu, sm=90, pci_bus_id="00000000:01:00.0", health=GpuHealth(recovery_action="none"))]
    return HostFacts(host="h", address="a", gpus=gpus, kernel_log=KernelLog(source="dmesg", events=list(events)))


class FakeTraffic:
    """Hosts named new-* serve the new release: `slower` and `differ` as the simulator plays them; `xid_after`
    probes of a new host, a hardware Xid appears there."""

    def __init__(self, slower: float = 0.0, differ: bool = False, xid_after: int | None = None,
                 gpus: dict[str, str] | None = None) -> None:
        self.slower, self.differ, self.xid_after = slower, differ, xid_after
        self.gpus = gpus or {}  # host: its GPU model, where not an H100
        self.loads: list[tuple[str, float, int]] = []
        self.recorded: list[tuple[str, Decision]] = []
        self.probes = 0

    def answers(self, host, prompts, tokens):
        other = self.differ and host.name.startswith("new")
        return [Answer(p, (1, 2, 3, 4, 9 if other and p != "2+2=" else 5)) for p in prompts]

    def load(self, host, seconds, seed):
        self.loads.append((host.name, seconds, seed))
        rng = random.Random(f"{host.name}/{seed}")
        slower = self.slower if host.name.startswith("new") else 0.0
        return side(rng, 1.0, seconds, slower=slower)

    def record(self, host, verdict):
        self.recorded.append((host.name, verdict.decision))
        return f"rel-{host.name}"

    def probe(self, host):
        self.probes += 1
        if self.xid_after is not None and host.name.startswith("new") and self.probes > self.xid_after:
            return facts(XidEvent(pci="0000:01:00", code=79, count=1, last=XID79, gpu_index=0))
        return facts(**({"gpu": self.gpus[host.name]} if host.name in self.gpus else {}))


def host(name: str, i: int) -> Host:
    return Host(name=name, address=f"10.0.0.{i}", port=None, user=None, become=False, identity_file=None,
                known_hosts=None, ssh_config=None, proxy_jump=None, venv="/opt/venv", unit="sglang", groups=(),
                source=Path("inventory.yaml"))


CANARIES = [host("new-1", 1)]
BASELINES = [host("old-1", 2), host("old-2", 3)]
POLICY = Canary(prompts=PROMPTS, tail=0.95)  # p99 needs more requests than these fakes send


def test_a_release_that_answers_otherwise_fails_before_any_traffic():
    traffic = FakeTraffic(differ=True)
    result = canary.run(CANARIES, BASELINES, POLICY, traffic, rate=1.0)
    assert not result.ok and result.verdict is None and traffic.loads == [] and traffic.recorded == []
    assert result.reasons() == ["the new release answers otherwise: 'rivers': the answers part at token 4 "
                                "(old 5 tokens, new 5)"]


def test_a_slower_release_fails_the_judge_at_an_early_look_on_every_hosts_same_load():
    traffic = FakeTraffic(slower=0.3)
    result = canary.run(CANARIES, BASELINES, POLICY, traffic, rate=1.0, per_canary=2)
    assert not result.ok and result.verdict is not None and result.verdict.decision == Decision.FAIL
    assert result.verdict.look < POLICY.looks
    looks = {seed for _, _, seed in traffic.loads}
    assert all(sorted(n for n, _, s in traffic.loads if s == k) == ["new-1", "old-1", "old-2"] for k in looks)
    assert result.reasons()[0].startswith("judge: fail:")
    assert result.recorded is not None and len(result.recorded.base) == 2 * len(result.recorded.canary)
    assert traffic.recorded == [("new-1", Decision.FAIL)]  # in the canary's release, for `inv history`


def test_an_identical_release_passes_after_the_whole_window():
    traffic = FakeTraffic()
    result = canary.run(CANARIES, BASELINES, POLICY, traffic, rate=1.0)
    assert result.ok and result.verdict is not None and result.verdict.seconds == POLICY.max_window
    assert max(s.at for s in result.recorded.canary) <= POLICY.max_window  # the looks' samples follow each other


def test_a_hardware_xid_on_a_canary_during_the_window_fails_it_at_that_look():
    traffic = FakeTraffic(xid_after=3)  # the reads before the window are clean, the first look's finds Xid 79
    result = canary.run(CANARIES, BASELINES, POLICY, traffic, rate=1.0)
    assert not result.ok and result.verdict is not None and result.verdict.look == 1
    assert result.faults and result.faults[0].startswith("new-1: Xid 79")
    assert result.reasons()[0].startswith("hardware fault on a canary: new-1: Xid 79")


def test_the_baseline_is_a_host_of_the_canarys_hardware_where_the_fleet_has_one():
    # the later batches' first host has other GPUs: the canary is judged against the next, of its own
    traffic = FakeTraffic(gpus={"old-1": "NVIDIA B200"})
    said: list[str] = []
    result = canary.run(CANARIES, BASELINES, POLICY, traffic, rate=1.0, say=said.append)
    assert result.baselines == ("old-2",) and result.to_json()["baselines"] == ["old-2"]
    assert sorted({n for n, _, _ in traffic.loads}) == ["new-1", "old-2"]
    assert not any(m.startswith("no baseline host") for m in said)


def test_a_canary_whose_hardware_no_baseline_has_is_judged_against_the_first_and_says_so():
    traffic = FakeTraffic(gpus={"new-1": "NVIDIA B200"})
    said: list[str] = []
    result = canary.run(CANARIES, BASELINES, POLICY, traffic, rate=1.0, say=said.append)
    assert result.baselines == ("old-1",)
    assert "no baseline host has new-1's hardware: judged against old-1 all the same" in said


def test_where_the_window_stands_is_said_while_its_traffic_runs():
    """Issue 46, finding 5 (the eighteenth newcomer's hour): from `traffic at 10/s ...` to `look 1: ...` a log got
    no line for the whole look (120 s by default, looks up to 600 s), where every long step says where it stands."""
    from ticking import Said

    said = Said()

    class Slow(FakeTraffic):
        def load(self, host, seconds, seed):
            assert said.ticked.wait(10), said  # where the look stands was said while its traffic ran
            return super().load(host, seconds, seed)

    canary.run(CANARIES, BASELINES[:1], POLICY, Slow(), rate=1.0, say=said)
    live = [m for m in said if type(m).__name__ == "Live"]
    assert live and str(live[0]).startswith(f"phase canary look 1 of {POLICY.looks}, traffic: "), live
