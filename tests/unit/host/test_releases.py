"""A release's events.jsonl (fleet.host.releases): appended whole lines, read past a torn tail. The store's shell
runs here, against a temporary folder standing in for /var/lib/fleet."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from fakesession import Here, here

from fleet.errors import FleetError
from fleet.host import releases
from fleet.host.releases import Release, ReleaseStore, parse_events
from fleet.inventory import Host
from fleet.ssh.remote import CommandTimedOut, ConnectionLost

HOST = Host(name="h1", address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(), source=Path("x.yaml"))


@pytest.fixture
def store(tmp_path) -> ReleaseStore:
    return ReleaseStore.on(Here(HOST), root=str(tmp_path / "fleet"))


def _release() -> Release:
    return Release(id="20261201T000000Z-abcd", host="h", playbook="p", playbook_sha256="x", created="t")


def test_a_torn_tail_is_skipped_and_counted_and_the_next_append_starts_a_line_of_its_own(store):
    r = _release()
    folder = Path(store.dir(r))
    folder.mkdir(parents=True)
    store.event(r, {"step": "opened"})
    store.event(r, {"step": "stop", "rung": "a"})
    with open(folder / "events.jsonl", "a") as f:
        f.write('{"t": 1.5, "step": "insta')  # a run killed mid-append (or a full disk): no newline
    assert [e["step"] for e in store.events(r.id)] == ["opened", "stop"]
    assert store.events_read(r.id)[1] == 1
    store.event(r, {"step": "interrupted", "after": "stop"})
    events, torn = store.events_read(r.id)
    assert [e["step"] for e in events] == ["opened", "stop", "interrupted"] and torn == 1


def test_parse_events_skips_garbage_and_non_objects():
    data = b'{"step": "opened"}\n\n[1, 2]\n\xff\xfe\n"text"\n{"step": "stop"}\n{"step": '
    events, torn = parse_events(data)
    assert events == [{"step": "opened"}, {"step": "stop"}] and torn == 4


def test_a_manifest_that_is_not_one_is_damaged_and_passed_over(store):
    r = _release()
    folder = Path(store.dir(r))
    folder.mkdir(parents=True)
    for text in ('{"id": "x", "host"', "[]", '{"no": "id"}', '{"id": "x"}'):
        (folder / "manifest.json").write_text(text)
        with pytest.raises(releases.ReleaseDamaged, match="is not a release manifest fleet wrote"):
            store.load(r.id)
        assert store.list() == [], text
    (folder / "manifest.json").write_text(json.dumps(r.to_json()))
    assert store.load(r.id) == r


def test_a_manifest_s_cache_key_is_a_sha256_or_none(store):
    """The key digest a release started under (issue 49) names a folder of the controller's store: read from the
    host, it is a sha256 or the manifest is damaged."""
    r = _release()
    folder = Path(store.dir(r))
    folder.mkdir(parents=True)
    for bad in ("../../etc", 5, "A" * 64):
        (folder / "manifest.json").write_text(json.dumps({**r.to_json(), "cache_key": bad}))
        with pytest.raises(releases.ReleaseDamaged, match="cache_key"):
            store.load(r.id)
    r.keyed("a" * 64)
    (folder / "manifest.json").write_text(json.dumps(r.to_json()))
    assert store.load(r.id) == r and r.cache_key == "a" * 64


def _made(n: int, status: str) -> Release:
    return Release(id=f"20261201T0000{n:02d}Z-abcd", host="h", playbook="p", playbook_sha256="x", created="t",
                   status=status)


def test_failed_deploys_never_push_out_the_release_a_rollback_goes_to():
    # One good release, five failed deploys, one good deploy, keep_releases 5: the first good one stays.
    made = [_made(0, "ok"), *(_made(n, "failed") for n in range(1, 6)), _made(6, "ok")]
    doomed = releases.prune_plan(made, made[-1].id, keep=5)
    assert made[0].id not in doomed
    assert doomed == [made[1].id, made[2].id]  # the oldest failures beyond the cap of 3


def test_prune_keeps_the_newest_served_ones_and_never_current_in_progress_or_the_one_before_current():
    made = [_made(n, "ok") for n in range(8)] + [_made(8, "interrupted"), _made(9, "in-progress")]
    assert releases.prune_plan(made, made[7].id, keep=3) == [made[n].id for n in range(5)]
    # current rolled back to an old release: the newest that served before it is spared too
    assert made[2].id not in releases.prune_plan(made, made[3].id, keep=3)
    assert made[3].id not in releases.prune_plan(made, made[3].id, keep=1)
    assert made[9].id not in releases.prune_plan(made, None, keep=1, unserved=0)
    assert releases.prune_plan(made, made[7].id, keep=0) == releases.prune_plan(made, made[7].id, keep=1)


def test_prune_by_the_store_drops_the_doomed_folders(store):
    made = [_made(0, "ok"), *(_made(n, "failed") for n in range(1, 6)), _made(6, "ok")]
    for r in made:
        Path(store.dir(r)).mkdir(parents=True)
        (Path(store.dir(r)) / "manifest.json").write_text(json.dumps(r.to_json()))
    store.mark_current(made[-1])
    dropped, kept = store.prune(5)
    assert dropped == [made[1].id, made[2].id]
    assert [r.id for r in kept] == [r.id for r in made if r not in made[1:3]]
    assert store.last_good_before_current() == made[0]
    assert sorted(p.name for p in Path(store.releases).iterdir()) == [r.id for r in made if r not in made[1:3]]


def test_current_pointing_at_an_unreadable_manifest_refuses_instead_of_reading_as_no_release(store):
    r = _release()
    Path(store.dir(r)).mkdir(parents=True)
    (Path(store.dir(r)) / "manifest.json").write_text('{"id": "x", "ho')
    store.mark_current(r)
    with pytest.raises(FleetError, match=f"{r.id}/manifest.json is not a release manifest fleet wrote"):
        store.current()
    (Path(store.dir(r)) / "manifest.json").unlink()
    with pytest.raises(FleetError, match=f"points to release {r.id}, whose manifest is missing or unreadable"):
        store.current()


def test_a_release_s_versions_are_read_in_stack_order_and_labelled():
    facts = {"gpus": 8, "versions": {"driver": "580.95.05", "torch": "2.9.1+cu128", "sglang": "0.5.9",
                                     "flashinfer-python": "0.6.3", "cuda": "12.8"}}
    got = releases.versions_of(facts)
    assert list(got) == ["sglang", "flashinfer-python", "torch", "cuda", "driver"]
    assert releases.versions_label(got) == "sglang 0.5.9, flashinfer 0.6.3"
    assert releases.versions_label(got, short=True) == "0.5.9/0.6.3"
    assert releases.versions_label({"sglang": "0.5.23"}, short=True) == "0.5.23/?"
    assert releases.versions_label({}) == "-"


@pytest.mark.parametrize("facts", [None, [], "x", {"versions": ["0.5.9"]}, {"versions": "0.5.9"}, {}])
def test_a_release_without_versions_or_with_a_manifest_of_another_shape_has_none(facts):
    assert releases.versions_of(facts) == {}


def test_a_hostile_manifest_s_versions_print_only_in_a_version_s_shape():
    facts = {"versions": {"sglang": "0.5.9\x1b[2J", "flashinfer-python": 7, "torch": "9" * 41,
                          "driver": "[red]580[/]", "nccl": "2.27.5", "nvidia-nccl": "2.27.5.post1"}}
    assert releases.versions_of(facts) == {"nvidia-nccl": "2.27.5.post1"}


def test_the_stack_a_host_has_now_is_compared_with_what_a_release_ran():
    ran = {"sglang": "0.5.9", "flashinfer-python": "0.6.3", "torch": "2.9.1"}
    assert releases.stack_drift(ran, {"sglang": "0.5.23", "flashinfer-python": "0.6.3"}) == [
        "sglang 0.5.9 -> 0.5.23", "torch 2.9.1 -> none"]
    assert releases.stack_drift(ran, dict(ran)) == []
    assert releases.stack_drift(ran, {}) == []  # the host could not be read: nothing said, nothing guessed
    assert releases.stack_drift({}, {"sglang": "0.5.23"}) == []  # a release from before fleet recorded versions


@pytest.mark.parametrize("nodes", [[1, 2], "rank0", 7, {"count": "2", "rank": 0}, {"count": 1, "rank": 0},
                                   {"count": 2, "rank": 2}, {"count": 2, "rank": -1}, {"count": 2},
                                   {"count": 2, "rank": 0, "hosts": "a,b"}, {"count": 2, "rank": 0, "hosts": [1]},
                                   {"count": 2, "rank": 0, "hosts": ["a", "b", "c"]}, {"count": 10 ** 9, "rank": 0}])
def test_a_release_whose_nodes_are_not_as_fleet_writes_them_is_damaged_never_a_node_or_a_single_host(store, nodes):
    """Recovery read config.nodes unchecked: a list crashed it (every later run failed), {"count": 1} read as a node
    and left the unit stopped. Now the manifest is damaged: `current` on it refuses, with the file named."""
    r = _release()
    r.config = {"nodes": nodes}
    folder = Path(store.dir(r))
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps(r.to_json()))
    with pytest.raises(releases.ReleaseDamaged, match="config.nodes"):
        store.load(r.id)


def test_a_node_release_as_fleet_writes_it_loads_and_says_which_node_it_is(store):
    r = _release()
    r.config = {"nodes": {"count": 2, "rank": 1, "dist_init_addr": "10.0.0.1:5757", "hosts": ["a", "b"],
                          "deployment": r.id}}
    folder = Path(store.dir(r))
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps(r.to_json()))
    assert releases.node_of(store.load(r.id)) == "node 1 of 2 of the multi-node deployment of p (a, b)"


def test_a_failed_move_of_current_leaves_no_new_link_behind(store):
    """mark_current's `mv` failing (here `current` is a folder, so rename(2) refuses) used to leave its
    .current.HEX link beside `current` for ever."""
    r = _release()
    Path(store.dir(r)).mkdir(parents=True)
    (Path(store.current_link) / "x").mkdir(parents=True)
    with pytest.raises(FleetError):
        store.mark_current(r)
    assert sorted(p.name for p in Path(store.root).iterdir()) == ["current", "releases"]
    (Path(store.current_link) / "x").rmdir()
    Path(store.current_link).rmdir()
    store.mark_current(r)
    assert sorted(p.name for p in Path(store.root).iterdir()) == ["current", "releases"]
    assert store.current_id() == r.id


def _losing_answers(store, run: bool, error: type[Exception], answers_after: bool = True):
    """The store's shell, where the move of `current` runs (or not) and its answer is then lost; later commands
    answer only when `answers_after`."""
    lost = []

    def answer(command):
        if lost and not answers_after:
            raise CommandTimedOut("h1: `readlink ...` did not end within 120s")
        if "mv -T" in command and not lost:
            lost.append(command)
            if run:
                subprocess.run(["sh", "-c", command], check=True)
            raise error("h1: `ln -s releases/...` did not end within 120s")
        return here(command)

    store.session.answer = answer


def _two_releases(store):
    old, new = _release(), Release(id="20261202T000000Z-beef", host="h", playbook="p", playbook_sha256="x",
                                   created="t")
    for r in (old, new):
        Path(store.dir(r)).mkdir(parents=True)
    return old, new


def test_a_move_of_current_that_ran_but_lost_its_answer_counts_as_moved(store):
    """A timeout loses the answer, not the rename: it used to raise, and the callers then put the other release
    back while `current` named this one."""
    old, new = _two_releases(store)
    store.mark_current(old)
    _losing_answers(store, run=True, error=CommandTimedOut)
    store.mark_current(new)
    assert store.current_id() == new.id


def test_a_move_that_did_not_run_still_raises_and_current_is_unchanged(store):
    old, new = _two_releases(store)
    store.mark_current(old)
    _losing_answers(store, run=False, error=CommandTimedOut)
    with pytest.raises(CommandTimedOut):
        store.mark_current(new)
    assert store.current_id() == old.id


def test_a_lost_link_raises_even_when_the_move_ran(store):
    """Nothing more can be read over a dead link: the caller's mark (or the next run's recovery) decides."""
    old, new = _two_releases(store)
    store.mark_current(old)
    _losing_answers(store, run=True, error=ConnectionLost)
    with pytest.raises(ConnectionLost):
        store.mark_current(new)


def test_point_back_names_the_release_that_serves_or_says_why_not(store):
    old, new = _two_releases(store)
    store.mark_current(new)
    assert store.point_back(old) is None and store.current_id() == old.id
    assert store.point_back(old) is None  # already there: nothing run
    _losing_answers(store, run=False, error=CommandTimedOut, answers_after=False)
    problem = store.point_back(new)
    assert problem is not None and problem.startswith("`current` could not be pointed back at it")
    assert "did not end within 120s" in problem


def test_a_move_reported_as_not_done_cannot_land_later(store):
    """A move whose `mv` hangs past the timeout (a stalled disk) keeps running after the channel is closed: the
    re-read said "not moved" and the caller put the old release back, then the stuck rename landed and `current`
    named the release given up. The new link is removed before the re-read, so a late `mv` has nothing to move."""
    hung: list[str] = []

    def answer(command):
        if "mv -T" in command and not hung:
            tmp = re.search(r"(\S+/\.current\.[0-9a-f]+)", command).group(1)
            subprocess.run(["sh", "-c", command.split(" && ")[0]], check=True)  # ln -s ran ...
            hung.append(f"mv -T {tmp} {tmp.rsplit('/', 1)[0]}/current")  # ... the mv is stuck on the host
            raise CommandTimedOut("h1: `ln -s releases/...` did not finish within 120s; the channel was closed")
        return here(command)

    old, new = _two_releases(store)
    store.mark_current(old)
    store.session.answer = answer
    with pytest.raises(CommandTimedOut):
        store.mark_current(new)
    assert store.point_back(old) is None and store.current_id() == old.id
    subprocess.run(["sh", "-c", hung[0]], capture_output=True)  # the stalled rename ends afterwards
    assert store.current_id() == old.id
    assert sorted(p.name for p in Path(store.root).iterdir()) == ["current", "releases"]


def _judged(n: int, decision: str) -> Release:
    made = _made(n, "ok")
    made.judged({"decision": decision, "final": True, "seconds": 150.0, "look": 2, "metrics": [], "strata": 6,
                 "dropped": 0})
    return made


def test_a_canary_its_judge_did_not_pass_is_never_where_a_rollback_goes(store):
    # before, a canary failed and put back on 0, then the next canary (3, current) failed: back on 0, not on the
    # failed canary 1 (it served before its verdict; the rollback went to it, the slower release served again)
    made = [_made(0, "ok"), _judged(1, "fail"), _judged(2, "inconclusive"), _judged(3, "fail")]
    for r in made:
        Path(store.dir(r)).mkdir(parents=True)
        (Path(store.dir(r)) / "manifest.json").write_text(json.dumps(r.to_json()))
    store.mark_current(made[3])
    assert store.last_good_before_current() == made[0]
    assert made[0].id not in releases.prune_plan(made, made[3].id, keep=1, unserved=0)
    passed = _judged(4, "pass")
    assert releases.back_to([*made, passed, _made(5, "ok")], _made(5, "ok").id) == passed
