"""`inv check` as a user runs it (no host involved), and `inv deploy` refusing the same problems before it
contacts any host: the inventory's host listens nowhere, so any contact would end in exit 1, not 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INV = str(REPO / ".venv/bin/inv")

# Every case of issue 34's "Reproduced" list that a file can show, in one playbook.
BAD = """name: bad
model: {path: /models/m}
serve:
  env: {HF_TOKEN: hf_live_token_123}
flags: {tp-szie: 8, host: 0.0.0.0, api-key: sk-live-456}
ladder:
  - name: fused
    when: {interconnect: [NVLink], arch_family: [hopper-datacenter]}
    flags: {enable-flashinfer-allreduce-fuson: true}
health: {expect: " Paris"}
"""


def inv(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([INV, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "200"})


def test_every_shipped_playbook_passes(monkeypatch):
    monkeypatch.setenv("SGLANG_API_KEY", "sk-test")  # llama-replicas' key, as a deploy from here would have it
    done = inv("check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.fullmatch(r"3 playbooks checked against sglang 0\.5\.8\.post1 to 0\.5\.23 \(\d+ releases\): "
                        r"0 errors, 0 warnings\n", done.stdout), done.stdout


def test_every_problem_is_one_line_naming_the_file_and_line_and_no_secret_is_printed(tmp_path):
    book = tmp_path / "bad.yaml"
    book.write_text(BAD)
    done = inv("check", "--playbook", str(book))
    assert done.returncode == 2
    lines = done.stdout.splitlines()
    assert lines[-1].endswith(": 6 errors, 0 warnings"), done.stdout
    expected = [  # in the order of the file, the schema's and the flags' alike
        rf"error: {book}:4: serve.env: HF_TOKEN: a literal secret in a playbook; name it instead: "
        r"HF_TOKEN: \{env: HF_TOKEN\} .*",
        rf"error: {book}:5: flags: --host is set by fleet from serve.host: .*",
        rf"error: {book}:5: flags.tp-szie: --tp-szie is in no sglang release .*; did you mean --tp-size\?",
        rf"error: {book}:8: ladder.0.when.arch_family: 'hopper-datacenter' is no arch family .*did you mean hopper\?",
        rf"error: {book}:8: ladder.0.when.interconnect: 'NVLink' is no interconnect .*did you mean nvlink\?",
        rf"error: {book}:9: ladder.0.flags.enable-flashinfer-allreduce-fuson: .*did you mean "
        r"--enable-flashinfer-allreduce-fusion\?",
    ]
    assert len(lines) == 7 and all(re.fullmatch(e, ln) for e, ln in zip(expected, lines, strict=False)), done.stdout
    assert "hf_live" not in done.stdout + done.stderr and "sk-live" not in done.stdout + done.stderr


def test_the_schema_clean_problems_are_all_found_and_json_says_them(tmp_path):
    book = tmp_path / "bad.yaml"
    book.write_text(BAD.replace("  env: {HF_TOKEN: hf_live_token_123}", "  env: {HF_TOKEN: {env: HF_TOKEN}}")
                    .replace(" host: 0.0.0.0, api-key: sk-live-456", ""))
    done = inv("check", "--playbook", str(book), "--json")
    assert done.returncode == 2
    report = json.loads(done.stdout)
    [found] = report["playbooks"]
    assert [re.sub(r"(\d+): ([^:]+):.*", r"\1 \2", e.removeprefix(f"{book}:")) for e in found["errors"]] == [
        "5 flags.tp-szie", "8 ladder.0.when.arch_family", "8 ladder.0.when.interconnect",
        "9 ladder.0.flags.enable-flashinfer-allreduce-fuson"]
    assert report["errors"] == 4 and found["releases"][0] == "0.5.8.post1"


def test_deploy_refuses_before_any_host_is_contacted(tmp_path):
    book = tmp_path / "bad.yaml"
    book.write_text(BAD.replace("  env: {HF_TOKEN: hf_live_token_123}", "  env: {A: '1'}")
                    .replace(" host: 0.0.0.0, api-key: sk-live-456", ""))
    inventory = tmp_path / "inventory" / "hosts.yaml"  # an inventory folder reads every *.yaml in it
    inventory.parent.mkdir()
    inventory.write_text("hosts:\n  h: {address: 127.0.0.1, port: 9, user: root}\n")
    done = inv("deploy", "-i", str(inventory), "--host", "h", "--playbook", str(book))
    assert done.returncode == 2, done.stderr
    assert re.fullmatch(rf"error: {book}:5: flags.tp-szie: .*did you mean --tp-size\? \(and 3 more: inv check "
                        rf"--playbook {book}\)\n", done.stderr), done.stderr
