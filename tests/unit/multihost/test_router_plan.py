"""The router section (validation with file:line errors) and the pure parts of fleet.multihost.router: the unit it
renders, what the router's answers mean, the drain's reading of /metrics."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet import playbook
from fleet.errors import InputError
from fleet.host import curl as hostcurl
from fleet.host.render import API_KEY, HARDENING
from fleet.inventory import load as load_inventory
from fleet.multihost import router_plan

BOOK = """name: replicas
model: {path: /models/Llama-3.1-8B-Instruct}
serve:
  host: 0.0.0.0
  port: 30000
  api_key: {env: SGLANG_API_KEY}
ladder:
  - name: plain
router:
  host: sbx0
  port: 30080
  policy: round_robin
  flags: {health-check-interval-secs: 10}
"""

INVENTORY = """hosts:
  sbx0: {address: 172.30.78.10}
  sbx1: {address: 172.30.78.11}
  sbx3: {address: 172.30.78.13}
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "replicas.yaml"
    p.write_text(text)
    return p


def hosts(tmp_path: Path):
    (tmp_path / "inventory").mkdir(exist_ok=True)
    path = tmp_path / "inventory" / "hosts.yaml"
    path.write_text(INVENTORY)
    return load_inventory(path).hosts


def test_the_router_section_loads_with_defaults(tmp_path):
    book = playbook.load(write(tmp_path, BOOK.replace("  policy: round_robin\n", "")))
    assert book.router is not None
    assert (book.router.host, book.router.port, book.router.policy, book.router.unit, book.router.listen) == \
        ("sbx0", 30080, "round_robin", "sglang-router", "0.0.0.0")
    assert playbook.load(write(tmp_path, BOOK.split("router:")[0])).router is None


@pytest.mark.parametrize("old,new,expected", [
    ("  policy: round_robin", "  policy: fastest", r"replicas.yaml:12: router.policy: Input should be 'round_robin'"),
    ("  host: 0.0.0.0\n", "", r"replicas.yaml:3: serve.host: replicas behind a router must listen beyond loopback"),
    ("  port: 30080", "  port: 30000", r"replicas.yaml:11: router.port: 30000 is serve.port too"),
    ("{health-check-interval-secs: 10}", "{worker-urls: http://x}", r"replicas.yaml:13: router.flags: --worker-urls "
                                                                      "is set by fleet"),
    ("  port: 30080", "  port: 30080\n  replicas: 3", r"replicas.yaml:12: router.replicas: unknown key"),
    ("  port: 30080", "  port: 70000", r"replicas.yaml:11: router.port: Input should be less than or equal"),
])
def test_a_bad_router_section_is_one_line_naming_file_and_line(tmp_path, old, new, expected):
    assert BOOK.count(old) == 1
    with pytest.raises(InputError, match=expected):
        playbook.load(write(tmp_path, BOOK.replace(old, new)))


def test_a_router_does_not_go_with_nodes(tmp_path):
    with pytest.raises(InputError, match=r"replicas.yaml:9: router: replicas behind a router are single-host"):
        playbook.load(write(tmp_path, BOOK + "nodes: {count: 2}\n"))


def test_the_router_host_must_be_an_inventory_host(tmp_path, monkeypatch):
    # nothing is sent here; with the guard on, router_host would also ask that the test fleet be up
    monkeypatch.setenv("FLEET_SANDBOX_ONLY", "0")
    found = hosts(tmp_path)
    path = write(tmp_path, BOOK)
    book = playbook.load(path)
    assert router_plan.router_host(book, path, [found["sbx1"]]).name == "sbx0"
    other = write(tmp_path, BOOK.replace("  host: sbx0", "  host: sbx9"))
    with pytest.raises(InputError, match=r"replicas.yaml:10: router.host: no host named 'sbx9' in the inventory"):
        router_plan.router_host(playbook.load(other), other, [found["sbx1"]])


def test_the_unit_runs_the_launcher_with_the_replicas_and_the_key_by_reference(tmp_path):
    found = hosts(tmp_path)
    book = playbook.load(write(tmp_path, BOOK))
    urls = [router_plan.worker_url(found[n], book) for n in ("sbx1", "sbx3")]
    assert urls == ["http://172.30.78.11:30000", "http://172.30.78.13:30000"]
    planned = router_plan.plan(book, found["sbx0"], urls, {API_KEY: "s3cret-k$y"})
    exec_line = next(line for line in planned.unit_text.splitlines() if line.startswith("ExecStart="))
    assert exec_line == ("ExecStart=/root/ml-env/bin/python /var/lib/fleet/bin/fleet-launch api-key flag:api-key "
                         "sglang_router.launch_router --host 0.0.0.0 --port 30080 "
                         "--policy round_robin --health-check-interval-secs 10 "
                         "--worker-urls http://172.30.78.11:30000 http://172.30.78.13:30000")
    assert "s3cret" not in planned.unit_text + planned.env_text
    assert "LoadCredential=api-key:/etc/fleet/sglang-router.key" in planned.unit_text.splitlines()
    assert planned.key == "s3cret-k$y" and planned.key_path == "/etc/fleet/sglang-router.key"
    for line in HARDENING["unit"] + HARDENING["service"]:
        assert line in planned.unit_text.splitlines()
    assert "EnvironmentFile=/etc/fleet/sglang-router.env" in planned.unit_text
    assert planned.config["workers"] == urls and "s3cret" not in str(planned.config)
    # the same replicas render the same text: an unchanged router is not restarted
    assert router_plan.plan(book, found["sbx0"], urls, {API_KEY: "s3cret-k$y"}).unit_text == planned.unit_text


def test_a_generation_through_the_router_must_come_back_right(tmp_path):
    book = playbook.load(write(tmp_path, BOOK))
    assert router_plan.generation_check('{"text": " 4"}', 200, book)[0] == "READY"
    assert router_plan.generation_check('{"text": "five"}', 200, book)[0] == "WRONG_ANSWER"
    outcome, evidence = router_plan.generation_check("No available workers (all circuits open or unhealthy)", 503, book)
    assert outcome == "HEALTH_FAILED" and "503" in evidence
    assert router_plan.generation_check("", None, book)[0] == "HEALTH_FAILED"


def test_running_requests_are_read_from_the_metrics():
    text = ('# HELP sglang:num_running_reqs The number of running requests.\n'
            'sglang:num_running_reqs{model_name="m",engine_type="unified"} 3.0\n'
            'sglang:num_queue_reqs{model_name="m"} 7.0\n')
    assert router_plan.running_requests(text) == 3.0
    assert router_plan.running_requests("") == 0


def test_the_router_commands_carry_the_key_from_its_file_never_on_a_command_line(tmp_path, monkeypatch):
    """Run what fleet sends to the router's host, here, against a local server that records what arrives."""
    import http.server
    import subprocess
    import threading
    import urllib.parse

    seen: list[tuple[str, str, dict, str | None]] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            parts = urllib.parse.urlsplit(self.path)
            seen.append((self.command, parts.path, urllib.parse.parse_qs(parts.query),
                         self.headers.get("authorization")))
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            body = b'{"urls": []}'
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    key = 'k"e\\y $x'
    key_file = tmp_path / "router.key"
    key_file.write_text(key)  # as the router's key file has it
    monkeypatch.setattr(router_plan, "key_path", lambda book: str(key_file))
    book = playbook.load(write(tmp_path, BOOK.replace("port: 30080", f"port: {server.server_address[1]}")))
    try:
        add = router_plan.curl(book, "POST", "/add_worker", query={"url": "http://172.30.78.11:30000"},
                           key_in_query=True)
        listing = router_plan.curl(book, "GET", "/list_workers")
        assert "k\"e" not in add and "$x" not in add
        for command in (add, listing):
            out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30).stdout
            assert hostcurl.parse(out) == (200, '{"urls": []}')
    finally:
        server.shutdown()
        server.server_close()
    assert seen == [("POST", "/add_worker", {"url": ["http://172.30.78.11:30000"], "api_key": [key]}, f"Bearer {key}"),
                    ("GET", "/list_workers", {}, f"Bearer {key}")]


def test_the_shipped_replicas_playbook_loads():
    from fleet.logs import rules as logrules
    from fleet.patches import sets as patchsets

    books = Path(__file__).resolve().parents[3] / "playbooks"
    book = playbook.load(books / "llama-replicas.yaml", known_classes={c.value for c in logrules.LogClass},
                         known_patches=set(patchsets.available(books / "patches")))
    assert book.router is not None and book.router.host == "sbx0" and book.serve.api_key is not None
