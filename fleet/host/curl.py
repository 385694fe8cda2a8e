"""HTTP calls made on a host with its curl: the shell text, the answer parsed back in, and the calls themselves.

The API key is read on the host from its 0600 file and handed to curl as a config file on stdin (`-K -`),
written by the shell's builtin printf: it never travels over SSH and shows in no command line.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping

from fabric import Connection

from fleet.host.service import sh
from fleet.inventory import Host


def command(url: str, method: str = "GET", key_path: str | None = None, query: dict[str, str] | None = None,
            body: Mapping[str, object] | None = None, timeout: float = 30, key_in_query: bool = False,
            key_in_body: str | None = None) -> str:
    """A shell command that calls `url` and prints the body, then a newline and the status code.
    key_path: the key file, sent as `Authorization: Bearer`; key_in_query: also as `api_key=` in the query;
    key_in_body: also as that field of the JSON body (sent through curl's config on stdin, never argv)."""
    lines = []
    if key_path is not None:
        lines.append("printf 'header = \"Authorization: Bearer %s\"\\n' \"$K\"")
    for name, value in (query or {}).items():
        lines.append(f"printf 'data-urlencode = \"%s\"\\n' {shlex.quote(f'{name}={value}')}")
    if key_in_query and key_path is not None:
        lines.append("printf 'data-urlencode = \"api_key=%s\"\\n' \"$K\"")
    if query is not None or (key_in_query and key_path is not None):
        lines.append("printf 'get\\n'")  # the data goes into the query string; -X keeps the method
    data = ["-H", "Content-Type: application/json", "-d", json.dumps(body)] if body is not None else []
    if key_in_body is not None and key_path is not None and body is not None:
        lines.append(_keyed_body(body, key_in_body))
        data = ["-H", "Content-Type: application/json"]
    read_key = ""
    if key_path is not None:  # quoted for curl's config syntax: \ and " escaped
        read_key = f"K=$(sed 's/[\\\\\"]/\\\\&/g' {shlex.quote(key_path)} 2>/dev/null); "
        if key_in_body is not None:  # JSON-escaped, then quoted for curl's config again
            read_key += f"J=$(sed 's/[\\\\\"]/\\\\&/g; s/[\\\\\"]/\\\\&/g' {shlex.quote(key_path)} 2>/dev/null); "
    config = f"{{ {'; '.join(lines)}; }} | " if lines else ": | "
    return (f"{read_key}{config}curl -s -m {int(timeout)} -K - -X {method} -w '\\n%{{http_code}}' "
            f"{' '.join(shlex.quote(d) for d in data)} {shlex.quote(url)} || true")


def _keyed_body(body: Mapping[str, object], field: str) -> str:
    """A printf writing curl's `data = "..."` line: the JSON body with `field` set to the key ($J)."""
    mark = "\x00KEY\x00"
    text = json.dumps({**body, field: mark}).replace("\\", "\\\\").replace('"', '\\"')
    before, _, after = text.partition(json.dumps(mark)[1:-1].replace("\\", "\\\\"))
    head, tail = shlex.quote('data = "' + before), shlex.quote(after + '"')
    return f"printf '%s\\n' {head}\"$J\"{tail}"


def parse(out: str) -> tuple[int | None, str]:
    """(status code, body) from what `command` printed; None when nothing answered."""
    body, _, code = out.rstrip("\n").rpartition("\n")
    if not code.strip().isdigit() or code.strip() == "000":
        return None, body
    return int(code), body


# ---------------------------------------------------------------------- on a host (I/O)


def health_code(conn: Connection, host: Host, port: int) -> str:
    """What GET /health on the host's own `port` answered: its status code, "000" or "" when nothing did."""
    return sh(conn, host, f"curl -s -o /dev/null -w '%{{http_code}}' -m 10 http://127.0.0.1:{int(port)}/health "
                          "|| true").strip()


def metrics_text(conn: Connection, host: Host, port: int) -> str:
    """The server's /metrics on the host's own `port` ("" when it gives none)."""
    return sh(conn, host, f"curl -s -m 5 http://127.0.0.1:{int(port)}/metrics || true")


def answer(conn: Connection, host: Host, curl_command: str, wait: float = 120) -> tuple[int | None, str]:
    """A `command` run on the host (under `wait` seconds): (status code, body)."""
    return parse(sh(conn, host, curl_command, timeout=wait))


def request(conn: Connection, host: Host, url: str, method: str = "GET", key_path: str | None = None,
         query: dict[str, str] | None = None, body: Mapping[str, object] | None = None, timeout: float = 30,
         key_in_query: bool = False, wait: float = 120) -> tuple[int | None, str]:
    """`command` run on the host (under `wait` seconds) and its answer parsed: (status code, body)."""
    return answer(conn, host, command(url, method, key_path, query, body, timeout, key_in_query), wait)
