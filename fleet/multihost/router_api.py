"""The live sglang router's worker API, per release (pure: requests out, answers parsed back in).

Two generations, read from the real wheels (docs/FACTS.md cites the router's source per endpoint):
- LEGACY (sglang-router < 0.2.0, e.g. 0.1.9): POST /add_worker?url=U[&api_key=K] and POST /remove_worker?url=U
  answer 200 once done; GET /list_workers answers {"urls": [...]}. No /workers.
- WORKERS (0.2.0 and later; 0.2.2 and 0.3.x have nothing else): POST /workers {"url": U, "api_key": K},
  GET /workers {"workers": [{"id", "url", ...}]}, DELETE /workers/{id}. Adding and removing answer 202 and run
  in the background (0.2.0's id is the URL, 0.3.x's a UUID), so a change is done only once GET /workers shows it.
fleet.multihost.router sends them; this module decides which and what the answers mean.
"""

from __future__ import annotations

import enum
import json
import urllib.parse
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

FIRST_WORKERS_API = Version("0.2.0")  # the first release with POST/GET/DELETE /workers
DONE = frozenset({200, 201, 202})  # what the router answers a change it took (202: queued, see `listed`)
VERSION_COMMAND = "import importlib.metadata as m; print(m.version('sglang-router'))"


class Api(enum.Enum):
    LEGACY = "legacy"  # /add_worker, /remove_worker, /list_workers
    WORKERS = "workers"  # /workers

    @property
    def listing(self) -> str:
        return "/list_workers" if self is Api.LEGACY else "/workers"


def api_of(version: str | None) -> Api | None:
    """The API a release of sglang-router speaks; None when the version cannot be read."""
    try:
        return Api.LEGACY if Version((version or "").strip()) < FIRST_WORKERS_API else Api.WORKERS
    except InvalidVersion:
        return None


@dataclass(frozen=True)
class Worker:
    url: str
    id: str  # what DELETE /workers/{id} takes (LEGACY: the URL)


@dataclass(frozen=True)
class Call:
    """One HTTP call to the router: method, path, query, JSON body; key_in: where the API key also goes
    (None, "query" for LEGACY's `api_key=`, "body" for the workers API's `api_key` field)."""

    method: str
    path: str
    query: dict[str, str] | None = None
    body: dict[str, str] | None = None
    key_in: str | None = None


def workers(api: Api, code: int | None, body: str) -> list[Worker] | None:
    """The workers a listing answered; None when it is not a listing of that API."""
    if code != 200:
        return None
    try:
        data = json.loads(body)
        if api is Api.LEGACY:
            return [Worker(u, u) for u in data["urls"] if isinstance(u, str)]
        return [Worker(w["url"], str(w["id"])) for w in data["workers"]
                if isinstance(w, dict) and isinstance(w.get("url"), str) and "id" in w]
    except (ValueError, KeyError, TypeError):
        return None


def add(api: Api, url: str, keyed: bool) -> Call:
    """The call that adds a worker (with the router's key for it: workers added later do not inherit it)."""
    if api is Api.LEGACY:
        return Call("POST", "/add_worker", query={"url": url}, key_in="query" if keyed else None)
    return Call("POST", "/workers", body={"url": url}, key_in="body" if keyed else None)


def remove(api: Api, worker: Worker) -> Call:
    if api is Api.LEGACY:
        return Call("POST", "/remove_worker", query={"url": worker.url})
    return Call("DELETE", f"/workers/{urllib.parse.quote(worker.id, safe='')}")


def listed(found: list[Worker] | None, url: str) -> bool:
    return found is not None and any(w.url == url for w in found)
