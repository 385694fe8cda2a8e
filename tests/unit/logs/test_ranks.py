"""fleet.logs.ranks: the copies each tensor-parallel rank prints of one line, folded into one with a count; and
`inv logs`' --since and --lines as journalctl takes them (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.errors import InputError
from fleet.logs.follow import LogLine, check_lines, check_since, is_separator, split_line, split_time
from fleet.logs.ranks import Folded, RankFolder, rank_of

CRASH = (Path(__file__).resolve().parents[2] / "fixtures/logs/sglang_sm120_allreduce_fusion_crash.log").read_text()


def _line(text: str) -> LogLine:
    return LogLine("sbx0", "2026-03-02T11:41:43+0000", text, None)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_line_every_rank_prints_is_shown_once_with_its_ranks():
    """The recorded crash is TP0's; on TP 8 each rank prints it (the header names the rank, the rest is alike)."""
    said = next(line for line in CRASH.splitlines() if "Scheduler hit an exception" in line)
    assert rank_of(said) == "TP0"
    out: list[Folded] = []
    clock = Clock()
    folder = RankFolder(out.append, clock=clock)
    folder.add(_line("before: not a rank's line"))
    for rank in range(8):
        folder.add(_line(said.replace("TP0]", f"TP{rank}]").replace("11:41:43", f"11:41:4{3 + rank % 2}")))
    assert [f.count for f in out] == [1]  # held while the copies come
    clock.now += 0.6
    folder.expire()
    assert [(f.count, f.ranks[:2]) for f in out] == [(1, []), (8, ["TP0", "TP1"])]
    assert out[1].line.text == said


def test_a_traceback_line_every_rank_s_process_prints_is_shown_once():
    """The newcomer's second hour: the README tour's `inv logs --only fatal` showed the TMA RuntimeError 8 times.
    Only a log record's first line has sglang's rank header; the traceback under it (the recorded crash's
    `RuntimeError: ...`, line 17) has none, so each of the 8 ranks' copies came alone. Each rank is a process of
    its own, which the journal names (`python[342]`): the copies of one process each are folded."""
    error = next(line for line in CRASH.splitlines() if line.startswith("RuntimeError:"))
    assert rank_of(error) is None
    out: list[Folded] = []
    clock = Clock()
    folder = RankFolder(out.append, clock=clock)
    frame = "1       0x7c6dd0a58b16 tensorrt_llm::common::throwRuntimeError(char const*, int)"  # twice in each
    journal = [f"2026-03-02T11:41:43+0000 sbx0 python[{pid}]: {text}" for pid in range(342, 350)
               for text in (frame, error, frame)]
    for raw in journal + ["2026-03-02T11:41:43+0000 sbx0 python[342]: " + error]:  # 342 says it again: new
        when, process, text = split_line(raw)
        folder.add(LogLine("sbx0", when, text, None, process))
    # the next attempt's ranks (new processes) say it 12 s later on the host's clock, read in the same breath
    for pid in (400, 401):
        folder.add(LogLine("sbx0", "2026-03-02T11:41:55+0000", error, None, f"python[{pid}]"))
    clock.now += 0.6
    folder.expire()
    errors = [(f.count, f.ranks[:2]) for f in out if f.line.text == error]
    assert errors == [(8, ["pid 342", "pid 343"]), (1, ["pid 342"]), (2, ["pid 400", "pid 401"])], errors
    assert split_line("2026-12-05T02:56:32+0000 sbx0 python3[812]: ready") == (
        "2026-12-05T02:56:32+0000", "python3[812]", "ready")


def test_the_order_is_kept_and_a_rank_saying_it_again_is_a_new_line():
    out: list[Folded] = []
    folder = RankFolder(out.append, clock=Clock())
    for text in ("[11:40:12 TP0] Load weight begin.", "[11:40:12 TP1] Load weight begin.",
                 "[11:40:13 TP0] Load weight end.", "[11:40:13 TP1] Load weight end.",
                 "[11:40:14 TP0] Load weight end.", "a line of the launcher"):
        folder.add(_line(text))
    folder.flush()
    assert [(f.line.text.split("] ")[-1], f.count) for f in out] == [
        ("Load weight begin.", 2), ("Load weight end.", 2), ("Load weight end.", 1), ("a line of the launcher", 1)]


@pytest.mark.parametrize(("given", "journalctl"), [
    ("10m", "-10m"), ("2h", "-2h"), ("-30s", "-30s"), ("20:00", "20:00"), ("20:00:15", "20:00:15"),
    ("2026-12-05", "2026-12-05"), ("2026-12-05 20:00", "2026-12-05 20:00"), ("yesterday", "yesterday"),
    # journalctl's own spellings, refused before (each read by journalctl 252 on a sandbox host as given)
    ("10 min ago", "-10min"), ("2 hours ago", "-2hours"), ("1h ago", "-1h"), ("5 seconds ago", "-5seconds"),
    ("-2hours", "-2hours"), ("-1w", "-1w"), ("@1764968400", "@1764968400"), ("now", "now"),
    # as systemctl status prints a time, and journalctl's compound and fractional spans (read by journalctl 252 on
    # sandbox host sbx0 as given; refused before)
    ("Sun 2026-12-06 00:29:15 UTC", "Sun 2026-12-06 00:29:15 UTC"), ("00:29 UTC", "00:29 UTC"),
    ("2026-12-06 00:29:15.123456", "2026-12-06 00:29:15.123456"), ("sunday 2026-12-06", "sunday 2026-12-06"),
    ("1h 30min ago", "-1h30min"), ("-1h30min", "-1h30min"), ("1.5h ago", "-1.5h"), ("-1.5h", "-1.5h"),
    # a host not on UTC prints its own zone in systemctl status (the review of stop 52: refused, exit 2); systemd's
    # parse_timestamp takes the local zone's abbreviation and a tz database name, and the host's journalctl judges
    ("Sun 2026-12-06 01:29:15 CET", "Sun 2026-12-06 01:29:15 CET"), ("2026-12-06 01:29 EEST", "2026-12-06 01:29 EEST"),
    ("2026-12-06 01:29 Europe/Berlin", "2026-12-06 01:29 Europe/Berlin"),
])
def test_since_takes_what_journalctl_takes(given, journalctl):
    assert check_since(given) == journalctl


@pytest.mark.parametrize("given", ["20:00; rm -rf /", "8pm", "2026-12-05T25:00", "", "10 minutes", "25",
                                   "10 min ago; id", "ten min ago", "@", "-2 fortnights",
                                   "25:00", "20:61", "20:00:60", "2026-13-45", "2026-02-30 20:00", "2026-12-05 24:00",
                                   "Mon 2026-12-06", "Sun 20:00", "20:00.5", "25:00 UTC", "1.5.5h ago", "00:29 CET;id"])
def test_since_refuses_the_rest_in_one_line(given):
    with pytest.raises(InputError, match="--since"):
        check_since(given)


def test_lines_is_a_count():
    assert check_lines("50") == 50 and check_lines(None) is None
    for bad in ("-3", "ten", "5; id", "1000001"):  # 0 is a count: tail -n 0 -f (test_logs_lines_zero)
        with pytest.raises(InputError, match="--lines"):
            check_lines(bad)


def test_journalctls_mark_between_two_boots_is_no_line_of_the_unit():
    """A journal that spans a reboot (inv recover reboots) holds journalctl's `-- Boot <id> --`: no time, nothing
    to show or classify (inv logs printed it as a line without a time)."""
    assert is_separator("-- Boot d4b3908c65a845c3b9e5e606d56c96df --")
    assert not is_separator("2026-12-05T02:56:32+0000 sbx0 python3[812]: -- Boot d4b3908c65a845c3b9e5e606d56c96df --")
    assert split_time("2026-12-05T02:56:32+0000 sbx0 python3[812]: ready") == ("2026-12-05T02:56:32+0000", "ready")


def test_the_copies_are_named_as_ranks_or_processes():
    from fleet.cli.logs import _ranks

    assert _ranks([f"TP{i}" for i in range(8)]) == "TP0-TP7"
    assert _ranks([f"pid {p}" for p in (345, 342, 343, 344)]) == "pids 342-345"
    assert _ranks(["pid 342", "pid 400"]) == "pids 342 400"


def test_journalctls_no_entries_is_no_line_of_the_unit():
    """`inv logs --since` a time still ahead: journalctl prints `-- No entries --` (no time): not a log line
    (inv logs showed it as one, without a time); a unit's own line saying it still is."""
    assert is_separator("-- No entries --")
    assert not is_separator("2026-12-05T02:56:32+0000 sbx0 python3[812]: -- No entries --")


def test_the_ranks_copies_of_a_line_naming_their_own_object_address_are_folded():
    """A newcomer's `inv logs --only warning` on TP 8 (issue 46, 9, a new form): flashinfer's autotuner warns
    `Skipping tactic <...MoERunner object at 0x7c70ccce8350> 13, ...` from each rank's process, each with its own
    address (and its own milliseconds, which normalise drops): 192 lines, 8 of each, none folded."""
    warning = next(line for line in (Path(__file__).resolve().parents[2] / "fixtures/logs/"
                                     "sglang_startup_ready_sm120_warnings.log").read_text().splitlines()
                   if "Skipping tactic" in line)
    out: list[Folded] = []
    clock = Clock()
    folder = RankFolder(out.append, clock=clock)
    for n, pid in enumerate(range(428, 436)):
        raw = warning.replace("python3[5120]", f"python3[{pid}]").replace("0x7f0c2ce8a350", f"0x7c70ccce{8 + n}350")
        when, process, text = split_line(raw.replace(",317 -", f",{317 + 13 * n} -"))
        folder.add(LogLine("sbx0", when, text, None, process))
    clock.now += 0.6
    folder.expire()
    assert [(f.count, f.ranks[0], f.ranks[-1]) for f in out] == [(8, "pid 428", "pid 435")], out
    assert "object at 0x7c70ccce8350>" in out[0].line.text  # shown as the first copy wrote it


def _fold_journal(lines: list[tuple[int, str]]) -> list[Folded]:
    out: list[Folded] = []
    folder = RankFolder(out.append, clock=Clock())
    for pid, text in lines:
        folder.add(LogLine("sbx0", "2026-03-02T11:41:43+0000", text, None, f"python[{pid}]"))
    folder.flush()
    return out


def test_lines_that_say_their_rank_in_their_words_are_folded_with_the_ranks_listed():
    """Texts as the upstream sources print them (the wheel corpus): flashinfer 0.6.x comm/trtllm_ar.py
    `print(f"Rank {tp_rank} workspace[{i}] {hex(workspace[i])}")`, sglang's `[TP{tp_rank}] ...` and
    `... request rank={self.tp_rank} ...` (disaggregation/decode.py). On TP 8 each came 8 times, one per rank."""
    def each(template: str, *, header: bool = False) -> list[tuple[int, str]]:
        return [(342 + r, (f"[2026-03-02 11:41:43 TP{r}] " if header else "")
                 + template.format(r=r, addr=hex(0x7f00aa001000 + 0x1000 * r))) for r in range(8)]

    out = _fold_journal(each("Rank {r} workspace[0] {addr}") + each("Rank {r} workspace[1] {addr}")
                        + each("[TP{r}] Warmup put failed after 3 attempts, giving up", header=True)
                        + each("Decode handshake failed for request rank={r} rid=7", header=True))
    assert [(f.count, f.ranks) for f in out] == [(8, [f"TP{r}" for r in range(8)])] * 4
    assert [f.line.text for f in out][:2] == ["Rank 0 workspace[0] 0x7f00aa001000",
                                              "Rank 0 workspace[1] 0x7f00aa001000"]


def test_lines_that_say_a_rank_and_differ_in_anything_else_stay_apart():
    """The rank said is the one place the copies may differ: `GPU 3` against `GPU 4`, another rank named than the
    one printing (TP0 `rank=5`, TP1 `rank=6`), or two ranks named, are other lines."""
    out = _fold_journal([(342 + r, f"[2026-03-02 11:41:43 TP{r}] [TP{r}] Bound to NUMA node 0 for GPU {r}")
                         for r in range(2)]
                        + [(342, "[2026-03-02 11:41:43 TP0] peer rank=5 failed"),
                           (343, "[2026-03-02 11:41:43 TP1] peer rank=6 failed"),
                           (342, "Rank 0 talks to Rank 1"), (343, "Rank 1 talks to Rank 0")])
    assert [f.count for f in out] == [1] * 6
    # `TP 8` unbracketed is a size each rank's process says alike: folded by process, as before
    out = _fold_journal([(342 + r, "serving Llama with TP 8") for r in range(8)])
    assert [(f.count, f.ranks[0]) for f in out] == [(8, "pid 342")]


def test_lines_that_say_their_rank_in_lower_case_words_are_folded():
    """A newcomer's `inv logs` after the seed's deploy on TP 8 (issue 46, 9, a new form): flashinfer 0.6.x
    comm/trtllm_ar.py `print(f"rank {tp_rank} allocated ipc_handles: {...}")` (a list of each rank's own
    addresses) and sglang's layers/flashinfer_comm_fusion.py `logger.info(f"FlashInfer workspace initialized for
    rank {rank}, world_size {world_size}")` say the rank in lower case: 16 lines on TP 8, none folded."""
    def handles(r: int) -> str:
        return "[" + ", ".join(f"['{hex(0x7f00aa001000 + 0x1000 * (r * 8 + i))}']" for i in range(3)) + "]"

    out = _fold_journal([(342 + r, f"rank {r} allocated ipc_handles: {handles(r)}") for r in range(8)]
                        + [(342 + r, f"[2026-03-02 11:41:43 TP{r}] FlashInfer workspace initialized for rank {r}, "
                                     "world_size 8") for r in range(8)])
    assert [(f.count, f.ranks) for f in out] == [(8, [f"TP{r}" for r in range(8)])] * 2, out
    # a lower-case rank another rank's header names is about that other rank, as in upper case
    out = _fold_journal([(342, "[2026-03-02 11:41:43 TP0] waiting for rank 5"),
                         (343, "[2026-03-02 11:41:43 TP1] waiting for rank 6")])
    assert [f.count for f in out] == [1, 1]


def test_the_ranks_of_a_folded_line_are_listed_in_order():
    """`[x2: TP4 TP3]`: the ranks were listed as their copies came, not in order."""
    from fleet.cli.logs import _ranks

    assert _ranks(["TP4", "TP3"]) == "TP3 TP4"
    assert _ranks(["TP5", "TP1", "TP3"]) == "TP1 TP3 TP5"
    assert _ranks(["TP10", "TP9"]) == "TP9 TP10"


def test_copies_that_keep_coming_are_held_for_while_they_come_up_to_the_hosts_two_seconds():
    """A newcomer's `inv logs -f` through the seed's deploy (issue 46, 9, a new form): flashinfer's autotuner warns
    from each rank as it finishes a tactic, the copies a few hundred ms apart, and the half-second hold showed them
    as `[x6: pids 472-477]`, `[x2: pids 478 479]` and then 8 single lines, where `inv logs` read afterwards showed
    `[x8: pids 472-479]` (copies within 2 s on the host's clock are one line)."""
    out: list[Folded] = []
    clock = Clock()
    folder = RankFolder(out.append, clock=clock)
    said = "2026-12-06 07:54:20,119 - WARNING - autotuner.py:25 - flashinfer.jit: [Autotuner]: Skipping tactic 12"
    for n in range(8):
        folder.add(LogLine("sbx0", "2026-12-06T07:54:20+0000", said, None, f"python[{472 + n}]"))
        clock.now += 0.2
        folder.expire()
    assert out == []  # still coming: held
    clock.now += 0.6
    folder.expire()
    assert [(f.count, f.ranks[0], f.ranks[-1]) for f in out] == [(8, "pid 472", "pid 479")], out
    # a line no other rank copies is still shown after the half second
    folder.add(LogLine("sbx0", "2026-12-06T07:54:22+0000", "[2026-12-06 07:54:22 TP0] Decode batch", None,
                       "python[472]"))
    clock.now += 0.6
    folder.expire()
    assert [f.count for f in out] == [8, 1]
    # and copies that keep coming are never held past the host's two seconds
    for n in range(12):
        folder.add(LogLine("sbx0", "2026-12-06T07:54:23+0000", said.replace("12", "13"), None,
                           f"python[{472 + n % 8}]" if n < 8 else f"python[{600 + n}]"))
        clock.now += 0.3
        folder.expire()
    assert out[2].count == 7, out  # shown at 2.1 s with the first 1.8 s's copies; the later ones a line of their own


def test_lines_all_is_journalctls_no_limit():
    """`inv logs -n all` (issue 46, 9, a new form): journalctl takes `-n all` (no limit: with --since, the whole
    span); fleet refused it, exit 2, `give a number of lines from 1 to 1,000,000`."""
    assert check_lines("all") is None and check_lines(" ALL ") is None
