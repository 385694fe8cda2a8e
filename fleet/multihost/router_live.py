"""The running sglang router, called on its host (each call over its own connection: replicas of one batch
finish in parallel threads) in the API of its release (fleet.multihost.router_api): its workers, adding and
removing one (done once its listing shows it), whether a replica answers /health, a generation through it."""

from __future__ import annotations

import time
from collections.abc import Callable

from fabric import Connection

from fleet.errors import FleetError
from fleet.host import curl as hostcurl
from fleet.host.service import python_says
from fleet.inventory import Host
from fleet.multihost import router_api
from fleet.multihost.router_plan import curl, generation_check, is_worker_url, key_path, router_python
from fleet.outcomes import ServerVerdict
from fleet.playbook import Playbook
from fleet.ssh.connect import ConnectOptions, open_connection


class LiveRouter:
    """Calls to the running router, each over its own connection to the router's host (replicas of one batch
    finish in parallel threads), in the API of the router's release (fleet.multihost.router_api)."""

    def __init__(self, host: Host, book: Playbook, opts: ConnectOptions):
        self.host, self.book, self.opts = host, book, opts
        self._api: router_api.Api | None = None

    def _run(self, command: str, timeout: float = 60) -> tuple[int | None, str]:
        conn = open_connection(self.host, self.opts)
        try:
            return hostcurl.answer(conn, self.host, command, wait=timeout + 30)
        finally:
            conn.close()

    def _call(self, call: router_api.Call, timeout: float = 30) -> tuple[int | None, str]:
        return self._run(curl(self.book, call.method, call.path, query=call.query, body=call.body, timeout=timeout,
                              key_in_query=call.key_in == "query",
                              key_in_body="api_key" if call.key_in == "body" else None), timeout=timeout)

    def api(self) -> router_api.Api:
        """The router's API, from the sglang-router release its venv has (read once); a venv that does not say
        is asked by the API itself (GET /workers answers only routers of the newer one)."""
        if self._api is None:
            python = router_python(self.book, self.host)
            conn = open_connection(self.host, self.opts)
            try:
                found = router_api.api_of(python_says(conn, self.host, python, router_api.VERSION_COMMAND))
            finally:
                conn.close()
            if found is None:
                code, _ = self._call(router_api.Call("GET", "/workers"))
                found = router_api.Api.WORKERS if code == 200 else router_api.Api.LEGACY
            self._api = found
        return self._api

    def forget_api(self) -> None:
        """The router's release may change (a router deploy): its API is read again."""
        self._api = None

    def listing(self) -> list[router_api.Worker] | None:
        """The router's workers, or None when no router answers."""
        api = self.api()
        code, body = self._call(router_api.Call("GET", api.listing))
        return router_api.workers(api, code, body)

    def workers(self) -> list[str] | None:
        """The router's worker URLs, or None when no router answers."""
        found = self.listing()
        return None if found is None else [w.url for w in found]

    def serves(self, url: str, conn: Connection | None = None) -> bool:
        """Whether the replica at `url` answers /health, asked from the router's host (as the router asks)."""
        if not is_worker_url(url):
            return False
        command = hostcurl.command(f"{url}/health", "GET", key_path(self.book) if self.book.serve.api_key else None,
                                   timeout=5)
        try:
            code, _ = hostcurl.answer(conn, self.host, command, wait=40) if conn else self._run(command, 5)
        except FleetError:
            return False
        return code == 200

    def remove(self, url: str) -> tuple[int | None, str]:
        """Out of the router: done once its listing no longer shows it (the workers API removes in the
        background)."""
        api = self.api()
        listing = self.listing()
        if listing is None:
            return None, "no router answers its worker listing"
        found = next((w for w in listing if w.url == url), None)
        if found is None:
            return 200, f"{url} is not in the router"
        code, body = self._call(router_api.remove(api, found))
        if code not in router_api.DONE:
            return code, body
        return self._until(lambda: not router_api.listed(self.listing(), url), 60, code, body, "still listed")

    def add(self, url: str) -> tuple[int | None, str]:
        """Into the router: done once its listing shows it (the router checks its health first)."""
        timeout = self.book.budgets.ready
        code, body = self._call(router_api.add(self.api(), url, self.book.serve.api_key is not None), timeout)
        if code not in router_api.DONE:
            return code, body
        return self._until(lambda: router_api.listed(self.listing(), url), timeout, code, body, "not listed")

    def _until(self, done: Callable[[], bool], within: float, code: int | None, body: str,
               otherwise: str) -> tuple[int | None, str]:
        deadline = time.monotonic() + within
        while not done():
            if time.monotonic() > deadline:
                return None, f"answered {code} {body.strip()[:100]}, yet {otherwise} after {within:.0f}s"
            time.sleep(0.5)
        return code, body

    def generate(self, conn: Connection) -> ServerVerdict:
        body = {"text": self.book.health.prompt,
                "sampling_params": {"max_new_tokens": self.book.health.max_tokens, "temperature": 0}}
        code, text = hostcurl.answer(conn, self.host, curl(self.book, "POST", "/generate", body=body, timeout=120),
                                     wait=180)
        return generation_check(text, code, self.book)
