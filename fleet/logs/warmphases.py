"""What the journal watch expects of a start's phases when fleet placed caches for it (issue 49): the phases in
which the release compiles and tunes are expected short or skipped, and one that takes about as long as the
start that gave the caches is reported as the cache not taking there. Pure: values in, lines out.

The phases: jit_compile and autotune, and graph_capture, where flashinfer builds its attention modules silently
at the first forward (playbooks/phases/startup.yaml, the head comment). The HANG budgets stay the playbook's
(the cold ones) in every start: a cache that did not take costs the build it saves, and a start killed for it
would be retried cold and build it all the same. A start with no cache placed expects nothing (Expect.cold)."""

from __future__ import annotations

from dataclasses import dataclass, field

SHORT_WHEN_WARM = ("jit_compile", "autotune", "graph_capture")
TOOK = 0.7  # a warm phase at this share of the cold one's time or more: the cache did not take there
MIN_COLD_S = 5.0  # a cold phase shorter than this says nothing of a cache (noise, the capture itself)


@dataclass(frozen=True)
class PhaseTimes:
    """Seconds a start spent in each phase it went through, in order (the phases a cache entry's giver took)."""

    spent: tuple[tuple[str, float], ...] = ()

    def of(self, phase: str) -> float | None:
        return next((s for p, s in self.spent if p == phase), None)

    def to_json(self) -> list[list[str | float]]:
        """[phase, seconds] pairs in the order gone through (a JSON object's keys may come back sorted)."""
        return [[p, round(s, 3)] for p, s in self.spent]

    @classmethod
    def from_json(cls, doc: object) -> PhaseTimes:
        """What a stored entry's meta says; nothing of a pair that is garbage, nothing for an entry from before."""
        if not isinstance(doc, list):
            return cls()
        pairs = [d for d in doc if isinstance(d, list) and len(d) == 2 and isinstance(d[0], str)]
        return cls(tuple((p, float(s)) for p, s in pairs
                         if isinstance(s, int | float) and not isinstance(s, bool) and s >= 0))


@dataclass
class PhaseClock:
    """The phases one watched start went through and their seconds, filled by the watch (fleet.logs.journal)."""

    spent: list[tuple[str, float]] = field(default_factory=list)

    def left(self, phase: str, seconds: float) -> None:
        self.spent.append((phase, seconds))

    def times(self) -> PhaseTimes:
        return PhaseTimes(tuple(self.spent))


NONE = PhaseTimes()  # no phases known (an entry stored before they were)


@dataclass(frozen=True)
class Expect:
    """What a start expects of its phases: `warm` when caches were placed (`giver`: the host they came from,
    `cold`: the phases of the start that gave them, when the store recorded them)."""

    warm: bool = False
    giver: str = ""
    cold: PhaseTimes = NONE

    @classmethod
    def cold_start(cls) -> Expect:
        return cls()

    @classmethod
    def placed(cls, giver: str, cold: PhaseTimes) -> Expect:
        return cls(True, giver, cold)

    def _short(self, phase: str) -> bool:
        return self.warm and phase in SHORT_WHEN_WARM

    def expected_s(self, phase: str) -> float | None:
        """The most a warm phase is expected to take (below TOOK of the cold one's); None: nothing expected."""
        cold = self.cold.of(phase)
        if not self._short(phase) or cold is None or cold < MIN_COLD_S:
            return None
        return TOOK * cold

    def opening(self) -> str | None:
        """Said before the start: what a warm start expects."""
        if not self.warm:
            return None
        return f"warm start: {', '.join(SHORT_WHEN_WARM)} expected short or skipped (caches of {self.giver} placed)"

    def entering(self, phase: str) -> str | None:
        """Said when the start enters `phase`."""
        if not self._short(phase):
            return None
        cold = self.cold.of(phase)
        was = f"; the cold start of {self.giver} took {cold:.0f}s" if cold is not None else ""
        return f"warm start: {phase} expected short{was}"

    def leaving(self, phase: str, spent: float) -> str | None:
        """Said when the start leaves `phase` after `spent` seconds: what the cache did there."""
        if not self._short(phase):
            return None
        cold, most = self.cold.of(phase), self.expected_s(phase)
        if most is not None and cold is not None and spent >= most:
            return (f"warm start: the cache did not take in {phase}: {spent:.1f}s, as long as the cold start's "
                    f"{cold:.1f}s (something the cache key does not hold differs, or the release rebuilt)")
        was = f" (cold: {cold:.1f}s)" if cold is not None else ""
        return f"warm start: {phase} took {spent:.1f}s{was}"

    def skipped(self, seen: PhaseTimes) -> list[str]:
        """Said when the start is ready: the expected phases the cold start went through and this one did not."""
        if not self.warm:
            return []
        return [f"warm start: {p} skipped (the cold start took {s:.1f}s in it)" for p, s in self.cold.spent
                if p in SHORT_WHEN_WARM and seen.of(p) is None]

    def standing_note(self, phase: str) -> str:
        """What a Live line adds for a phase expected short: the most it is expected to take."""
        most = self.expected_s(phase)
        return "" if most is None else f" (warm: expected under {most:.0f}s)"
