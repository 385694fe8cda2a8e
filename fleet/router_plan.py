"""The sglang router's planning (pure): the worker URLs of the replicas, the router's unit and env file, the
shell commands that call the live router on its host (the API key read there, never on a command line),
and what its answers mean. fleet.router runs them."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet import inventory, yamlfile
from fleet.connect import check_guard
from fleet.inventory import Host
from fleet.outcomes import Outcome, Verdict
from fleet.playbook import Playbook, flag_args
from fleet.render import API_KEY_VAR, HARDENING, UnitSpec, _env, env_file, exec_start, render_env, unit_file

TEMPLATE = "sglang-router.service.j2"


def worker_url(host: Host, book: Playbook) -> str:
    address = f"[{host.address}]" if ":" in host.address else host.address
    return f"http://{address}:{book.serve.port}"


@dataclass
class RouterPlan:
    argv: list[str]
    workers: list[str]
    config: dict[str, Any]
    unit_text: str
    env_text: str


def plan(book: Playbook, host: Host, workers: list[str], secrets: dict[str, str]) -> RouterPlan:
    """The router's unit and env file for these worker URLs (in this order)."""
    r = book.router
    if r is None:
        raise ValueError(f"playbook {book.name} has no router section")
    venv = book.serve.venv or host.venv
    argv = [f"{venv}/bin/python", "-m", "sglang_router.launch_router", "--host", r.listen, "--port", str(r.port),
            "--policy", r.policy, *flag_args(r.flags)]
    env: dict[str, str] = {}
    secret_args = {}
    if API_KEY_VAR in secrets:
        argv += ["--api-key", "secret"]
        secret_args = {len(argv) - 1: API_KEY_VAR}
        env[API_KEY_VAR] = secrets[API_KEY_VAR]
    argv += ["--worker-urls", *workers]
    spec = UnitSpec(playbook=book.name, rung="router", release="-", user=book.serve.user,
                    workdir="/" if book.serve.user == "root" else f"/home/{book.serve.user}",
                    env_file=env_path(book), argv=argv, env=env, secret_args=secret_args,
                    stop_timeout=int(book.budgets.stop))
    unit_text = _env().get_template(TEMPLATE).render(
        playbook=book.name, policy=r.policy, workers=workers, user=spec.user, workdir=spec.workdir,
        env_file=spec.env_file, exec_start=exec_start(argv, secret_args), stop_timeout=spec.stop_timeout,
        hardening=HARDENING)
    config = {"playbook": book.name, "role": "router", "unit": r.unit, "listen": r.listen, "port": r.port,
              "policy": r.policy, "flags": r.flags, "workers": workers}
    return RouterPlan(argv, workers, config, unit_text, render_env(spec))


def unit_path(book: Playbook) -> str:
    return unit_file(book.router.unit)  # type: ignore[union-attr]


def env_path(book: Playbook) -> str:
    return env_file(book.router.unit)  # type: ignore[union-attr]


def router_host(book: Playbook, path: Path, hosts: list[Host]) -> Host:
    """The inventory host router.host names (bad input: file:line of the playbook, exit 2)."""
    r = book.router
    assert r is not None
    source = hosts[0].source
    inv = inventory.load(source)
    if r.host not in inv.hosts:
        raise yamlfile.load(path).error(("router", "host"), f"no host named {r.host!r} in the inventory "
                                        f"({source.name} and the other files of its folder)")
    host = inv.hosts[r.host]
    check_guard(host)
    return host


def curl(book: Playbook, method: str, path: str, query: dict[str, str] | None = None,
          body: dict[str, Any] | None = None, timeout: float = 30, key_in_query: bool = False) -> str:
    """A shell command calling the router on its host; the key is read from the router's env file there and
    handed to curl on stdin (`-K -`), never on a command line. Prints the body, then the status code.
    key_in_query: also as `api_key=` (/add_worker: workers added at runtime do not inherit the router's key)."""
    ef = shlex.quote(env_path(book))
    url = f"http://127.0.0.1:{book.router.port}{path}"  # type: ignore[union-attr]
    lines = ["printf 'header = \"Authorization: Bearer %s\"\\n' \"$K\""]
    for name, value in (query or {}).items():
        lines.append(f"printf 'data-urlencode = \"%s\"\\n' {shlex.quote(f'{name}={value}')}")
    if key_in_query:
        lines.append("printf 'data-urlencode = \"api_key=%s\"\\n' \"$K\"")
    if query is not None or key_in_query:
        lines.append("printf 'get\\n'")  # the data goes into the query string; -X keeps the method
    data = ["-H", "Content-Type: application/json", "-d", json.dumps(body)] if body is not None else []
    return (f"K=$( [ -r {ef} ] && . {ef} >/dev/null 2>&1; printf %s \"${{{API_KEY_VAR}:-}}\" | "
            f"sed 's/[\\\\\"]/\\\\&/g' ); "
            f"{{ {'; '.join(lines)}; }} | curl -s -m {int(timeout)} -K - -X {method} "
            f"-w '\\n%{{http_code}}' {' '.join(shlex.quote(d) for d in data)} {shlex.quote(url)} || true")


def parse_answer(out: str) -> tuple[int | None, str]:
    """(status code, body) from what `curl` printed; None when nothing answered."""
    body, _, code = out.rstrip("\n").rpartition("\n")
    if not code.strip().isdigit() or code.strip() == "000":
        return None, body
    return int(code), body


def generation_check(body_text: str, code: int | None, book: Playbook) -> Verdict:
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
