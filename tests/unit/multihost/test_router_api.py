"""Which worker API each real sglang-router release speaks and what its answers mean (fleet.multihost.router_api),
against what the real wheels answered (tests/fixtures/router)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.host import curl as hostcurl
from fleet.multihost import router_api
from fleet.multihost.router_api import Api, Worker

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "router"
ONE, TWO = "http://127.0.0.1:41001", "http://127.0.0.1:41002"


def answer(version: str, name: str) -> tuple[int | None, str]:
    return hostcurl.parse((FIXTURES / version / f"{name}.txt").read_text())


@pytest.mark.parametrize(("version", "api"), [("0.1.9", Api.LEGACY), ("0.2.0", Api.WORKERS), ("0.2.2", Api.WORKERS),
                                              ("0.3.2", Api.WORKERS), ("0.3.2\n", Api.WORKERS), ("", None),
                                              ("Traceback (most recent call last):", None)])
def test_the_release_says_which_api(version, api):
    assert router_api.api_of(version) is api


@pytest.mark.parametrize("version", ["0.1.9", "0.2.0", "0.3.2"])
def test_each_release_lists_its_workers_in_the_api_fleet_picks_for_it(version):
    api = router_api.api_of(version)
    assert api is not None
    before, after = (router_api.workers(api, *answer(version, f"get-{api.listing[1:]}{s}")) for s in ("", "-two"))
    assert before is not None and after is not None
    assert [w.url for w in before] == [ONE] and sorted(w.url for w in after) == [ONE, TWO]


def test_the_newest_release_has_no_legacy_api_and_the_oldest_no_workers_api():
    assert answer("0.3.2", "get-list_workers") == (404, "") and answer("0.3.2", "post-add_worker") == (404, "")
    assert answer("0.1.9", "get-workers") == (404, "") and answer("0.1.9", "post-workers") == (404, "")
    assert router_api.workers(Api.LEGACY, *answer("0.3.2", "get-list_workers")) is None


def test_adding_is_taken_when_queued_and_done_only_when_listed():
    code, _ = answer("0.3.2", "post-workers")
    assert code == 202 and code in router_api.DONE
    listed = router_api.workers(Api.WORKERS, *answer("0.3.2", "get-workers"))
    assert not router_api.listed(listed, TWO) and router_api.listed(listed, ONE)
    assert router_api.listed(router_api.workers(Api.WORKERS, *answer("0.3.2", "get-workers-two")), TWO)
    assert not router_api.listed(None, ONE)


def test_removing_names_the_worker_by_its_id_in_the_workers_api_and_by_its_url_before():
    found = router_api.workers(Api.WORKERS, *answer("0.3.2", "get-workers-two"))
    assert found is not None
    two = next(w for w in found if w.url == TWO)
    assert len(two.id) == 36  # 0.3.x: a UUID
    assert router_api.remove(Api.WORKERS, two) == router_api.Call("DELETE", f"/workers/{two.id}")
    old = router_api.workers(Api.WORKERS, *answer("0.2.0", "get-workers"))
    assert old == [Worker(ONE, ONE)]  # 0.2.0: the id is the URL, quoted in the path
    assert router_api.remove(Api.WORKERS, old[0]).path == "/workers/http%3A%2F%2F127.0.0.1%3A41001"
    assert router_api.remove(Api.LEGACY, Worker(ONE, ONE)) == router_api.Call("POST", "/remove_worker",
                                                                               query={"url": ONE})


def test_a_keyed_router_gives_an_added_worker_its_key_where_its_api_takes_it():
    assert router_api.add(Api.LEGACY, ONE, True).key_in == "query"
    assert router_api.add(Api.WORKERS, ONE, True) == router_api.Call("POST", "/workers", body={"url": ONE},
                                                                      key_in="body")
    assert router_api.add(Api.WORKERS, ONE, False).key_in is None


@pytest.mark.parametrize("body", ['{"workers": [{"url": 7, "id": "x"}, "y", {"url": "http://a:1"}]}', "[]", "nope"])
def test_a_listing_of_another_shape_lists_nothing_it_cannot_read(body):
    found = router_api.workers(Api.WORKERS, 200, body)
    assert found in (None, [])
