"""The router report (fleet.multihost.router_report): `--json`'s "router" object keeps, for each kind of run, the
keys and order it had when the report was a dict (the strings below were printed by main before the change)."""

from __future__ import annotations

from pydantic_core import to_json

from fleet.multihost.router_report import RouterEvent, RouterReport, RouterRun, worker_list
from fleet.outcomes import DeployStatus


def _printed(report: RouterReport) -> str:
    return to_json(report.to_json(), fallback=str).decode()  # as fleet.cli.print_json writes it, unindented


def test_a_deploy_s_report_prints_as_before():
    report = RouterReport(RouterRun.DEPLOY, "sbx0", DeployStatus.FAILED, "sglang-router", 30080, "round_robin",
                          error="sbx0: no replica serves; the router was left as it was", recovered=())
    assert _printed(report) == (
        '{"host":"sbx0","unit":"sglang-router","port":30080,"policy":"round_robin","status":"failed","release":null,'
        '"workers":[],"error":"sbx0: no replica serves; the router was left as it was","evidence":null,"events":[],'
        '"recovered":[]}')


def test_a_rollback_s_report_prints_as_before():
    report = RouterReport(RouterRun.ROLLBACK, "sbx0", DeployStatus.FAILED, "sglang-router", 30080, release="r2",
                          error="sbx0: router release r1 did not serve: HANG no answer in 30 s; back on router "
                                "release r2, serving", evidence="2+2= -> 4", recovered=())
    assert _printed(report) == (
        '{"host":"sbx0","unit":"sglang-router","port":30080,"status":"failed","release":"r2","workers":[],'
        '"error":"sbx0: router release r1 did not serve: HANG no answer in 30 s; back on router release r2, '
        'serving","evidence":"2+2= -> 4","recovered":[]}')


def test_a_run_that_never_took_the_lock_has_no_recovered_key_and_events_print_whole():
    event = RouterEvent(1.5, "h1", "removed", "http://10.0.0.2:30000")
    report = RouterReport(RouterRun.INTERRUPTED, "r", DeployStatus.FAILED, events=(event,), error="cut")
    assert _printed(report) == ('{"host":"r","status":"failed","workers":[],"events":[{"t":1.5,"host":"h1",'
                                '"step":"removed","detail":"http://10.0.0.2:30000"}],"error":"cut"}')


def test_dry_runs_print_their_planned_unit_and_a_failed_one_its_error():
    dry = RouterReport(RouterRun.DRY_RUN, "r", DeployStatus.DRY_RUN, "sglang-router",
                       config={"workers": ["http://a:1"]}, diff="+x\n")
    assert _printed(dry) == ('{"host":"r","unit":"sglang-router","status":"dry-run","config":{"workers":'
                             '["http://a:1"]},"diff":"+x\\n","release":null,"unchanged":false,"evidence":null,'
                             '"error":null}')  # what the deploy would keep, and its preflight, after the keys it had
    assert dry.shown_workers() == ["http://a:1"]
    failed = RouterReport(RouterRun.DRY_RUN_FAILED, "r", DeployStatus.FAILED, error="r: unreachable")
    assert _printed(failed) == '{"host":"r","status":"failed","error":"r: unreachable"}'


def test_a_hand_edited_release_s_workers_keep_only_texts():
    assert worker_list(["http://a:1", 7, None]) == ("http://a:1",)
    assert worker_list("http://a:1") == () and worker_list(None) == ()
