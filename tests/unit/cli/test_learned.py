"""`inv learned` and `inv forget` (fleet.cli.learned): the real task on a recorded version 1 file; bad options are
one line, exit 2, and the file unchanged."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
INV = Path(sys.executable).parent / "inv"
RECORDED = REPO / "tests/fixtures/known-good/v1-sandbox.json"  # written by the fork-point fleet on the sandbox


@pytest.fixture
def state(tmp_path) -> Path:
    (tmp_path / "state").mkdir()
    shutil.copy(RECORDED, tmp_path / "state/known-good.json")
    (tmp_path / "hosts.yaml").write_text("groups:\n  rtx: {}\n  empty: {}\nhosts:\n"
                                         "  sbx2: {address: 127.0.0.1, port: 1, groups: [rtx]}\n"
                                         "  sbx4: {address: 127.0.0.1, port: 1, groups: [rtx]}\n")
    return tmp_path / "state/known-good.json"


def inv(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "FLEET_SANDBOX_ONLY": "1", "HOME": str(state.parents[1]),
           "PYTHONPATH": str(REPO), "FLEET_STATE_DIR": str(state.parent), "COLUMNS": "120"}
    return subprocess.run([str(INV), *args], cwd=REPO, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env=env)


@pytest.mark.parametrize("args", [
    ("forget",), ("forget", "--host", "sbx2;rm -rf /"), ("forget", "--all", "--rung", "plain"),
    ("forget", "--fingerprint", "D6F73DACA608472F"), ("forget", "--group", "nosuch", "-i", "{dir}/hosts.yaml"),
    ("forget", "--group", "empty", "-i", "{dir}/hosts.yaml"), ("learned", "--rung", "../x")])
def test_bad_options_are_one_line_exit_2_and_nothing_changes(state, args):
    before = state.read_bytes()
    done = inv(state, *(a.replace("{dir}", str(state.parents[1])) for a in args))
    assert done.returncode == 2 and done.stdout == "", done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert state.read_bytes() == before and not state.with_name("known-good.json.bak").exists()


def test_learned_shows_every_result_and_forget_clears_a_group_with_a_backup(state):
    shown = inv(state, "learned", "--json")
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(shown.stdout)["results"]
    assert len(rows) == 7 and all(r["legacy"] for r in rows)
    table = inv(state, "learned", "--playbook", "llama-learn").stdout
    assert "too-greedy  sbx2" in table and "CUDA_OOM x1" in table and "v1, not applied" in table
    before = state.read_bytes()
    dry = inv(state, "forget", "--group", "rtx", "-i", str(state.parents[1] / "hosts.yaml"), "--dry-run", "--json")
    assert dry.returncode == 0 and json.loads(dry.stdout)["dry_run"] is True
    assert {(r["rung"], r["host"]) for r in json.loads(dry.stdout)["forgotten"]} == {
        ("plain-b", "sbx4"), ("plain", "sbx4"), ("too-greedy", "sbx2"), ("too-greedy", "sbx4")}
    assert state.read_bytes() == before
    done = inv(state, "forget", "--group", "rtx", "-i", str(state.parents[1] / "hosts.yaml"))
    assert done.returncode == 0 and "forgot 4 results" in done.stdout, done.stderr
    assert state.with_name("known-good.json.bak").read_bytes() == before
    left = json.loads(inv(state, "learned", "--json").stdout)["results"]
    assert {r["host"] for r in left} == {"sbx1", "sbx3"}
    nothing = inv(state, "forget", "--host", "sbx9")
    assert nothing.returncode == 0 and "nothing learned matches; nothing changed" in nothing.stdout


def test_learned_shows_what_the_slo_tunes_learned_per_fingerprint(state):
    (state.parent / "slo-learned.json").write_text(json.dumps({"version": 1, "entries": {"k": {
        "fingerprint": "0123456789abcdef", "playbook": "glm5-nvfp4", "slo": "ttft_p99=2s",
        "wins": [{"host": "sbx0", "flags": {"max-running-requests": 512}, "rate": 9.5, "release": "r1",
                  "at": "2026-12-05T08:00:00+00:00"}], "crashed": [["mem-fraction-static", 0.9]]}}}))
    data = json.loads(inv(state, "learned", "--json").stdout)
    assert [(e["playbook"], e["wins"][0]["host"], e["crashed"]) for e in data["slo"]] == [
        ("glm5-nvfp4", "sbx0", [["mem-fraction-static", 0.9]])]
    table = inv(state, "learned", "--playbook", "glm5-nvfp4").stdout
    assert "0123456789abcdef glm5-nvfp4 within ttft_p99=2s: max-running-requests=512 kept 9.5 req/s on sbx0" in table
    assert "crashed: --mem-fraction-static 0.9" in table
    assert json.loads(inv(state, "learned", "--json", "--rung", "plain").stdout)["slo"] == []


def test_forget_clears_what_the_slo_tunes_learned_too_but_not_for_a_rung(state):
    slo = state.parent / "slo-learned.json"
    slo.write_text(json.dumps({"version": 1, "entries": {"k": {
        "fingerprint": "0123456789abcdef", "playbook": "glm5-nvfp4", "slo": "ttft_p99=2s",
        "wins": [{"host": "sbx0", "flags": {}, "rate": 9.5, "release": "r1", "at": "2026-12-05T08:00:00+00:00"}],
        "crashed": []}}}))
    before = slo.read_bytes()
    assert json.loads(inv(state, "forget", "--rung", "plain", "--json").stdout)["slo_forgotten"] == []
    assert slo.read_bytes() == before
    done = inv(state, "forget", "--host", "sbx0")
    assert done.returncode == 0 and "forgot sbx0's winner of 0123456789abcdef glm5-nvfp4" in done.stdout, done.stderr
    assert slo.with_name("slo-learned.json.bak").read_bytes() == before
    assert json.loads(inv(state, "learned", "--json").stdout)["slo"] == []


@pytest.mark.parametrize(("args", "said"), [
    (("learned", "--host", "sbx44"), "fleet: --host sbx44: nothing was learned of that name; did you mean sbx4?"),
    (("forget", "--host", "sbx4", "--host", "sbx44", "--dry-run"),
     "fleet: --host sbx44: nothing was learned of that name; did you mean sbx4?"),
    (("forget", "--rung", "plain-c", "--dry-run"), "fleet: --rung plain-c: nothing was learned of that name; did you "
                                                   "mean plain-b?"),
    (("learned", "--playbook", "llama-fleet-c"), "fleet: --playbook llama-fleet-c: nothing was learned of that name; "
                                                 "did you mean llama-fleet-"),
    (("learned", "--host", "zzz"), "fleet: --host zzz: nothing was learned of that name (known: sbx1, sbx2, sbx3,"),
    # h-new24's hour: a fingerprint a digit off said only `nothing learned matches; nothing changed`
    (("forget", "--fingerprint", "d6f73daca608472e", "--dry-run"),
     "fleet: --fingerprint d6f73daca608472e: nothing was learned of that name; did you mean d6f73daca608472f?"),
    (("learned", "--fingerprint", "0000000000000000"), "fleet: --fingerprint 0000000000000000: nothing was learned "
                                                       "of that name (known: 4cccecf04bfaf987, d6f73daca608472f"),
])
def test_a_name_nothing_was_learned_of_says_the_nearest_one(state, args, said):
    """Found by the seventh newcomer's hour (issue 46, finding 6): `inv forget -H sbx00` (sbx0 meant) said only
    `nothing learned matches; nothing changed`, and `-H sbx0 -H sbx00` forgot sbx0's and said nothing of sbx00."""
    before = state.read_bytes()
    done = inv(state, *args)
    assert done.returncode == 0, done.stderr
    assert said in done.stderr, done.stderr
    assert state.read_bytes() == before


def test_hosts_of_reads_globs_exclusions_and_intersections_over_the_learned_names():
    """Issue 46, finding 6: `inv learned -H 'sbx*'` and `inv forget -H '!sbx1'` were refused (`a name as inv learned
    shows it`); the patterns every other task takes now select among the hosts something was learned of."""
    from fleet.cli.learned import hosts_of
    from fleet.errors import InputError

    learned = {"sbx1", "sbx2", "sbx3", "gpu-a"}
    assert hosts_of(["sbx*"], learned) == {"sbx1", "sbx2", "sbx3"}
    assert hosts_of(["sbx*", "!sbx2"], learned) == {"sbx1", "sbx3"}
    assert hosts_of(["!sbx2"], learned) == {"sbx1", "sbx3", "gpu-a"}  # only narrowing: from every learned host
    assert hosts_of(["sbx[12]", "&sbx2"], learned) == {"sbx2"}
    assert hosts_of(["!gpu-a"], learned, members={"sbx1", "gpu-a"}) == {"sbx1"}  # a group's members, narrowed
    assert hosts_of(["old-host"], learned) == {"old-host"}  # a name as named: it selects nothing, said on stderr
    for patterns, said in ((["!sbx22"], "--host '!sbx22': nothing was learned of that name (matched against the "
                                        "hosts `inv learned` shows, not the inventory); did you mean sbx2?"),
                           (["zz*"], "--host 'zz*': matches no host anything was learned of"),
                           (["sbx1", "!sbx*"], "leaves no host of those learned of")):
        with pytest.raises(InputError) as err:
            hosts_of(patterns, learned)
        assert said in str(err.value)


def test_learned_and_forget_take_globs_and_exclusions(state):
    shown = inv(state, "learned", "--host", "sbx*", "--host", "!sbx2", "--json")
    assert shown.returncode == 0, shown.stderr
    assert {r["host"] for r in json.loads(shown.stdout)["results"]} == {"sbx1", "sbx3", "sbx4"}
    before = state.read_bytes()
    alone = inv(state, "forget", "--host", "!sbx4")  # only narrowing: needs --all, as deploy's does
    assert alone.returncode == 2 and "add --all" in alone.stderr and state.read_bytes() == before
    typo = inv(state, "forget", "--all", "--host", "!sbx44")  # a typo in an exclusion never forgets the host spared
    assert typo.returncode == 2 and "did you mean sbx4?" in typo.stderr and state.read_bytes() == before
    done = inv(state, "forget", "--all", "--host", "!sbx4", "--json")
    assert done.returncode == 0, done.stderr
    assert {r["host"] for r in json.loads(inv(state, "learned", "--json").stdout)["results"]} == {"sbx4"}


@pytest.mark.parametrize("args", [("learned",), ("learned", "--json"), ("forget", "--all", "--dry-run")])
def test_a_store_it_cannot_read_is_said_never_shown_as_nothing_learned(state, args):
    """Newcomer h-new13: a torn or hand-broken known-good.json was read as empty: `inv learned` said `nothing
    learned`, exit 0, and `inv forget --all` `nothing learned matches`, while a deploy or tune went on without what
    it held (and kept it aside only when it wrote). Now the file and why are one line on stderr, exit 1, unchanged."""
    state.write_text('{"version": 2, "entries": {"d6f7')
    before = state.read_bytes()
    done = inv(state, *args)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"error: {state}: not readable as fleet's (not JSON: "), done.stderr
    assert "nothing learned" not in done.stdout
    assert state.read_bytes() == before


def test_a_slo_store_it_cannot_read_is_said_too(state):
    """The same for slo-learned.json (tune --slo's winners): read as nothing learned, exit 0."""
    slo = state.with_name("slo-learned.json")
    slo.write_text("{bad")
    done = inv(state, "learned")
    assert done.returncode == 1 and done.stderr.startswith(f"error: {slo}: not readable as fleet's (not JSON: ")
    assert slo.read_text() == "{bad"


def test_ansibles_range_is_refused_as_every_task_refuses_it():
    """`inv forget -H 'sbx[0:3]'` was told `a name as inv learned shows it`, where every other task names the range
    and the hosts it meant (review of the diff)."""
    from fleet.cli.learned import selection
    from fleet.errors import InputError

    with pytest.raises(InputError) as err:
        selection(None, ["sbx[0:3]"], [], None, [], None)
    assert "is Ansible's range" in str(err.value) and "sbx0,sbx1,sbx2,sbx3" in str(err.value), err.value


def test_a_slo_store_of_another_version_is_said_too(state):
    """slo-learned.json of another version read as nothing learned (its load() reads only its own), exit 0, and the
    next tune --slo overwrote it (review of the diff)."""
    slo = state.with_name("slo-learned.json")
    slo.write_text('{"version": 99, "entries": {}}')
    done = inv(state, "learned")
    assert done.returncode == 1 and "version '99', where this fleet reads 1" in done.stderr, done.stderr
    assert slo.read_text() == '{"version": 99, "entries": {}}'
