"""fleet.host.curl: the shell text run here, with a stand-in curl that records its argv and its stdin, and
with the real curl against a local server."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from fleet.host import curl as hostcurl

KEY = 'sk-"q\\b$x`y'  # quotes, a backslash, $ and a backtick: curl's config syntax and the shell both tested


@pytest.mark.parametrize("out,expected", [
    ('{"urls": []}\n200', (200, '{"urls": []}')),
    ("Worker http://a:1 not found\n400", (400, "Worker http://a:1 not found")),
    ("\n000", (None, "")),
    ("", (None, "")),
])
def test_parse_splits_body_and_status(out, expected):
    assert hostcurl.parse(out) == expected


def _fake_curl(tmp_path: Path) -> dict[str, str]:
    """A `curl` first on PATH that writes its argv and its stdin down, and answers like curl -w would."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {tmp_path}/argv\ncat > {tmp_path}/stdin\n"
                                  "printf '{\"ok\": 1}\\n200'\n")
    (bin_dir / "curl").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_the_key_reaches_curl_on_stdin_and_never_in_its_argv(tmp_path):
    key_file = tmp_path / "sglang.key"
    key_file.write_text(KEY)
    command = hostcurl.command("http://127.0.0.1:1/generate", "POST", str(key_file), body={"text": "2+2="},
                               query={"url": "http://a:1"}, key_in_query=True)
    assert KEY not in command
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=_fake_curl(tmp_path), timeout=30)
    assert hostcurl.parse(out.stdout) == (200, '{"ok": 1}')
    argv = (tmp_path / "argv").read_text()
    config = (tmp_path / "stdin").read_text()
    assert "sk-" not in argv and "-K\n-\n" in argv and '{"text": "2+2="}' in argv
    escaped = KEY.replace("\\", "\\\\").replace('"', '\\"')
    assert f'header = "Authorization: Bearer {escaped}"' in config
    assert f'data-urlencode = "api_key={escaped}"' in config and 'data-urlencode = "url=http://a:1"' in config


def test_without_a_key_path_no_authorization_is_sent(tmp_path):
    command = hostcurl.command("http://127.0.0.1:1/health")
    subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=_fake_curl(tmp_path), timeout=30)
    assert (tmp_path / "stdin").read_text() == ""
    assert "GET" in (tmp_path / "argv").read_text().split()


def test_the_real_curl_delivers_the_key_the_query_and_the_body(tmp_path):
    seen: list[tuple[str, str, str | None, bytes]] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            seen.append((self.command, self.path, self.headers.get("authorization"), body))
            self.send_response(401 if self.headers.get("authorization") != f"Bearer {KEY}" else 200)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    key_file = tmp_path / "k"
    key_file.write_text(KEY)
    url = f"http://127.0.0.1:{server.server_address[1]}/generate"
    try:
        ok = subprocess.run(["sh", "-c", hostcurl.command(url, "POST", str(key_file), body={"a": 1})],
                            capture_output=True, text=True, timeout=30).stdout
        missing = subprocess.run(["sh", "-c", hostcurl.command(url, "POST", str(tmp_path / "none"), body={})],
                                 capture_output=True, text=True, timeout=30).stdout
    finally:
        server.shutdown()
        server.server_close()
    assert hostcurl.parse(ok) == (200, "{}") and hostcurl.parse(missing)[0] == 401
    assert seen[0] == ("POST", "/generate", f"Bearer {KEY}", json.dumps({"a": 1}).encode())
