"""Is the server healthy: /health answers 200 and the known-answer prompt comes back right (rank 0), or
the dummy /health of a node of rank >= 1. One command over SSH each; the API key never leaves the host."""

from __future__ import annotations

import json
import shlex

from fabric import Connection

from fleet.inventory import Host
from fleet.outcomes import Outcome, Verdict
from fleet.playbook import Playbook
from fleet.render import API_KEY_VAR, env_file
from fleet.service import sh


def with_key(path: str, command: str) -> str:
    """Run `command` with $KEY set from the unit's env file on the host: the API key never travels over
    SSH nor shows in fleet's command lines."""
    ef = shlex.quote(path)
    return (f"KEY=$( [ -r {ef} ] && . {ef} >/dev/null 2>&1; printf %s \"${{{API_KEY_VAR}:-}}\" ); "
            f"{command}")


def health_check(conn: Connection, host: Host, book: Playbook) -> Verdict:
    """/health must answer 200 and the known-answer prompt must come back right."""
    base = f"http://127.0.0.1:{book.serve.port}"
    code = sh(conn, host, f"curl -s -o /dev/null -w '%{{http_code}}' -m 10 {base}/health || true").strip()
    if code != "200":
        return Outcome.HEALTH_FAILED, f"GET /health answered {code or 'nothing'}"
    body = json.dumps({"text": book.health.prompt,
                       "sampling_params": {"max_new_tokens": book.health.max_tokens, "temperature": 0}})
    auth = '-H "Authorization: Bearer $KEY" ' if book.serve.api_key else ""
    out = sh(conn, host, with_key(env_file(book.serve.unit or host.unit),
                                  f"curl -s -m 120 {auth}-H 'Content-Type: application/json' "
                                  f"-d {shlex.quote(body)} {base}/generate || true"))
    try:
        text = json.loads(out)["text"]
    except (ValueError, KeyError, TypeError):
        return Outcome.HEALTH_FAILED, f"POST /generate gave no text: {out[:200]!r}"
    if not text.strip().startswith(book.health.expect):
        return Outcome.WRONG_ANSWER, f"{book.health.prompt!r} -> {text[:80]!r}, expected {book.health.expect!r}"
    return Outcome.READY, f"healthy; {book.health.prompt!r} -> {text.strip()[:40]!r}"


def node_health(conn: Connection, host: Host, port: int) -> Verdict:
    """A node of rank >= 1 serves only sglang's dummy /health (no API): it must answer 200."""
    code = sh(conn, host, f"curl -s -o /dev/null -w '%{{http_code}}' -m 10 http://127.0.0.1:{int(port)}/health "
                          "|| true").strip()
    if code != "200":
        return Outcome.HEALTH_FAILED, f"GET /health answered {code or 'nothing'}"
    return Outcome.READY, "node healthy"
