"""The warm start's remote steps as fault points (issue 49): place, modules, clear and collect, each run for real
(fleet/host/programs/kcache.py on folders under a temporary root, through fleet.ssh.remote's runner), and at each
one a fault: the command fails unrun, hangs (no answer, unrun), runs and its answer is lost (late), runs and
answers garbage, runs and answers too much, runs and the link drops, or the controller dies before it. The
sandbox's fault harness (tests/faults/test_fault_points.py, the `warm` flow) injects its kinds into the real
`inv deploy`; this covers the kinds it has not (garbage, too much, hang) at every step, in seconds.

At every point: each cache folder is the host's own as it was, the stored entry's whole, or gone (a cold start),
never a mix nor with a folder of the other beside it; nothing half-placed or spooled is left beside the folders;
a host whose folders hold the entry's caches after the placing step is known to (a failed start is retried cold);
caches no start served with are named by the host's mark (kcache.PLACED: a put-back drops them before its
release starts); what the store holds is a whole tar of the folders."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from fakesession import HOST

from fleet.deploy.cachekey import CacheKey
from fleet.deploy.cachestore import CacheStore, Entry
from fleet.deploy.warmstart import WarmStart, not_whole
from fleet.host import kcache
from fleet.logs.warmphases import Expect, PhaseTimes
from fleet.ssh.remote import BytesResult, CommandTimedOut, ConnectionLost, OutputTooLarge, use_runner

KEY = CacheKey(sm="120", gpu="G", driver="580", cuda="13.0", packages=(("sglang", "0.5.9"),), patches=(),
               flags=(), env=(), venv="/root/ml-env")
KINDS = ("fail", "hang", "late", "garbage", "too-much", "drop", "dies")
# the steps of each flow, in order: the entry kills the start (placed, cleared, collected again); it serves
# warm (placed, its modules read back); the store has none (what an earlier place left removed; collected)
FLOWS = {"fails-warm": ("place", "clear", "collect"), "serves-warm": ("place", "modules"),
         "cold": ("unproven", "collect")}
POINTS = [(flow, step, kind) for flow, steps in FLOWS.items() for step in range(len(steps)) for kind in KINDS]


MARKS = [""]  # where the host's mark is, under the test's temporary folder


class Died(BaseException):
    """The controller killed at a step: nothing after it runs."""


kcache_verbs = ("collect", "place", "clear", "modules", "unproven")


class Runner:
    """Each command run here (the host's mark, kcache.PLACED, in MARKS[0]: a temporary folder's); at step `at`
    (counted from 0) the fault `kind`."""

    def __init__(self, at: int | None = None, kind: str = "") -> None:
        self.at, self.kind, self.n = at, kind, -1
        self.verbs: list[str] = []  # the steps asked for
        self.ran: list[str] = []  # those that ran on the host

    def run_bytes(self, conn, host, command, data, timeout, max_output) -> BytesResult:
        self.n += 1
        command = command.replace(kcache.PLACED, MARKS[0])
        self.verbs.append(next(w for w in shlex.split(command) if w in kcache_verbs))
        fault = self.kind if self.n == self.at else ""
        if fault == "dies":
            raise Died
        if fault == "fail":
            return BytesResult(1, b"", b"fleet fault: injected failure\n")
        if fault == "hang":
            raise CommandTimedOut(f"{host.name}: `{command[:60]}` did not finish (a hang)")
        done = subprocess.run(["sh", "-c", command], input=data, capture_output=True, timeout=60)  # python3 -I -S
        self.ran.append(self.verbs[-1])
        if fault == "late":
            raise CommandTimedOut(f"{host.name}: `{command[:60]}` did not finish; its answer was lost")
        if fault == "too-much":
            raise OutputTooLarge(f"{host.name}: more than {max_output} bytes")
        if fault == "drop":
            raise ConnectionLost(f"{host.name}: connection lost during `{command[:60]}`")
        if fault == "garbage":
            return BytesResult(0, b"/etc\n/\n\x00\xff" + done.stdout[::-1][:4096], b"")
        return BytesResult(done.returncode, done.stdout, done.stderr)


def _folders(root: Path) -> list[str]:
    return [str(root / "home/.cache/flashinfer/0.6.3/120a/cached_ops"), str(root / "home/.triton/cache")]


def _fill(folders: list[str], tag: bytes) -> None:
    for i, folder in enumerate(folders):
        Path(folder, "m").mkdir(parents=True)
        Path(folder, "m", f"m{i}.so").write_bytes(b"\x7fELF" + tag * 50)


def _seen(folder: str) -> dict[str, bytes] | None:
    path = Path(folder)
    if not path.exists():
        return None
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def _warm(store: CacheStore, folders: list[str]) -> WarmStart:
    return WarmStart(store, KEY, folders, sys.prefix)


def _conn(runner: Runner) -> SimpleNamespace:
    conn = SimpleNamespace(transport=SimpleNamespace())
    use_runner(conn, runner)  # type: ignore[arg-type]
    return conn


@pytest.fixture
def host(tmp_path: Path) -> dict:
    """The store holds the giver's caches of KEY; the host's folders hold its own, other ones."""
    folders = _folders(tmp_path)
    MARKS[0] = str(tmp_path / "kcache-placed")
    _fill(folders, b"giver")
    given = kcache.collect(_conn(Runner()), HOST, sys.prefix, folders, 1 << 20)  # type: ignore[arg-type]
    assert isinstance(given, bytes)
    giver = {f: _seen(f) for f in folders}
    for f in folders:
        subprocess.run(["rm", "-rf", f], check=True)
    _fill(folders, b"own")
    store = CacheStore(tmp_path / "kcache")
    return {"folders": folders, "tar": given, "giver": giver, "own": {f: _seen(f) for f in folders},
            "store": store, "root": tmp_path}


def _play(flow: str, h: dict, runner: Runner, said: list[str]) -> None:
    """The flow's warm start against the host, as an attempt runs it; h["after_place"]: the folders right after
    the placing step, and whether the warm start then counted them placed."""
    store, folders = h["store"], h["folders"]
    if flow != "cold":
        store.put(KEY, h["tar"], "giver")
    ws, conn = _warm(store, folders), _conn(runner)
    ws.before_start(conn, HOST, said.append)  # type: ignore[arg-type]
    h["after_place"] = ({f: _seen(f) for f in folders}, bool(ws.placed))
    if flow == "fails-warm" and ws.placed and not ws.without_cache(conn, HOST, said.append):  # type: ignore[arg-type]
        return  # no start without them: the attempt failed (the ladder goes on, or falls back)
    if flow == "serves-warm":
        ws.check_used(conn, HOST, said.append)  # type: ignore[arg-type]
    ws.after_serving(conn, HOST, said.append)  # type: ignore[arg-type]


@pytest.mark.parametrize(("flow", "step", "kind"), POINTS)
def test_every_warm_start_step_keeps_the_invariant(host, flow, step, kind):
    runner, said = Runner(step, kind), []  # type: ignore[var-annotated]
    try:
        _play(flow, host, runner, said)
    except (Died, ConnectionLost):
        pass  # the run ended there: the host is checked as it stands
    assert runner.verbs[step] == FLOWS[flow][step], runner.verbs  # the fault hit the step it names
    broken = _broken(host, runner)
    assert not broken, f"{flow} {kind} at {FLOWS[flow][step]}: {broken}; said {said}"


def _broken(h: dict, runner: Runner) -> list[str]:
    """What of the invariant does not hold (empty: all of it)."""
    bad, folders = [], h["folders"]
    marked = Path(MARKS[0]).read_text().split() if Path(MARKS[0]).exists() else []
    if "modules" not in runner.ran:  # no start served with them: a put-back must find them named
        bad += [f"{f} holds the entry's caches, unmarked" for f in folders
                if _seen(f) == h["giver"][f] and f not in marked]
    now = {f: _seen(f) for f in folders}
    bad += [f"{f} is a mix: {sorted(c)}" for f, c in now.items() if c not in (h["own"][f], h["giver"][f], None)]
    if any(now[f] == h["own"][f] for f in folders) and any(now[f] == h["giver"][f] for f in folders):
        bad.append("half placed: some folders the host's own, some the entry's")
    bad += [f"left beside: {p.name}" for f in folders for p in Path(f).parent.iterdir() if ".fleet-kcache-" in p.name]
    if "after_place" in h:
        seen, counted = h["after_place"]
        if any(seen[f] == h["giver"][f] for f in folders) and not counted:
            bad.append("the caches were in place and the warm start took the start for a cold one")
    got = h["store"].get(KEY)
    if isinstance(got, Entry) and not_whole(got.data, folders):
        bad.append("the store holds what is no whole tar of the folders")
    return bad


def test_a_garbage_answer_to_collect_is_never_stored(host):
    """Stored, it was every later host's entry of the key (each refusing it and starting cold) until pruned: on
    the code before, the host's garbage was stored under its own sha256 (checked)."""
    ws, said = _warm(host["store"], host["folders"]), []  # type: ignore[var-annotated]
    ws.after_serving(_conn(Runner(0, "garbage")), HOST, said.append)  # type: ignore[arg-type]
    assert not host["store"].has(KEY) and any("not a whole tar" in s for s in said), said
    assert not_whole(host["tar"], host["folders"]) is None  # what the program really answers is one


def test_a_garbage_answer_to_place_never_names_a_folder_to_clear(host):
    """The folders the host answered were cleared after a failed start: a garbage answer naming /etc would have
    had kcache.py remove it. Now an answer that names another folder counts as no answer (checked: on the code
    before, ws.placed was ['/etc', '/', ...])."""
    host["store"].put(KEY, host["tar"], "giver")
    ws, said = _warm(host["store"], host["folders"]), []  # type: ignore[var-annotated]
    ws.before_start(_conn(Runner(0, "garbage")), HOST, said.append)  # type: ignore[arg-type]
    assert set(ws.placed) <= set(host["folders"]), ws.placed
    assert any("gave no answer" in s for s in said), said


def test_the_phases_of_the_start_that_gave_the_caches_are_what_a_warm_start_expects(host):
    """The store keeps the giver's cold phases with its caches; a start with them placed hands the watch a warm
    expectation of them, a start whose placing failed (or that is retried without them) a cold one (issue 49:
    before, no expectation existed and the store kept no phases)."""
    cold = PhaseTimes((("weight_load", 40.0), ("graph_capture", 260.0)))
    host["store"].put(KEY, host["tar"], "giver", cold)
    assert host["store"].get(KEY).phases == cold
    ws, said, conn = _warm(host["store"], host["folders"]), [], _conn(Runner())  # type: ignore[var-annotated]
    assert ws.expect == Expect.cold_start()
    ws.before_start(conn, HOST, said.append)  # type: ignore[arg-type]
    assert ws.placed and ws.expect == Expect.placed("giver", cold)
    assert ws.without_cache(conn, HOST, said.append)  # type: ignore[arg-type]
    assert ws.expect == Expect.cold_start()
    refused = _warm(host["store"], host["folders"])
    refused.before_start(_conn(Runner(0, "fail")), HOST, said.append)  # type: ignore[arg-type]
    assert not refused.placed and refused.expect == Expect.cold_start()
