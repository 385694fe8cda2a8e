"""SIMULATED sgl-router HTTP server (regular mode): a registry of workers, a policy, a health checker and a
proxy, over real HTTP. Standard library only; behaviour as sandbox/sim/README.md's router table says.

Routes as sgl-router's server.rs builds them: protected (/generate, /v1/completions, /v1/chat/completions),
public (/health, /liveness, /readiness, /health_generate, /v1/models, /get_model_info, /get_server_info) and
admin (/add_worker, /remove_worker, /list_workers, /workers). With --api-key, protected and admin routes need
`Authorization: Bearer <key>`; workers given on the command line inherit the router's key, workers added
later carry the `api_key` given to /add_worker (or none).
"""

from __future__ import annotations

import http.client
import json
import random
import signal
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sglang_router.router_args import RouterArgs

RETRYABLE = {408, 429, 500, 502, 503, 504}  # sgl-router's is_retryable_status
POLICY_NAMES = {"random": "Random", "round_robin": "RoundRobin", "cache_aware": "CacheAware",
                "power_of_two": "PowerOfTwo"}
NO_WORKERS = "No available workers (all circuits open or unhealthy)"


def log(level: str, target: str, message: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {level:>5} sglang_router_rs::{target}: {message}",
          file=sys.stderr, flush=True)


@dataclass
class Worker:
    url: str
    api_key: str | None
    healthy: bool = True
    fails: int = 0
    oks: int = 0
    load: int = 0  # requests in flight through the router

    @property
    def address(self) -> tuple[str, int]:
        parts = urllib.parse.urlsplit(self.url)
        return parts.hostname or "127.0.0.1", parts.port or 80


class Registry:
    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.lock = threading.Lock()
        self.workers: list[Worker] = []
        self._next = 0

    def get(self, url: str) -> Worker | None:
        with self.lock:
            return next((w for w in self.workers if w.url == url), None)

    def add(self, worker: Worker) -> None:
        with self.lock:
            self.workers.append(worker)

    def remove(self, url: str) -> Worker | None:
        with self.lock:
            found = next((w for w in self.workers if w.url == url), None)
            if found:
                self.workers.remove(found)
            return found

    def snapshot(self) -> list[Worker]:
        with self.lock:
            return list(self.workers)

    def pick(self) -> Worker | None:
        """The policy's choice among healthy workers; None when there is none."""
        with self.lock:
            healthy = [w for w in self.workers if w.healthy]
            if not healthy:
                return None
            if self.policy == "random":
                chosen = random.choice(healthy)
            elif self.policy == "round_robin":
                chosen = healthy[self._next % len(healthy)]
                self._next += 1
            else:  # cache_aware / power_of_two, simplified: the least loaded, ties in round-robin order
                start = self._next % len(healthy)
                self._next += 1
                order = healthy[start:] + healthy[:start]
                chosen = min(order, key=lambda w: w.load)
            chosen.load += 1
            return chosen

    def done(self, worker: Worker) -> None:
        with self.lock:
            worker.load = max(0, worker.load - 1)


def check_health(worker: Worker, endpoint: str, timeout: float) -> bool:
    host, port = worker.address
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", endpoint)
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


class Router:
    def __init__(self, args: RouterArgs) -> None:
        self.args = args
        self.registry = Registry(args.policy)
        self.stop = threading.Event()

    # -- workers
    def wait_for_healthy_workers(self) -> str | None:
        """At start, as sgl-router's WorkerManager does: every worker healthy, or an error after the timeout."""
        timeout = self.args.worker_startup_timeout_secs
        log("INFO", "core::worker_manager", f"Waiting for workers to become healthy (timeout: {timeout}s)")
        workers = self.registry.snapshot()
        if not workers:
            log("INFO", "core::worker_manager", "No workers to wait for, continuing")
            return None
        for w in workers:
            w.healthy = False
        start = time.monotonic()
        while True:
            for w in workers:
                if not w.healthy and check_health(w, self.args.health_check_endpoint,
                                                  self.args.health_check_timeout_secs):
                    w.healthy = True
            unhealthy = [w.url for w in workers if not w.healthy]
            if not unhealthy:
                log("INFO", "core::worker_manager",
                    f"All {len(workers)} workers are healthy: {[w.url for w in workers]}")
                return None
            if time.monotonic() - start > timeout:
                healthy = [w.url for w in workers if w.healthy]
                log("ERROR", "core::worker_manager", f"Workers failed to become healthy after {timeout}s. "
                    f"Unhealthy: {unhealthy}, Healthy: {healthy}")
                return f"Workers failed to become healthy after {timeout}s. Unhealthy: {unhealthy}"
            log("INFO", "core::worker_manager",
                f"Waiting for {len(unhealthy)} workers to become healthy. Unhealthy: {unhealthy}")
            if self.stop.wait(self.args.worker_startup_check_interval):
                return "shutting down"

    def add_worker(self, url: str, api_key: str | None) -> tuple[int, str]:
        if self.args.api_key and api_key is None:
            log("WARN", "server", f"Adding worker {url} without API key while router has API key configured. "
                "Worker will be accessible without authentication. If the worker requires the same API key as "
                "the router, please specify it explicitly.")
        worker = Worker(url, api_key)
        deadline = time.monotonic() + self.args.worker_startup_timeout_secs
        while not check_health(worker, self.args.health_check_endpoint, self.args.health_check_timeout_secs):
            if time.monotonic() > deadline or self.stop.wait(min(1.0, self.args.worker_startup_check_interval)):
                return 400, (f"Health check failed: Worker {url} failed to become healthy after "
                             f"{self.args.worker_startup_timeout_secs}s")
        if self.registry.get(url) is not None:
            return 400, f"Worker {url} already exists"
        self.registry.add(worker)
        log("INFO", "core::worker_manager", f"Added worker {url}")
        return 200, f"Worker {url} added successfully"

    def remove_worker(self, url: str) -> tuple[int, str]:
        if self.registry.remove(url) is None:
            return 400, f"Worker {url} not found"
        log("INFO", "core::worker_manager", f"Removed worker {url}")
        return 200, f"Worker {url} removed successfully"

    def health_checker(self) -> None:
        """Every --health-check-interval-secs: a worker is unhealthy after --health-failure-threshold failed
        checks in a row, healthy again after --health-success-threshold good ones; the policy skips the unhealthy."""
        a = self.args
        while not self.stop.wait(a.health_check_interval_secs):
            for w in self.registry.snapshot():
                ok = check_health(w, a.health_check_endpoint, a.health_check_timeout_secs)
                if ok:
                    w.fails, w.oks = 0, w.oks + 1
                    if not w.healthy and w.oks >= a.health_success_threshold:
                        w.healthy = True
                        log("INFO", "core::worker", f"Worker {w.url} is healthy again")
                else:
                    w.oks, w.fails = 0, w.fails + 1
                    if w.healthy and w.fails >= a.health_failure_threshold:
                        w.healthy = False
                        log("WARN", "core::worker", f"Worker {w.url} marked unhealthy after {w.fails} failed "
                            "health checks")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 2048

    def handle_error(self, request, client_address) -> None:
        exc = sys.exc_info()[1]
        if not isinstance(exc, (ConnectionError, TimeoutError)):
            log("ERROR", "server", f"request failed: {exc!r}")


PROTECTED = {"/generate", "/v1/completions", "/v1/chat/completions"}
ADMIN = {"/add_worker", "/remove_worker", "/list_workers", "/workers"}
PUBLIC_PROXIED = {"/health_generate", "/v1/models", "/get_model_info", "/get_server_info"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    router: Router

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - BaseHTTPRequestHandler's name
        return None

    def _text(self, code: int, text: str, content_type: str = "text/plain; charset=utf-8") -> None:
        body = text.encode()
        self.send_response(code)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, obj: Any) -> None:
        self._text(code, json.dumps(obj), "application/json")

    def do_GET(self) -> None:  # noqa: N802
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")

    def _route(self, method: str) -> None:
        r = self.router
        parts = urllib.parse.urlsplit(self.path)
        path, query = parts.path, urllib.parse.parse_qs(parts.query)
        length = int(self.headers.get("content-length") or 0)
        if length > r.args.max_payload_size:
            self._text(413, "Payload Too Large")
            self.close_connection = True
            return
        body = self.rfile.read(length) if length else b""
        key = r.args.api_key
        if key and (path in PROTECTED or path in ADMIN) and self.headers.get("authorization") != f"Bearer {key}":
            self._text(401, "Unauthorized")
            return
        try:
            if path in ("/health", "/liveness") and method == "GET":
                self._text(200, "OK")  # the router's own liveness: it says nothing about the workers
            elif path == "/readiness" and method == "GET":
                workers = r.registry.snapshot()
                healthy = [w for w in workers if w.healthy]
                if healthy:
                    self._json(200, {"status": "ready", "healthy_workers": len(healthy),
                                     "total_workers": len(workers)})
                else:
                    self._json(503, {"status": "not ready", "reason": "insufficient healthy workers"})
            elif path in PROTECTED and method == "POST":
                try:
                    json.loads(body or b"null")
                except ValueError as exc:
                    self._text(400, f"Failed to parse the request body as JSON: {exc}")
                    return
                self._proxy("POST", path, body)
            elif path in PUBLIC_PROXIED and method == "GET":
                self._proxy("GET", path, b"")
            elif path == "/add_worker" and method == "POST":
                url = (query.get("url") or [""])[0]
                if not url:
                    self._text(400, "Failed to deserialize query string: missing field `url`")
                    return
                self._text(*r.add_worker(url, (query.get("api_key") or [None])[0]))
            elif path == "/remove_worker" and method == "POST":
                url = (query.get("url") or [""])[0]
                if not url:
                    self._text(400, "Failed to deserialize query string: missing field `url`")
                    return
                self._text(*r.remove_worker(url))
            elif path == "/list_workers" and method == "GET":
                self._json(200, {"urls": [w.url for w in r.registry.snapshot()]})
            elif path == "/workers" and method == "GET":
                workers = r.registry.snapshot()
                self._json(200, {"workers": [{"url": w.url, "model_id": "unknown", "worker_type": "regular",
                                              "is_healthy": w.healthy, "load": w.load, "connection_mode": "Http"}
                                             for w in workers],
                                 "total": len(workers), "stats": {"prefill_count": 0, "decode_count": 0,
                                                                  "regular_count": len(workers)}})
            else:
                self._text(404, "")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _proxy(self, method: str, path: str, body: bytes) -> None:
        """Send the request to the policy's worker; on a connection error or a retryable status try the next
        one (up to --retry-max-retries attempts), then relay the answer, streamed as it comes."""
        r = self.router
        attempts = 1 if r.args.disable_retries else max(1, r.args.retry_max_retries)
        last: tuple[int, str] = (503, NO_WORKERS)
        for _ in range(attempts):
            worker = r.registry.pick()
            if worker is None:
                break
            host, port = worker.address
            headers = {"content-type": self.headers.get("content-type") or "application/json"}
            auth = f"Bearer {worker.api_key}" if worker.api_key else self.headers.get("authorization")
            if auth:
                headers["authorization"] = auth
            conn = http.client.HTTPConnection(host, port, timeout=r.args.request_timeout_secs)
            try:
                conn.request(method, path, body=body or None, headers=headers)
                resp = conn.getresponse()
                if resp.status in RETRYABLE:
                    last = (resp.status, resp.read().decode(errors="replace"))
                    log("WARN", "routers::http::router", f"worker {worker.url} answered {resp.status} for {path}; "
                        "retrying")
                    continue
                self._relay(resp)
                return
            except OSError as exc:
                last = (502, f"Failed to send request to worker {worker.url}: {exc}")
                log("WARN", "routers::http::router", f"Failed to send request to worker {worker.url}: {exc}")
            finally:
                conn.close()
                r.registry.done(worker)
        self._text(*last)

    def _relay(self, resp: http.client.HTTPResponse) -> None:
        content_type = resp.getheader("content-type") or "application/json"
        if resp.getheader("transfer-encoding", "").lower() == "chunked" or content_type.startswith("text/event-stream"):
            self.send_response(resp.status)
            self.send_header("content-type", content_type)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            while data := resp.read1(65536):
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        data = resp.read()
        self.send_response(resp.status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve(args: RouterArgs) -> int:
    router = Router(args)
    for url in args.worker_urls:
        router.registry.add(Worker(url, args.api_key))  # initial workers inherit the router's key
    signal.signal(signal.SIGTERM, lambda *_: router.stop.set())
    mode = f"Regular {{ worker_urls: {json.dumps(args.worker_urls)} }}"
    log("INFO", "server", f"Starting router on {args.host}:{args.port} | mode: {mode} | policy: "
        f"{POLICY_NAMES[args.policy]} | max_payload: {args.max_payload_size // (1024 * 1024)}MB")
    log("INFO", "server", f"Initializing workers for routing mode: {mode}")
    error = router.wait_for_healthy_workers()
    if error:
        log("ERROR", "server", f"Failed to initialize workers: {error}")
        return 1
    workers = router.registry.snapshot()
    log("INFO", "server", f"Workers initialized: {len(workers)} total, {sum(w.healthy for w in workers)} healthy")
    handler = type("Handler", (_Handler,), {"router": router})
    try:
        httpd = _HTTPServer((args.host, args.port), handler)
    except OSError as exc:
        log("ERROR", "server", f"Failed to bind to {args.host}:{args.port}: {exc}")
        return 1
    threading.Thread(target=router.health_checker, daemon=True).start()
    log("INFO", "server", f"Started health checker for workers with {args.health_check_interval_secs}s interval")
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    log("INFO", "server", f"Router listening on http://{args.host}:{args.port}")
    router.stop.wait()
    log("INFO", "server", "Received terminate signal, starting graceful shutdown")
    httpd.shutdown()
    httpd.server_close()
    return 0
