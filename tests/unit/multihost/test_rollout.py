"""Rolling deploys: fleet.multihost.rollout's planning and fleet.multihost.rolling's batch loop
with a fake deployer."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

from fleet.cli import deploy as deploy_cmd
from fleet.cli.board import Board
from fleet.deploy.ladder import Deployer
from fleet.deploy.results import Attempt, DeployResult
from fleet.errors import InputError
from fleet.inventory import Host
from fleet.multihost import rollout
from fleet.multihost.rollout import Amount
from fleet.ssh.connect import ConnectOptions


def sizes(serial: str | None, total: int) -> list[int]:
    return rollout.batch_sizes(rollout.parse_serial(serial), total)


@pytest.mark.parametrize(("serial", "total", "expected"), [
    (None, 5, [5]),
    ("", 3, [3]),
    ("1", 4, [1, 1, 1, 1]),
    ("1,2", 3, [1, 2]),
    ("1,2", 6, [1, 2, 2, 1]),
    ("1,2,25%", 20, [1, 2, 5, 5, 5, 2]),
    ("25%", 3, [1, 1, 1]),  # rounded down, but at least 1
    ("50%", 5, [2, 2, 1]),
    ("100%", 7, [7]),
    ("10", 3, [3]),
    (" 1 , 30% ", 10, [1, 3, 3, 3]),
    ("1,2", 0, []),
])
def test_batch_sizes(serial, total, expected):
    assert sizes(serial, total) == expected
    assert sum(expected) == total


def test_batches_keep_the_host_order():
    assert rollout.batches(list("abcdef"), rollout.parse_serial("1,2")) == [["a"], ["b", "c"], ["d", "e"], ["f"]]
    assert rollout.batches(list("abc"), None) == [["a", "b", "c"]]


@pytest.mark.parametrize("bad", ["0", "1,0", "abc", "1,,2", "-1", "1.5", "150%", "2x", "%", "0%"])
def test_bad_serial_names_the_flag(bad):
    with pytest.raises(InputError, match="--serial") as exc:
        rollout.parse_serial(bad)
    assert exc.value.exit_code == 2


@pytest.mark.parametrize("bad", ["x", "-1", "1.5", "101%", "1,2"])
def test_bad_max_fail_names_the_flag(bad):
    with pytest.raises(InputError, match="--max-fail"):
        rollout.parse_max_fail(bad)


@pytest.mark.parametrize("bad", ["x", "0", "-3", "nan", "inf"])
def test_bad_host_timeout_names_the_flag(bad):
    with pytest.raises(InputError, match="--host-timeout"):
        rollout.parse_timeout(bad)


def test_host_timeout():
    assert rollout.parse_timeout(None) is None and rollout.parse_timeout("90") == 90.0


@pytest.mark.parametrize(("max_fail", "total", "failed", "stop"), [
    (None, 10, 0, False), (None, 10, 1, True),  # default 0: the first failure stops it
    ("2", 10, 2, False), ("2", 10, 3, True),
    ("25%", 10, 2, False), ("25%", 10, 3, True),  # 25% of 10 = 2 (rounded down)
    ("10%", 5, 1, True),  # 10% of 5 = 0
    ("100%", 4, 4, False),
])
def test_stop_once_more_than_max_fail_failed(max_fail, total, failed, stop):
    assert rollout.should_stop(failed, rollout.parse_max_fail(max_fail), total) is stop


def test_stop_reason():
    assert rollout.stop_reason(3, Amount(25, True), 10) == "3 hosts failed, more than --max-fail 25% of 10 = 2"
    assert rollout.stop_reason(1, Amount(0), 3) == "1 host failed, more than --max-fail 0"


LLAMA = """name: llama
model: {path: /m}
flags: {tp-size: 2}
ladder:
  - {name: greedy, flags: {mem-fraction-static: 0.99}}
  - name: fast
  - name: safe
"""


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state" / "known-good.json"


# ---------------------------------------------------------------------- the batch loop, with a fake deployer


class Fake:
    """Stands in for Deployer.run: outcome per host, a log of start/end times."""

    def __init__(self, outcomes: dict[str, str], delay: float = 0.05, slow: dict[str, float] | None = None,
                 results: dict[str, DeployResult] | None = None, meet: tuple[str, ...] = ()):
        self.outcomes, self.delay, self.slow, self.results = outcomes, delay, slow or {}, results or {}
        self.meet, self.met = set(meet), threading.Barrier(max(len(meet), 1))  # `meet`: these run at once
        self.log: list[tuple[str, str, float]] = []
        self.lock = threading.Lock()

    def run(self, deployer, dry_run=False, force=False):
        name = deployer.host.name
        with self.lock:
            self.log.append(("start", name, time.monotonic()))
        deployer.progress("probing")
        if name in self.meet:
            self.met.wait(timeout=30)  # raises where the others never came: they ran one after the other
        time.sleep(self.slow.get(name, self.delay))
        with self.lock:
            self.log.append(("end", name, time.monotonic()))
        if name in self.results:
            return self.results[name]
        status = self.outcomes.get(name, "ok")
        return DeployResult(name, status, release=f"rel-{name}", config={"rung": "fast"},
                            attempts=[Attempt("fast", "READY" if status == "ok" else "CUDA_OOM", "e", 0.1)],
                            error=None if status == "ok" else f"{name}: every rung failed")


@pytest.fixture
def fake(monkeypatch, tmp_path, state):
    (tmp_path / "site/playbooks").mkdir(parents=True)
    (tmp_path / "site/playbooks/llama.yaml").write_text(LLAMA)  # the site's own playbook, as deploy reads it
    monkeypatch.setenv("FLEET_SITE", str(tmp_path / "site"))

    def install(outcomes=None, **kw):
        Scripted.fake = Fake(outcomes or {}, **kw)
        return Scripted.fake

    return install


class Scripted(Deployer):
    """What deploys one host here (deploy's `deployer_of`): the test's Fake."""

    fake: Fake

    def run(self, dry_run=False, force=False):
        return self.fake.run(self)


def hosts(n: int) -> list[Host]:
    return [Host(name=f"h{i}", address=f"10.0.0.{i + 1}", port=None, user=None, become=False, identity_file=None,
                 known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                 source=Path("hosts.yaml")) for i in range(n)]


def run(capsys, n, **kw) -> tuple[int, dict]:
    rc = deploy_cmd.deploy(hosts(n), "llama", ConnectOptions(), True, False, False, deployer_of=Scripted, **kw)
    return rc, json.loads(capsys.readouterr().out)


def test_batches_run_one_after_the_other(fake, capsys):
    f = fake(meet=("h1", "h2"))  # one batch runs in parallel: h1 and h2 each wait for the other to have started
    rc, data = run(capsys, 5, serial="1,2")
    assert rc == 0 and [h["status"] for h in data["hosts"]] == ["ok"] * 5
    assert [b["hosts"] for b in data["batches"]] == [["h0"], ["h1", "h2"], ["h3", "h4"]]
    ends = {n: t for e, n, t in f.log if e == "end"}
    starts = {n: t for e, n, t in f.log if e == "start"}
    assert ends["h0"] <= min(starts["h1"], starts["h2"])
    assert max(ends["h1"], ends["h2"]) <= min(starts["h3"], starts["h4"])


def test_first_failure_stops_the_rollout_and_skips_the_rest(fake, capsys):
    f = fake({"h0": "rolled_back"})
    rc, data = run(capsys, 4, serial="1,2")
    assert rc == 1
    assert [h["status"] for h in data["hosts"]] == ["rolled_back", "skipped", "skipped", "skipped"]
    assert {n for _, n, _ in f.log} == {"h0"}  # nobody else was contacted
    assert [b["status"] for b in data["batches"]] == ["failed", "skipped", "skipped"]
    assert data["stopped"].startswith("1 host failed, more than --max-fail 0 after batch 1 of 3")
    assert "not started" in data["hosts"][1]["error"]


def test_a_failing_batch_finishes_before_the_rollout_stops(fake, capsys):
    fake({"h1": "failed"})
    rc, data = run(capsys, 5, serial="1,2")
    assert [h["status"] for h in data["hosts"]] == ["ok", "failed", "ok", "skipped", "skipped"]


def test_max_fail_lets_the_rollout_go_on(fake, capsys):
    fake({"h0": "failed", "h2": "failed"})
    rc, data = run(capsys, 5, serial="1", max_fail="1")
    assert rc == 1 and [h["status"] for h in data["hosts"]] == ["failed", "ok", "failed", "skipped", "skipped"]
    rc, data = run(capsys, 5, serial="1", max_fail="40%")
    assert [h["status"] for h in data["hosts"]] == ["failed", "ok", "failed", "ok", "ok"]


def test_host_timeout_marks_the_host_failed_and_stops(fake, capsys):
    f = fake(slow={"h0": 30})
    rc, data = run(capsys, 3, serial="1", host_timeout="0.3")
    assert ("end", "h0") not in {(e, n) for e, n, _ in f.log}  # it stopped waiting: h0's deploy still runs
    assert rc == 1 and data["hosts"][0]["status"] == "failed" and "timed out after 0.3s" in data["hosts"][0]["error"]
    assert [h["status"] for h in data["hosts"][1:]] == ["skipped", "skipped"]


def test_host_timeout_waits_as_long_again_then_abandons_a_deploy_that_never_ends(fake, capsys):
    fake(slow={"h0": 3600})  # h0's thread never ends within the test: the run must not wait for it
    start = time.monotonic()
    rc = deploy_cmd.deploy(hosts(2), "llama", ConnectOptions(), True, False, False, host_timeout="0.3",
                           deployer_of=Scripted)
    assert time.monotonic() - start < 3
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert rc == 1 and "timed out after 0.3s" in data["hosts"][0]["error"] and data["hosts"][1]["status"] == "ok"
    assert "fleet waits up to 0.3s more" in err and "abandoned: h0: still deploying when fleet exited" in err


def test_the_next_batch_never_waits_for_the_thread_of_a_host_given_up_on(fake, capsys):
    fake(slow={"h0": 3600})  # batches of one: the pool has one thread, and h0's never comes back
    start = time.monotonic()
    rc, data = run(capsys, 3, serial="1", max_fail="1", host_timeout="0.5")
    assert time.monotonic() - start < 5
    assert [h["status"] for h in data["hosts"]] == ["failed", "ok", "ok"]


def test_bad_flags_fail_before_the_playbook_or_a_host(fake, capsys):
    f = fake()
    with pytest.raises(InputError, match="--serial"):
        deploy_cmd.deploy(hosts(3), "llama", ConnectOptions(), True, False, False, serial="0", deployer_of=Scripted)
    with pytest.raises(InputError, match="--max-fail"):
        deploy_cmd.deploy(hosts(3), "llama", ConnectOptions(), True, False, False, max_fail="lots",
                          deployer_of=Scripted)
    assert f.log == [] and capsys.readouterr().out == ""


def test_summary_and_board_render(fake, capsys):
    fake({"h1": "failed"})
    rc = deploy_cmd.deploy(hosts(3), "llama", ConnectOptions(), False, False, False, serial="1,1",
                           deployer_of=Scripted)
    out = capsys.readouterr().out
    assert rc == 1 and "rollout" in out and "3 hosts in 3 batches" in out and "skipped" in out
    board = Board([("h0", 1), ("h1", 2)], 2)
    board.update("h0", "deploying", "[fast] phase weight_load (after 1.0s in start)")
    text = Console(record=True, width=120)
    text.print(board.table())
    plain = text.export_text()
    assert "deploying" in plain and "phase weight_load" in plain and "waiting" in plain and "1/2" in plain


# ---------------------------------------------------------------------- the canary


@pytest.mark.parametrize(("serial", "batches", "canary"), [
    ("1,25%", 3, True), ("1,2", 2, True), ("1", 4, False), ("1,25%", 1, False), (None, 1, False),
    ("1,1", 4, False), ("2,2", 2, False), ("1, 1 ,1", 3, False),  # the last size repeats: `1,1` is `1`
    ("1,25%,25%", 3, True), ("1,1,25%", 3, True), ("25%,25%", 4, False), ("1,1%", 3, True)])
def test_a_first_size_of_its_own_makes_the_first_batch_a_canary(serial, batches, canary):
    assert rollout.is_canary(rollout.parse_serial(serial), batches) is canary


def test_stop_after_says_which_canary_failed_and_which_batches_never_started():
    assert rollout.stop_after(1, 3, True, [], 0, Amount(1), 9) is None
    assert rollout.stop_after(1, 3, True, ["h0"], 1, Amount(1), 9) == (
        "--max-fail 1 does not excuse a canary after batch 1 of 3 (the canary: h0 failed); batches 2-3 not started")
    assert rollout.stop_after(1, 2, True, ["h0"], 1, Amount(0), 9) == (
        "1 host failed, more than --max-fail 0 after batch 1 of 2 (the canary: h0 failed); batch 2 not started")
    assert rollout.stop_after(2, 3, True, ["h3"], 1, Amount(1), 9) is None  # after the canary, --max-fail decides
    assert rollout.stop_after(3, 3, False, ["h8"], 2, Amount(1), 9) == "2 hosts failed, more than --max-fail 1 after " \
        "batch 3 of 3"


def test_a_canary_that_fails_stops_the_rollout_though_max_fail_would_allow_it(fake, capsys):
    f = fake({"h0": "rolled_back"})
    rc, data = run(capsys, 5, serial="1,2", max_fail="2")
    assert rc == 1 and data["canary"] is True
    assert [h["status"] for h in data["hosts"]] == ["rolled_back", "skipped", "skipped", "skipped", "skipped"]
    assert {n for _, n, _ in f.log} == {"h0"}  # nobody else was contacted
    assert [(b["status"], b.get("canary")) for b in data["batches"]] == [("failed", True), ("skipped", None),
                                                                         ("skipped", None)]
    assert data["stopped"] == ("--max-fail 2 does not excuse a canary after batch 1 of 3 (the canary: h0 failed); "
                               "batches 2-3 not started")
    assert "not started: --max-fail 2 does not excuse a canary" in data["hosts"][1]["error"]


def test_after_a_canary_that_served_max_fail_decides_as_before(fake, capsys):
    fake({"h1": "failed"})
    rc, data = run(capsys, 5, serial="1,2", max_fail="1")
    assert rc == 1 and [h["status"] for h in data["hosts"]] == ["ok", "failed", "ok", "ok", "ok"]
    assert data["stopped"] is None and data["batches"][0]["canary"] is True


def upgraded(name: str, *outcomes: str, status: str = "ok", before: str = "0.5.9") -> DeployResult:
    """A deploy of sglang 0.5.23 over `before`, its attempts one rung each (greedy, fast, safe) with these outcomes."""
    rungs = ["greedy", "fast", "safe"]
    return DeployResult(name, status, release=f"rel-{name}", versions={"sglang": "0.5.23"},
                        versions_before={"sglang": before} if before else {},
                        attempts=[Attempt(rungs[i], o, "e", 0.1) for i, o in enumerate(outcomes)])


def test_an_upgrade_that_served_only_by_falling_back_says_how():
    assert upgraded("h0", "CUDA_OOM", "PERF_REGRESSION", "READY").fell_back() == (
        "served on rung safe after greedy (CUDA_OOM), fast (PERF_REGRESSION) failed")
    assert upgraded("h0", "READY").fell_back() is None  # its first rung served
    assert upgraded("h0", "CUDA_OOM", status="rolled_back").fell_back() is None  # did not serve: failed already


def test_stop_after_a_canary_that_fell_back_names_it_though_no_host_failed():
    fell = ["h0 served on rung safe after greedy (CUDA_OOM) failed"]
    assert rollout.stop_after(1, 3, True, [], 0, Amount(1), 9, fell) == (
        "a canary that fell back or deployed nothing is no change that passed after batch 1 of 3 (the canary: h0 "
        "served on rung safe after greedy (CUDA_OOM) failed); batches 2-3 not started")
    assert rollout.stop_after(1, 3, True, ["h1"], 1, Amount(1), 9, fell) == (
        "--max-fail 1 does not excuse a canary after batch 1 of 3 (the canary: h1 failed; h0 served on rung safe "
        "after greedy (CUDA_OOM) failed); batches 2-3 not started")
    assert rollout.stop_after(2, 3, True, [], 0, Amount(1), 9, fell) is None  # only the canary's batch
    assert rollout.stop_after(1, 3, False, [], 0, Amount(1), 9, fell) is None  # no canary: --max-fail decides


def test_a_canary_that_served_an_upgrade_only_on_a_later_rung_stops_the_rollout(fake, capsys):
    f = fake(results={"h0": upgraded("h0", "CUDA_OOM", "READY")})
    rc, data = run(capsys, 5, serial="1,2", max_fail="2")
    assert rc == 1 and [h["status"] for h in data["hosts"]] == ["ok", "skipped", "skipped", "skipped", "skipped"]
    assert {n for _, n, _ in f.log} == {"h0"}  # nobody else was contacted
    assert data["batches"][0] == {**data["batches"][0], "status": "failed", "failed": [], "canary": True,
                                  "fell_back": ["h0 served on rung fast after greedy (CUDA_OOM) failed"]}
    assert data["stopped"] == ("a canary that fell back or deployed nothing is no change that passed after batch 1 "
                               "of 3 (the canary: h0 served on rung fast after greedy (CUDA_OOM) failed); "
                               "batches 2-3 not started")


def test_a_host_that_fell_back_after_the_canary_is_left_to_max_fail(fake, capsys):
    fake(results={"h1": upgraded("h1", "CUDA_OOM", "READY")})
    rc, data = run(capsys, 3, serial="1,2")
    assert rc == 0 and data["stopped"] is None and [h["status"] for h in data["hosts"]] == ["ok"] * 3
    assert "fell_back" not in data["batches"][1]
    fake(results={"h0": upgraded("h0", "CUDA_OOM", "READY")})
    rc, data = run(capsys, 3, serial="1,1")  # `1,1` is `1`: no canary
    assert rc == 0 and data["canary"] is False and data["stopped"] is None


def test_a_change_of_the_playbook_alone_that_served_only_by_falling_back_fell_back():
    """Issue 52, 3: the versions alike (the change is the playbook: a rung given mem-fraction-static 0.97), or a
    first deploy: a rung that failed before the one that served is still a fall-back."""
    assert upgraded("h0", "CUDA_OOM", "READY", before="0.5.23").fell_back() == (
        "served on rung fast after greedy (CUDA_OOM) failed")
    assert upgraded("h0", "PREFLIGHT", "READY", before="").fell_back() == (
        "served on rung fast after greedy (PREFLIGHT) failed")


def test_a_canary_whose_playbook_change_fell_back_stops_the_rollout(fake, capsys):
    f = fake(results={"h0": upgraded("h0", "CUDA_OOM", "READY", before="0.5.23")})
    rc, data = run(capsys, 3, serial="1,2", max_fail="2")
    assert rc == 1 and [h["status"] for h in data["hosts"]] == ["ok", "skipped", "skipped"]
    assert {n for _, n, _ in f.log} == {"h0"}
    assert data["stopped"] == ("a canary that fell back or deployed nothing is no change that passed after batch 1 "
                               "of 2 (the canary: h0 served on rung fast after greedy (CUDA_OOM) failed); batch 2 "
                               "not started")


def test_a_canary_that_was_unchanged_deployed_nothing_and_stops_the_rollout(fake, capsys):
    """Issue 52, 4: `unchanged` serves, but the change never ran on the canary."""
    same = DeployResult("h0", "unchanged", release="rel-h0", config={"rung": "fast"})
    f = fake(results={"h0": same})
    rc, data = run(capsys, 3, serial="1,2", max_fail="2")
    assert rc == 1 and [h["status"] for h in data["hosts"]] == ["unchanged", "skipped", "skipped"]
    assert {n for _, n, _ in f.log} == {"h0"}
    assert data["batches"][0]["status"] == "failed"
    assert data["stopped"] == ("a canary that fell back or deployed nothing is no change that passed after batch 1 "
                               "of 2 (the canary: h0 unchanged (release rel-h0 already served this playbook: "
                               "nothing was tried)); batch 2 not started")
    fake(results={"h1": DeployResult("h1", "unchanged", release="rel-h1", config={"rung": "fast"})})
    rc, data = run(capsys, 3, serial="1,2")  # after the canary, unchanged serves as before
    assert rc == 0 and data["stopped"] is None


def test_a_canary_the_judge_failed_says_which_host_was_not_put_back():
    """h-new18: a canary its judge failed whose put-back failed too (its line: `not put back: ... roll back with
    --playbook`) was summed up as `its hosts were put back`, while it kept serving the failed release."""
    from fleet.multihost import rolling

    judged = ["p99 latency worse than the release before"]
    assert rollout.stop_after(1, 2, True, [], 1, Amount(1), 4, [], judged).endswith(
        "(the canary: p99 latency worse than the release before); its hosts were put back; batch 2 not started")
    assert rollout.stop_after(1, 2, True, [], 1, Amount(1), 4, [], judged, ["sbx1"]).endswith(
        "(the canary: p99 latency worse than the release before); sbx1 not put back (see its line); batch 2 not "
        "started")
    served = DeployResult("sbx1", "ok", release="rel-new")

    def back(ok: bool):
        return lambda host, say, hooks: DeployResult(host.name, "ok" if ok else "failed", release="rel-old",
                                                     error=None if ok else "sbx1: the unit did not start")

    host = Host(name="sbx1", address="10.0.0.1", port=None, user=None, become=False, identity_file=None,
                known_hosts=None, ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(),
                source=Path("x.yaml"))
    kept = rolling.judged_back(host, served, judged, back(False), None, lambda h: print)
    put = rolling.judged_back(host, served, judged, back(True), None, lambda h: print)
    left = rolling.judged_back(host, served, judged, None, None, lambda h: print)
    assert [rolling.put_back_on(r) for r in (kept, put, left)] == [False, True, False], (kept, put, left)
