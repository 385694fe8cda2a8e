"""The sglang router's planning (pure): the worker URLs of the replicas, the router's unit and env file, the
shell commands that call the live router on its host (the API key read there, never on a command line),
and what its answers mean. fleet.multihost.router runs them."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fleet import inventory, yamlfile
from fleet.errors import did_you_mean
from fleet.host import curl as hostcurl
from fleet.host.render import (
    API_KEY,
    HARDENING,
    UnitSpec,
    _env,
    env_file,
    exec_start,
    key_file,
    load_credential,
    render_env,
    server_argv,
    unit_file,
    workdir,
)
from fleet.inventory import Host
from fleet.outcomes import Outcome, ServerVerdict
from fleet.playbook import Playbook, flag_args
from fleet.ssh.connect import check_guard
from fleet.yamlfile import JsonObject

TEMPLATE = "sglang-router.service.j2"


def worker_url(host: Host, book: Playbook) -> str:
    address = f"[{host.address}]" if ":" in host.address else host.address
    return f"http://{address}:{book.serve.port}"


# a worker URL as worker_url writes it; anything else a router or a release sends is never called
_WORKER_URL = re.compile(r"http://(\[[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]{1,15})?\]|[A-Za-z0-9][A-Za-z0-9._-]{0,252}):"
                         r"[0-9]{1,5}")


def is_worker_url(value: object) -> bool:
    return isinstance(value, str) and _WORKER_URL.fullmatch(value) is not None


def members(known: list[str], ran: list[str], serves: dict[str, bool]) -> list[str]:
    """The router's workers, sorted: every replica that serves, whatever this run did to it (pure). `known`:
    the workers the router had (its live list, else its release's); `ran`: this run's replicas; `serves`:
    whether each answers. Sorted: a router lists in no set order, and order is no configuration."""
    return sorted(u for u in {*filter(is_worker_url, known), *ran} if serves.get(u, False))


@dataclass
class RouterPlan:
    argv: list[str]
    workers: list[str]
    config: JsonObject
    unit_text: str
    env_text: str
    key: str | None = field(default=None, repr=False)  # the API key, for the key file; never recorded
    key_path: str | None = None


def router_python(book: Playbook, host: Host) -> str:
    """The Python whose sglang_router runs the router: router.venv's, else the replicas'."""
    venv = (book.router.venv if book.router else None) or book.serve.venv or host.venv
    return f"{venv}/bin/python"


def plan(book: Playbook, host: Host, workers: list[str], secrets: dict[str, str]) -> RouterPlan:
    """The router's unit and env file for these worker URLs (rendered sorted: their order is no configuration,
    and a unit that differs only by it must not restart the router)."""
    r = book.router
    if r is None:
        raise ValueError(f"playbook {book.name} has no router section")
    workers = sorted(dict.fromkeys(workers))
    key = secrets.get(API_KEY)
    argv = server_argv(router_python(book, host), "sglang_router.launch_router",
                       ["--host", r.listen, "--port", str(r.port), "--policy", r.policy, *flag_args(r.flags),
                        "--worker-urls", *workers], keyed=key is not None)
    spec = UnitSpec(playbook=book.name, rung="router", release="-", user=book.serve.user,
                    workdir=workdir(book.serve.user),
                    env_file=env_path(book), argv=argv, env={}, key_file=key_path(book) if key else None,
                    stop_timeout=int(book.budgets.stop))
    unit_text = _env().get_template(TEMPLATE).render(
        playbook=book.name, policy=r.policy, workers=workers, user=spec.user, workdir=spec.workdir,
        env_file=spec.env_file, exec_start=exec_start(argv), credential=load_credential(spec.key_file),
        stop_timeout=spec.stop_timeout, hardening=HARDENING)
    config = {"playbook": book.name, "role": "router", "unit": r.unit, "listen": r.listen, "port": r.port,
              "policy": r.policy, "flags": r.flags, "workers": workers}
    return RouterPlan(argv, workers, config, unit_text, render_env(spec), key, spec.key_file)


def unit_path(book: Playbook) -> str:
    return unit_file(book.router.unit)  # type: ignore[union-attr]


def env_path(book: Playbook) -> str:
    return env_file(book.router.unit)  # type: ignore[union-attr]


def key_path(book: Playbook) -> str:
    return key_file(book.router.unit)  # type: ignore[union-attr]


def router_host(book: Playbook, path: Path, hosts: list[Host]) -> Host:
    """The inventory host router.host names (bad input: file:line of the playbook, exit 2)."""
    r = book.router
    assert r is not None
    source = hosts[0].source
    inv = inventory.load(source)
    if r.host not in inv.hosts:
        raise yamlfile.load(path).error(("router", "host"), f"no host named {r.host!r} in the inventory "
                                        f"({source.name} and the other files of its folder)"
                                        f"{did_you_mean(r.host, inv.hosts)}")
    host = inv.hosts[r.host]
    check_guard(host)
    return host


def curl(book: Playbook, method: str, path: str, query: dict[str, str] | None = None,
         body: Mapping[str, object] | None = None, timeout: float = 30, key_in_query: bool = False,
         key_in_body: str | None = None) -> str:
    """A shell command calling the router on its host, with the router's key read from its file there
    (fleet.host.curl). Prints the body, then the status code. key_in_query / key_in_body: the key also as
    `api_key=` or as that body field (adding a worker: workers added at runtime do not inherit the router's key)."""
    url = f"http://127.0.0.1:{book.router.port}{path}"  # type: ignore[union-attr]
    return hostcurl.command(url, method, key_path(book) if book.serve.api_key else None, query, body, timeout,
                            key_in_query, key_in_body)


def generation_check(body_text: str, code: int | None, book: Playbook) -> ServerVerdict:
    """What a /generate through the router means: READY, WRONG_ANSWER or HEALTH_FAILED (pure)."""
    if code != 200:
        return (Outcome.HEALTH_FAILED,
                f"POST /generate through the router answered {code or 'nothing'}: {body_text[:160]!r}")
    try:
        text = json.loads(body_text)["text"]
    except (ValueError, KeyError, TypeError):
        return Outcome.HEALTH_FAILED, f"POST /generate through the router gave no text: {body_text[:160]!r}"
    if not text.strip().startswith(book.health.expect):
        return Outcome.WRONG_ANSWER, f"{book.health.prompt!r} -> {text[:80]!r} through the router, expected " \
                               f"{book.health.expect!r}"
    return Outcome.READY, f"a generation through the router: {book.health.prompt!r} -> {text.strip()[:40]!r}"


def running_requests(metrics_text: str) -> float:
    """sglang:num_running_reqs summed over its label sets; 0 without metrics (pure)."""
    total = 0.0
    for line in metrics_text.splitlines():
        if line.startswith("sglang:num_running_reqs"):
            try:
                total += float(line.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                continue
    return total
