"""A canary window: the canary hosts (the new release) against baseline hosts (the old), on the same traffic.

In order: the hardware of every canary and candidate baseline host read, the baselines chosen among those of the
canary's hardware (`alike`: its GPUs, their count and SMs, the interconnect; others only where none is), the
numerics gate (the first canary's greedy answers against the first baseline's, before any traffic), then looks
of `window` seconds: fleet's own load at one fixed rate on every canary and baseline host at once, the samples
judged (fleet.deploy.judge) after each look, until a final verdict; a hardware fault new on a canary host since
the window began (fleet.deploy.hardware.new_faults) fails it at that look. What the hosts are asked goes through
`Traffic` (sessions in production, a fake in tests).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from fleet import parallel
from fleet.deploy import fingerprint, hardware, judge, numerics
from fleet.deploy.hostrun import host_run, lock_only
from fleet.errors import FleetError
from fleet.host import canaryrun
from fleet.host.facts import HostFacts
from fleet.host.releases import ReleaseStore, release_id
from fleet.host.render import key_file
from fleet.host.session import HostSession
from fleet.inventory import Host
from fleet.playbook import Playbook
from fleet.policy import Canary
from fleet.progress import ticking
from fleet.ssh.connect import ConnectOptions


class Traffic(Protocol):
    def answers(self, host: Host, prompts: Sequence[str], tokens: int) -> list[numerics.Answer]: ...

    def load(self, host: Host, seconds: float, seed: int) -> list[judge.Sample]: ...

    def probe(self, host: Host) -> HostFacts: ...

    def record(self, host: Host, verdict: judge.Verdict) -> str | None: ...


@dataclass(frozen=True)
class CanaryResult:
    """How the canary window ended: the gate before traffic, the judge's last verdict, hardware faults."""

    numerics: numerics.NumericsVerdict
    verdict: judge.Verdict | None = None  # None: the gate failed, no traffic was sent
    faults: tuple[str, ...] = ()  # "host: fault" new on a canary host during the window
    recorded: judge.Recorded | None = None
    baselines: tuple[str, ...] = ()  # the baseline hosts judged against

    @property
    def ok(self) -> bool:
        return self.numerics.ok and not self.faults and self.verdict is not None and self.verdict.promotes

    def to_json(self) -> dict[str, object]:
        """What --json says of the window (the samples are in the recording, `save`)."""
        return {"ok": self.ok, "reasons": self.reasons(),
                "numerics": {"ok": self.numerics.ok, "compared": self.numerics.compared,
                             "parted": self.numerics.reasons()},
                "verdict": self.verdict.to_json() if self.verdict else None, "faults": list(self.faults),
                "baselines": list(self.baselines)}

    def save(self, folder: Path, release: str) -> Path | None:
        """The recording (policy, samples, verdict) as `folder/<release>.json`, for `judge.replay`; None when no
        traffic was sent."""
        if self.recorded is None:
            return None
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{release_id(release)}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.recorded.to_json()))
        tmp.replace(path)
        return path

    def reasons(self) -> list[str]:
        if not self.numerics.ok:
            return ["the new release answers otherwise: " + "; ".join(self.numerics.reasons()[:3])
                    if self.numerics.parted else "no greedy answers to compare"]
        out = [f"hardware fault on a canary: {f}" for f in self.faults]
        if self.verdict is not None and not self.verdict.promotes:
            out.append(f"judge: {self.verdict.summary()}")
            out += self.verdict.reasons()[:4]
        return out


def _hardware(facts: HostFacts) -> tuple[object, ...]:
    fp = fingerprint.of(facts)
    return fp.gpu, fp.count, fp.sm, fp.interconnect


def alike(canaries: Sequence[Host], candidates: Sequence[Host], facts: dict[str, HostFacts],
          per_canary: int = 1) -> list[Host]:
    """Up to `per_canary` baselines for each canary among `candidates` (in their order) of the canary's hardware
    (a canary's latency is judged against the same GPUs' only); where none is, the first candidates, as many."""
    chosen: list[Host] = []
    for c in canaries:
        same = [h for h in candidates if h not in chosen and _hardware(facts[h.name]) == _hardware(facts[c.name])]
        chosen += same[:per_canary]
    return chosen or list(candidates[:per_canary * len(canaries)])


def run(canaries: Sequence[Host], candidates: Sequence[Host], policy: Canary, traffic: Traffic, rate: float,
        say: Callable[[str], None] = lambda _: None, per_canary: int = 1) -> CanaryResult:
    """The canary window (see the module's docstring) against baselines chosen among `candidates` (`alike`);
    `rate`: requests a second on each host."""
    hosts = [*canaries, *candidates]
    facts = {h.name: f for h, f in zip(hosts, _probe_all(hosts, traffic), strict=True)}
    baselines = alike(canaries, candidates, facts, per_canary)
    if any(_hardware(facts[b.name]) != _hardware(facts[canaries[0].name]) for b in baselines):
        say(f"no baseline host has {canaries[0].name}'s hardware: judged against {baselines[0].name} all the same")
    new = traffic.answers(canaries[0], policy.prompts, policy.answer_tokens)
    old = traffic.answers(baselines[0], policy.prompts, policy.answer_tokens)
    gate = numerics.compare(old, new, policy.match_tokens, policy.max_mismatch)
    names = tuple(b.name for b in baselines)
    if not gate.ok:
        return CanaryResult(gate, baselines=names)
    say(f"numerics: {gate.compared} greedy answers alike; traffic at {rate:g}/s on "
        f"{len(canaries)} canary and {len(baselines)} baseline hosts ({', '.join(names)})")
    before = {h.name: facts[h.name] for h in canaries}
    hosts, new_ones = [*canaries, *baselines], {h.name for h in canaries}  # the window's hosts
    base: list[judge.Sample] = []
    mine: list[judge.Sample] = []
    verdict, faults = None, []
    for look in range(1, policy.looks + 1):
        start = (look - 1) * policy.window
        seconds = min(policy.window, policy.max_window - start)

        def load(h: Host, seconds: float = seconds, seed: int = look) -> list[judge.Sample]:
            return traffic.load(h, seconds, seed)  # the same seed everywhere: the same requests in the same order

        with ticking(say, f"canary look {look} of {policy.looks}, traffic", seconds):  # never a quiet window
            outcomes = parallel.run_all(hosts, load, ends=f"the traffic of the canary window ends within {seconds:g}s; "
                                        "the canary then stays on the new release, not judged")
        for h, o in zip(hosts, outcomes, strict=True):
            samples = [replace(x, at=x.at + start) for x in (o.value or [])] if o.ok else []
            (mine if h.name in new_ones else base).extend(samples)
        faults = [f"{h.name}: {f}" for h in canaries for f in hardware.new_faults(before[h.name], traffic.probe(h))]
        verdict = judge.judge(base, mine, policy, start + seconds)
        say(f"look {look}: {verdict.summary()} ({len(mine)} canary and {len(base)} baseline requests)")
        if faults or verdict.final:
            break
    assert verdict is not None  # looks >= 1
    for h in canaries:  # in the new release, before any put-back: `inv history` shows it
        if (where := traffic.record(h, verdict)) is not None:
            say(f"{h.name}: the verdict is recorded in release {where}")
    return CanaryResult(gate, verdict, tuple(faults), judge.Recorded(policy, tuple(base), tuple(mine), verdict),
                        names)


def _probe_all(hosts: Sequence[Host], traffic: Traffic) -> list[HostFacts]:
    """Each host's facts; one that could not be read is a host of unknown hardware (no GPUs)."""
    return [o.value if o.ok and o.value is not None else HostFacts(host=h.name, address=h.address, ok=False)
            for h, o in zip(hosts, parallel.run_all(hosts, traffic.probe), strict=True)]


class SessionTraffic:
    """The canary's traffic through each host's session (fleet/host/programs/canary_load.py)."""

    def __init__(self, book: Playbook, opts: ConnectOptions, rate: float) -> None:
        self.book, self.opts, self.rate = book, opts, rate

    def _where(self, host: Host) -> tuple[str, int, str | None]:
        unit = self.book.serve.unit or host.unit
        return self.book.serve.venv or host.venv, self.book.serve.port, key_file(unit) if self.book.serve.api_key \
            else None

    def _lines(self, host: Host, command: str, timeout: float) -> list[str]:
        session = HostSession.open(host, self.opts)
        try:
            return canaryrun.lines(session, command, timeout)
        finally:
            session.close()

    def answers(self, host: Host, prompts: Sequence[str], tokens: int) -> list[numerics.Answer]:
        venv, port, key = self._where(host)
        rows = self._lines(host, canaryrun.answers_command(venv, port, key, tokens, list(prompts)), 660)
        return [a for row in rows if (a := numerics.Answer.from_json(json.loads(row))) is not None]

    def load(self, host: Host, seconds: float, seed: int) -> list[judge.Sample]:
        venv, port, key = self._where(host)
        rows = self._lines(host, canaryrun.load_command(venv, port, key, seconds, self.rate, seed), seconds + 360)
        return [judge.Sample.from_json(json.loads(row)) for row in rows]

    def probe(self, host: Host) -> HostFacts:
        session = HostSession.open(host, self.opts)
        try:
            return session.probe()
        finally:
            session.close()

    def record(self, host: Host, verdict: judge.Verdict) -> str | None:
        """The verdict in the host's current release (the canary's), under the host's lock; its id, or None
        when there is none (never a reason to fail the window)."""
        try:
            with host_run(host, self.opts, "canary verdict", unit=None, recover=lock_only(lambda _: None)) as run:
                store = ReleaseStore.on(run.session)
                current = store.current()
                if current is None:
                    return None
                current.judged(verdict.to_json())
                store.save(current)
                return current.id
        except FleetError:
            return None
