"""Is the server healthy: /health answers 200 and the known-answer prompt comes back right (rank 0), or
the dummy /health of a node of rank >= 1. One command over SSH each; the API key never leaves the host
(fleet.host.curl)."""

from __future__ import annotations

import json

from fabric import Connection

from fleet.host import curl as hostcurl
from fleet.host.render import key_file
from fleet.inventory import Host
from fleet.outcomes import Outcome, ServerVerdict
from fleet.playbook import Playbook
from fleet.progress import Progress, ticking

GENERATE_S = 120  # the known answer's own deadline
BUDGET_S = 10 + GENERATE_S  # /health (curl -m 10), then the known answer: what `phase verify` is given


def health_check(conn: Connection, host: Host, book: Playbook) -> ServerVerdict:
    """/health must answer 200 and the known-answer prompt must come back right."""
    base = f"http://127.0.0.1:{book.serve.port}"
    code = hostcurl.health_code(conn, host, book.serve.port)
    if code != "200":
        return Outcome.HEALTH_FAILED, f"GET /health answered {code or 'nothing'}"
    body = {"text": book.health.prompt,
            "sampling_params": {"max_new_tokens": book.health.max_tokens, "temperature": 0}}
    key = key_file(book.serve.unit or host.unit) if book.serve.api_key else None
    status, out = hostcurl.request(conn, host, f"{base}/generate", "POST", key, body=body, timeout=GENERATE_S)
    try:
        text = json.loads(out)["text"]
    except (ValueError, KeyError, TypeError):
        return Outcome.HEALTH_FAILED, f"POST /generate answered {status or 'nothing'} and gave no text: {out[:200]!r}"
    if not text.strip().startswith(book.health.expect):
        return Outcome.WRONG_ANSWER, f"{book.health.prompt!r} -> {text[:80]!r}, expected {book.health.expect!r}"
    return Outcome.READY, f"healthy; {book.health.prompt!r} -> {text.strip()[:40]!r}"


def verify(conn: Connection, host: Host, book: Playbook, say: Progress) -> ServerVerdict:
    """health_check as a phase of its own: a line with its budget, then where it stands every second."""
    say(f"phase verify: GET /health and the known answer (budget {BUDGET_S}s)")
    with ticking(say, "verify", BUDGET_S):
        return health_check(conn, host, book)


def node_health(conn: Connection, host: Host, port: int) -> ServerVerdict:
    """A node of rank >= 1 serves only sglang's dummy /health (no API): it must answer 200."""
    code = hostcurl.health_code(conn, host, port)
    if code != "200":
        return Outcome.HEALTH_FAILED, f"GET /health answered {code or 'nothing'}"
    return Outcome.READY, "node healthy"
