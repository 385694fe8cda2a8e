"""Every bad value an operator can type or write is one line naming the file:line or the option, exit 2, before any
host is contacted: the inventory's only host is 127.0.0.1 port 1, where a connection attempt would fail with
exit 1 instead (nothing listens there)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
INV = Path(sys.executable).parent / "inv"
PLAYBOOK = """name: keyed
model: {path: /models/m}
serve: {api_key: {env: FLEET_TEST_KEY}}
ladder: [{name: plain}]
"""


def _site(tmp_path: Path, host: str = "{address: 127.0.0.1, port: 1}", extra: str = "") -> Path:
    (tmp_path / "inv").mkdir(exist_ok=True)
    path = tmp_path / "inv/hosts.yaml"
    path.write_text(f"hosts:\n  a: {host}\n{extra}")
    (tmp_path / "keyed.yaml").write_text(PLAYBOOK)
    return path


def _refused(tmp_path: Path, *args: str) -> str:
    done = subprocess.run([str(INV), *args], cwd=REPO, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin", "FLEET_SANDBOX_ONLY": "1",
                                                         "FLEET_TEST_KEY": "k3y", "HOME": str(tmp_path)})
    assert done.returncode == 2, f"exit {done.returncode}: {done.stderr[-1500:]}"
    assert done.stdout == "" and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_a_yaml_timestamp_is_text_so_a_bad_date_is_a_field_error_not_a_crash(tmp_path):
    path = _site(tmp_path, "{address: 127.0.0.1, port: 2024-13-45, vars: {when: 2024-02-30}}")
    line = _refused(tmp_path, "probe", "-i", str(path))
    assert f"{path}:2: hosts.a.port" in line


def test_a_timestamp_in_a_playbook_is_a_field_error(tmp_path):
    path = _site(tmp_path)
    (tmp_path / "dated.yaml").write_text(PLAYBOOK.replace("keyed", "dated") + "budgets: {start: 2024-13-45}\n")
    line = _refused(tmp_path, "deploy", "-i", str(path), "-H", "a", "-p", str(tmp_path / "dated.yaml"), "-n")
    assert f"{tmp_path / 'dated.yaml'}:5: budgets.start" in line


def test_a_port_in_ssh_config_that_is_not_one_names_its_file_and_line(tmp_path):
    (tmp_path / "ssh_config").write_text("Host *\n  User root\n  Port abc\n")
    path = _site(tmp_path, f"{{address: 127.0.0.1, ssh_config: {tmp_path / 'ssh_config'}}}")
    line = _refused(tmp_path, "probe", "-i", str(path))
    assert f"{tmp_path / 'ssh_config'}:3: Port 'abc' is not a port" in line


@pytest.mark.parametrize("key", ["identity_file", "known_hosts", "ssh_config"])
def test_a_home_of_a_user_that_does_not_exist_is_refused_at_load(tmp_path, key):
    path = _site(tmp_path, f"{{address: 127.0.0.1, port: 1, {key}: ~nosuchuser/x}}")
    line = _refused(tmp_path, "probe", "-i", str(path))
    assert f"{path}:2: hosts.a.{key}" in line and "no such user 'nosuchuser'" in line


def test_a_secret_file_under_a_missing_users_home_is_one_line(tmp_path):
    path = _site(tmp_path)
    book = tmp_path / "keyed.yaml"
    book.write_text(PLAYBOOK.replace("{env: FLEET_TEST_KEY}", "{file: ~nosuchuser/key}"))
    line = _refused(tmp_path, "deploy", "-i", str(path), "-H", "a", "-p", str(book), "-n")
    assert "serve.api_key.file: ~nosuchuser/key" in line and "no such user" in line


def test_a_unit_name_that_cannot_name_its_key_file_is_refused_before_contact(tmp_path):
    path = _site(tmp_path, "{address: 127.0.0.1, port: 1, unit: 'sglang:a'}")
    line = _refused(tmp_path, "deploy", "-i", str(path), "-H", "a", "-p", str(tmp_path / "keyed.yaml"))
    assert f"{path}: hosts.a.unit: 'sglang:a' with serve.api_key" in line and "LoadCredential=" in line


def test_an_sm_as_nvidia_smi_writes_it_is_taken(tmp_path):
    path = _site(tmp_path)
    line = _refused(tmp_path, "audit", "-i", str(path), "--sm", "12.0", "-H", "nosuch")
    assert line == "error: --host nosuch: no such host in the inventory (known: a)"  # --sm was read as SM 120
    assert "--sm '12.x'" in _refused(tmp_path, "audit", "-i", str(path), "--sm", "12.x", "-H", "a")


@pytest.mark.parametrize("args", [["audit", "--sm", "999"], ["audit", "--sm", "9.9", "--sglang", "0.5.9"],
                                  ["patch", "--check", "--against", "sglang==0.5.9", "--sm", "999"]])
def test_an_sm_fleet_does_not_know_is_refused_as_inv_check_refuses_it(tmp_path, args):
    """`inv audit --sm 999` probed the hosts (exit 1 on an unreachable one) where `inv check` refuses `when: sm:
    [999]`: both now ask fleet.host.facts.unknown_sm, and the option is named."""
    path = _site(tmp_path)
    line = _refused(tmp_path, *args, "-i", str(path)) if args[0] == "audit" else _refused(tmp_path, *args)
    given = args[args.index("--sm") + 1]
    sm = 99 if given == "9.9" else 999
    assert line.startswith(f"error: --sm '{given}': SM {sm} is no GPU fleet knows")
    book = tmp_path / "t.yaml"
    book.write_text(PLAYBOOK.replace("{name: plain}", f"{{name: plain, when: {{sm: [{sm}]}}}}"))
    done = subprocess.run([str(INV), "check", "-p", str(book)], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "FLEET_TEST_KEY": "k"})
    assert done.returncode == 2 and line.split(": ", 2)[2] in done.stdout, done.stdout  # its report, as ruff's
