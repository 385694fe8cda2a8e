"""The journal follower (fleet.logs.journal) without a host: a scripted source of journal text and a clock, so the
phase budgets, the unit's state and a stop are seen to fire whether lines arrive or not."""

from __future__ import annotations

import threading
from pathlib import Path

from fleet.logs import journal, warmphases
from fleet.logs.watch import LogWatcher
from fleet.outcomes import Outcome
from fleet.playbook import Budgets
from fleet.progress import Live

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Script:
    """Reads hand out `chunks` one per read, then "" (silence) forever, or None (the stream ended); each read
    moves the clock on by `step` seconds, as a real timed read would."""

    def __init__(self, chunks: list[str], clock: Clock, step: float = 0.5, ends: bool = False):
        self.chunks, self.clock, self.step, self.ends = list(chunks), clock, step, ends
        self.reads, self.closed = 0, False

    def read(self, timeout: float) -> str | None:
        self.reads += 1
        self.clock.now += self.step
        if self.chunks:
            return self.chunks.pop(0)
        if self.reads > 10_000:
            raise AssertionError("the watch never ended")
        return None if self.ends else ""

    def close(self) -> None:
        self.closed = True


def _watch(chunks, budgets=None, state=None, stop=None, ends=False, said=None):
    clock = Clock()
    source = Script(chunks, clock, ends=ends)
    startup = journal.Startup(budgets or Budgets(), (said if said is not None else []).append, clock)
    verdict = journal.watch_startup(source, startup, state or (lambda: {"ActiveState": "activating"}), stop)
    assert source.closed
    return verdict, startup


def test_a_silent_server_reaches_hang_on_its_phase_budget():
    verdict, startup = _watch(["Load weight begin. avail mem=90.1 GB\n"], Budgets(start=60, weight_load=30))
    assert verdict[0] == Outcome.HANG
    assert verdict[1].startswith("no progress for 30s in phase weight_load; last line: Load weight begin")
    assert startup.phase == "weight_load"


def test_a_server_that_prints_nothing_at_all_reaches_hang_in_the_start_phase():
    verdict, _ = _watch([], Budgets(start=5))
    assert verdict == (Outcome.HANG, "no progress for 5s in phase start; last line: ")


def test_each_phase_gets_its_own_budget_and_progress_is_said():
    said: list[str] = []
    verdict, startup = _watch(["Load weight begin. avail mem=90.1 GB\n", "Load weight end. type=X\n"],
                              Budgets(start=3, weight_load=600), said=said)
    # weight loading then "Load weight end" (a start marker) does not move the phase back
    assert verdict[0] == Outcome.HANG and "phase weight_load" in verdict[1]
    assert any(m.startswith("phase weight_load (after ") for m in said)


def test_ready_ends_the_watch():
    verdict, _ = _watch(["Load weight begin.\n", "The server is fired up and ready to roll!\n"])
    assert verdict[0] == Outcome.READY and "fired up" in verdict[1]


def test_a_fatal_line_ends_the_watch_with_its_class_and_evidence():
    text = (LOGS / "sglang_kv_pool_too_small.log").read_text()
    verdict, _ = _watch([text])
    assert verdict[0] not in (Outcome.READY, Outcome.HANG, Outcome.EXITED)
    assert verdict[1] and len(verdict[1]) <= 300


def test_the_unit_ending_without_a_classified_line_is_exited():
    verdict, _ = _watch(["Load weight begin.\n"], state=lambda: {"ActiveState": "failed", "Result": "exit-code",
                                                                 "ExecMainStatus": "1"})
    assert verdict[0] == Outcome.EXITED
    assert verdict[1] == "the server exited (exit-code, status 1); last line: Load weight begin."


def test_a_stop_from_another_node_ends_the_watch_even_in_silence():
    stop = threading.Event()
    stop.set()
    verdict, _ = _watch([], stop=stop)
    assert verdict == (Outcome.STOPPED, "another node of the deployment failed")


def test_the_stream_ending_is_exited():
    verdict, _ = _watch(["Load weight begin.\n"], ends=True)
    assert verdict == (Outcome.EXITED, "the journal stream ended")


def test_a_long_follow_keeps_little_of_the_stream_and_misses_no_line():
    lines: list[str] = []

    def keep(line: str) -> str:
        lines.append(line)
        return line

    watcher = LogWatcher(on_line=keep, raise_on_fatal=False)
    clock = Clock()
    chunks = [f"line {i} " + "x" * 30 + "\n" for i in range(50)]
    source = Script(chunks, clock, ends=True)
    assert journal.follow(source, watcher, lambda: None, keep_chars=100) is None
    assert lines == [c[:-1] for c in chunks]


def test_journal_commands_start_after_the_cursor_or_at_the_end():
    assert journal.command("sglang", "s=abc;i=1") == \
        "journalctl -u sglang -o cat --no-pager --all --after-cursor='s=abc;i=1' -f"
    assert journal.command("sglang", "") == "journalctl -u sglang -o cat --no-pager --all -n 0 -f"
    assert journal.command("a b", output="short-iso", since="-10m", follow=False) == \
        "journalctl -u 'a b' -o short-iso --no-pager --all --since=-10m"
    # the last 50 of the span: journalctl's own -n counts from --since (tests/integration/test_operator_views.py)
    assert journal.command("sglang", output="short-iso", since="2026-12-05 20:00", follow=False, lines=50) == \
        "journalctl -u sglang -o short-iso --no-pager --all --since='2026-12-05 20:00' -n 0 -q >/dev/null && " \
        "journalctl -u sglang -o short-iso --no-pager --all --since='2026-12-05 20:00' | tail -n 50"  # its refusal
    assert journal.command("sglang", output="short-iso", follow=False, lines=50) == \
        "journalctl -u sglang -o short-iso --no-pager --all -n 50"


def test_a_long_phase_says_where_it_stands_each_second_and_each_phase_its_budget():
    """Issue 46 finding 5: a 3-minute JIT or autotune phase said nothing after its first line, like a hang. Now a
    Live line (drawn in place on a terminal, dropped elsewhere) names the phase, its time against its budget and
    the last line; each phase's own line names its budget."""
    from fleet.progress import Live

    said: list[str] = []
    verdict, _ = _watch(["Load weight begin. avail mem=90.1 GB\n"], Budgets(start=60, weight_load=30), said=said)
    assert verdict[0] == Outcome.HANG
    assert "phase weight_load (after 0.5s in start; budget 30s)" in said
    live = [m for m in said if isinstance(m, Live)]
    assert len(live) >= 25 and all(m.startswith("phase weight_load: ") for m in live[1:])
    assert live[-1].endswith("s of 30s budget; last line: Load weight begin. avail mem=90.1 GB")
    seconds = [int(m.split(": ")[1].split("s of")[0]) for m in live[1:]]
    assert seconds == sorted(seconds) and seconds[-1] in (29, 30)  # once a second, up to the budget
    assert not any(isinstance(m, Live) for m in said if m.startswith("phase weight_load ("))


def _watch_expecting(chunks, expect, step=0.5):
    clock, said = Clock(), []
    seen = warmphases.PhaseClock()
    source = Script(chunks, clock, step=step)
    startup = journal.Startup(Budgets(), said.append, clock, expect=expect, seen=seen)
    verdict = journal.watch_startup(source, startup, lambda: {"ActiveState": "activating"})
    return verdict, said, seen


START = ["Init torch distributed begin.\n", "Load weight begin. avail mem=90.1 GB\n",
         "Capture cuda graph begin. This can take up to several minutes. avail mem=8.10 GB\n"]
SILENCE = [""] * 30  # 15 s of a silent build in the capture (0.6.3 builds its attention modules there)
END = ["Capture cuda graph end. Time elapsed: 1.00 s. mem usage=2.10 GB. avail mem=6.00 GB.\n",
       "The server is fired up and ready to roll!\n"]


def test_a_cold_start_records_its_phases_and_expects_nothing():
    verdict, said, seen = _watch_expecting(START + SILENCE + END, journal.COLD)
    assert verdict[0] == Outcome.READY and not [m for m in said if "warm start" in m]
    assert [p for p, _ in seen.spent] == ["start", "weight_load", "graph_capture"]
    assert seen.times().of("graph_capture") == 15.5


def test_a_warm_start_that_builds_as_long_as_the_cold_one_is_reported_in_its_phase():
    cold = warmphases.PhaseTimes((("start", 0.5), ("jit_compile", 20.0), ("graph_capture", 15.5)))
    expect = warmphases.Expect.placed("sbx0", cold)
    _, said, _ = _watch_expecting(START + SILENCE + END, expect)
    assert said[0].startswith("warm start: jit_compile, autotune, graph_capture expected short")
    assert "warm start: graph_capture expected short; the cold start of sbx0 took 16s" in said
    assert any(m.startswith("warm start: the cache did not take in graph_capture: 15.5s") for m in said), said
    assert "warm start: jit_compile skipped (the cold start took 20.0s in it)" in said
    _, said, _ = _watch_expecting(START + END, expect)  # the modules were used: capture is short
    assert "warm start: graph_capture took 0.5s (cold: 15.5s)" in said
    assert not [m for m in said if "did not take" in m]


def test_the_live_line_shows_the_count_a_release_prints_and_a_warm_phases_expectation():
    ninja = ["[1/3] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -c a.cu -o a.cuda.o\n"]
    _, said, _ = _watch_expecting(START[:2] + ninja + SILENCE[:6], journal.COLD)
    live = [m for m in said if isinstance(m, Live) and m.startswith("phase jit_compile")]
    assert live and "; ninja 1/3; last line: [1/3]" in live[-1], said
    cold = warmphases.PhaseTimes((("graph_capture", 100.0),))
    _, said, _ = _watch_expecting(START + SILENCE[:6], warmphases.Expect.placed("sbx0", cold))
    live = [m for m in said if isinstance(m, Live) and m.startswith("phase graph_capture")]
    assert live and "budget (warm: expected under 70s); last line" in live[-1], said


def test_a_journal_that_ended_without_its_status_on_a_live_link_ends_the_watch_as_the_stream_did():
    """journal.JournalEnded (journalctl killed by a signal, the connection up) is no lost link for a deploy's watch:
    the stream ended, as before stop 52's newcomer made an end without a status the link lost."""
    class Ends(Script):
        def read(self, timeout: float) -> str | None:
            raise journal.JournalEnded("h: journalctl ended without its exit status within 2s while the connection "
                                       "stayed up (killed by a signal?)")

    clock = Clock()
    source = Ends([], clock)
    startup = journal.Startup(Budgets(), [].append, clock)
    verdict = journal.watch_startup(source, startup, lambda: {"ActiveState": "activating"})
    assert source.closed
    assert verdict[0] == Outcome.EXITED and verdict[1].startswith("the journal stream ended: h: journalctl ended")
