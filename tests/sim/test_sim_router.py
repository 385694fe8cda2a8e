"""The simulated sglang_router: round-robin over healthy workers through real HTTP, its own /health, workers
added and removed at runtime, a dead worker skipped, and the API key as the real router handles it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from sim_helpers import DENSE_MODEL
from simhost import free_port


class RouterProc:
    def __init__(self, host, *args: str) -> None:
        self.port = free_port()
        self.log_path = host.root / f"router-{self.port}.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1",
                                          "--port", str(self.port), *args], stdout=log, stderr=subprocess.STDOUT,
                                         env=host.env(), cwd=host.root)

    def log(self) -> str:
        return Path(self.log_path).read_text()

    def request(self, method: str, path: str, body: dict | None = None, headers: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                     headers={"content-type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, e.read()
        except OSError:
            return None, b""

    def wait_up(self, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log()
            if self.request("GET", "/health")[0] == 200:
                return
            time.sleep(0.05)
        raise AssertionError(f"router not up after {timeout}s:\n{self.log()}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(timeout=15)


@pytest.fixture
def routers():
    started: list[RouterProc] = []
    yield started
    for r in started:
        r.stop()


def served(server) -> int:
    """How many /generate requests a worker answered, from its own access log."""
    return server.log().count('"POST /generate HTTP/1.1" 200')


def start_workers(make_host, n: int, *args: str):
    host = make_host("rtx5090-x2-workstation")
    workers = [host.start("--model-path", DENSE_MODEL, *args, env={"CUDA_VISIBLE_DEVICES": str(i % 2)})
               for i in range(n)]
    for w in workers:
        w.wait_ready()
    return host, workers


def test_round_robin_over_workers_then_a_dead_worker_is_skipped(make_host, routers):
    host, workers = start_workers(make_host, 2)
    before = [served(w) for w in workers]  # the warm-up generation
    router = RouterProc(host, "--worker-urls", *(w.url for w in workers), "--policy", "round_robin",
                        "--health-check-interval-secs", "1", "--health-failure-threshold", "1")
    routers.append(router)
    router.wait_up()
    assert router.request("GET", "/readiness")[0] == 200
    for _ in range(4):
        status, body = router.request("POST", "/generate", {"text": "2+2=", "sampling_params": {
            "max_new_tokens": 4, "temperature": 0}})
        assert status == 200 and json.loads(body)["text"].strip().startswith("4")
    assert [served(w) - b for w, b in zip(workers, before, strict=True)] == [2, 2]
    log = router.log()
    assert "Starting router on 127.0.0.1:" in log and "policy: RoundRobin" in log
    assert "All 2 workers are healthy" in log

    workers[0].stop()
    # the health checker marks it unhealthy; until then the retry moves on to the live worker
    for _ in range(4):
        status, body = router.request("POST", "/v1/completions", {"model": DENSE_MODEL, "prompt": "2+2=",
                                                                  "max_tokens": 4})
        assert status == 200, body
    assert served(workers[1]) - before[1] == 2  # /v1/completions is not /generate: count it in the log
    assert workers[1].log().count('"POST /v1/completions HTTP/1.1" 200') == 4
    deadline = time.monotonic() + 10
    while {w["url"]: w["is_healthy"] for w in json.loads(router.request("GET", "/workers")[1])["workers"]} != \
            {workers[0].url: False, workers[1].url: True}:
        assert time.monotonic() < deadline, router.log()
        time.sleep(0.1)
    assert f"Worker {workers[0].url} marked unhealthy" in router.log()


def test_add_and_remove_workers_at_runtime_and_health_says_nothing_about_workers(make_host, routers):
    host, workers = start_workers(make_host, 2)
    router = RouterProc(host, "--policy", "round_robin")
    routers.append(router)
    router.wait_up()
    assert router.request("GET", "/health")[0] == 200
    assert router.request("GET", "/readiness")[0] == 503
    status, body = router.request("POST", "/generate", {"text": "2+2="})
    assert status == 503 and b"No available workers" in body

    status, body = router.request("POST", f"/add_worker?url={workers[0].url}")
    assert (status, body.decode()) == (200, f"Worker {workers[0].url} added successfully")
    assert router.request("POST", f"/add_worker?url={workers[0].url}") == \
        (400, f"Worker {workers[0].url} already exists".encode())
    dead = f"http://127.0.0.1:{free_port()}"
    # a worker that never becomes healthy is refused (after --worker-startup-timeout-secs)
    quick = RouterProc(host, "--worker-startup-timeout-secs", "1", "--worker-startup-check-interval", "1")
    routers.append(quick)
    quick.wait_up()
    status, body = quick.request("POST", f"/add_worker?url={dead}")
    assert status == 400 and body.decode().startswith("Health check failed")
    assert json.loads(quick.request("GET", "/list_workers")[1]) == {"urls": []}

    assert router.request("POST", f"/add_worker?url={workers[1].url}")[0] == 200
    assert json.loads(router.request("GET", "/list_workers")[1]) == {"urls": [w.url for w in workers]}
    assert router.request("POST", f"/remove_worker?url={workers[0].url}") == \
        (200, f"Worker {workers[0].url} removed successfully".encode())
    assert router.request("POST", f"/remove_worker?url={workers[0].url}") == \
        (400, f"Worker {workers[0].url} not found".encode())
    before = served(workers[0]), served(workers[1])
    for _ in range(3):
        assert router.request("POST", "/generate", {"text": "2+2="})[0] == 200
    assert (served(workers[0]) - before[0], served(workers[1]) - before[1]) == (0, 3)


def test_router_waits_for_its_initial_workers_and_fails_when_one_never_comes(make_host, routers):
    host = make_host("rtx5090-x2-workstation")
    dead = f"http://127.0.0.1:{free_port()}"
    router = RouterProc(host, "--worker-urls", dead, "--worker-startup-timeout-secs", "1",
                        "--worker-startup-check-interval", "1")
    assert router.proc.wait(timeout=20) == 1
    log = router.log()
    assert "Failed to initialize workers: Workers failed to become healthy after 1s" in log
    assert router.request("GET", "/health")[0] is None  # the port was never bound


def test_api_key_guards_the_router_and_is_passed_to_its_workers(make_host, routers):
    host, workers = start_workers(make_host, 2, "--api-key", "k3y")
    router = RouterProc(host, "--worker-urls", workers[0].url, "--policy", "round_robin", "--api-key", "k3y")
    routers.append(router)
    router.wait_up()
    body = {"text": "2+2=", "sampling_params": {"max_new_tokens": 4}}
    assert router.request("POST", "/generate", body)[0] == 401
    assert router.request("POST", f"/add_worker?url={workers[1].url}")[0] == 401
    assert router.request("GET", "/health")[0] == 200  # public
    auth = {"authorization": "Bearer k3y"}
    assert router.request("POST", "/generate", body, headers=auth)[0] == 200  # inherited key reaches worker 0
    # a worker added without its key: the router warns, and the worker refuses what the router sends it
    assert router.request("POST", f"/add_worker?url={workers[1].url}", headers=auth)[0] == 200
    assert f"Adding worker {workers[1].url} without API key" in router.log()
    assert router.request("POST", f"/remove_worker?url={workers[0].url}", headers=auth)[0] == 200
    # the client's own header is passed on as-is to a worker without a key of its own: right key, it serves
    assert router.request("POST", "/generate", body, headers=auth)[0] == 200
    assert router.request("POST", f"/remove_worker?url={workers[1].url}", headers=auth)[0] == 200
    assert router.request("POST", f"/add_worker?url={workers[1].url}&api_key=wrong", headers=auth)[0] == 200
    assert router.request("POST", "/generate", body, headers=auth)[0] == 401  # the worker's key is used instead
