"""`inv rollback --dry-run`: what the rollback would do (the release, the unit and env diff, what would be enabled),
read without the lock, and nothing changed on the host: files, `current`, the server's process, its enablement."""

from __future__ import annotations

import json

from fleetcli import inv, llama_playbook, sh

HOST = "sbx4"
UNIT, ENV = "/etc/systemd/system/sglang.service", "/etc/fleet/sglang.env"
A = [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}, "flags": {"disable-custom-all-reduce": True}}]
B = [{"name": "other", "env": {"NCCL_P2P_DISABLE": "1", "FLEET_TEST_MARK": "b"},
      "flags": {"disable-custom-all-reduce": True}}]


def _fresh(inventory) -> None:
    sh(inventory, HOST, f"systemctl stop sglang 2>/dev/null; systemctl disable sglang 2>/dev/null; "
                        f"rm -rf {UNIT} {ENV} /var/lib/fleet; systemctl daemon-reload; true")


def _state(inventory) -> str:
    """Everything a rollback would change, and what shows it ran (the server's process and start time)."""
    return sh(inventory, HOST, f"sha256sum {UNIT} {ENV}; readlink /var/lib/fleet/current; ls /var/lib/fleet "
                               "/var/lib/fleet/releases; systemctl show -p MainPID -p ActiveEnterTimestamp sglang; "
                               "systemctl is-enabled sglang; ls -a /etc/systemd/system /etc/fleet; true")


def test_a_dry_run_says_the_release_the_diff_and_the_enable_and_changes_nothing(sandbox, sandbox_inventory,
                                                                                tmp_path):
    _fresh(sandbox_inventory)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = (llama_playbook(tmp_path / d, ladder, name="llama-rbdry") for d, ladder in (("a", A), ("b", B)))
    try:
        proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(first), "--json")
        assert proc.returncode == 0, proc.stderr[-2000:]
        release_a = json.loads(proc.stdout)["release"]
        proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(second), "--json")
        assert proc.returncode == 0, proc.stderr[-2000:]
        release_b = json.loads(proc.stdout)["release"]
        sh(sandbox_inventory, HOST, "systemctl disable sglang")  # so that the plan has an enable to say
        before = _state(sandbox_inventory)
        proc = inv(sandbox, "rollback", "--host", HOST, "--playbook", str(first), "--dry-run", "--json")
        data = json.loads(proc.stdout)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert (data["status"], data["release"], data["unchanged"]) == ("dry-run", release_a, False)
        diff = data["diff"]
        assert f"rollback from {release_b} (other) to {release_a} (plain), judged with playbook llama-rbdry" in diff
        assert f"if it does not come up, release {release_b} is put back" in diff
        assert f"sglang enabled (it is disabled), so a reboot starts release {release_a}" in diff
        assert f"--- {ENV} (installed)" in diff and '-FLEET_TEST_MARK="b"' in diff
        assert _state(sandbox_inventory) == before  # fails before: --dry-run was no option of rollback (exit 2)
        # the text view says the same, in the deploy's dry-run words
        proc = inv(sandbox, "rollback", "--host", HOST, "--playbook", str(first), "--dry-run", "--wide")
        assert proc.returncode == 0 and f"to {release_a} (plain)" in proc.stdout, proc.stderr[-2000:]
        assert _state(sandbox_inventory) == before
        # a rollback with nowhere to go is refused by the dry run as by the rollback (exit 1), nothing changed
        proc = inv(sandbox, "rollback", "--host", HOST, "--playbook", str(first), "--dry-run",
                   "--to", "20990101T000000Z-0000", "--json")
        assert proc.returncode == 1 and "no release 20990101T000000Z-0000" in proc.stdout + proc.stderr
        assert _state(sandbox_inventory) == before
    finally:
        _fresh(sandbox_inventory)


def test_what_has_no_dry_run_yet_is_refused_before_any_host_is_read(sandbox):
    for extra in (["--to", "before-fleet"], ["--router", "--playbook", "glm5-nvfp4"]):
        proc = inv(sandbox, "rollback", "--host", HOST, "--dry-run", *extra)
        assert proc.returncode == 2 and "not supported yet" in proc.stderr, proc.stderr


def test_a_release_whose_venv_another_user_may_now_change_is_refused_before_anything_stops(sandbox,
                                                                                          sandbox_inventory, tmp_path):
    """The release's unit runs as root (no serve.user); since it was made, a file of its venv became another user's
    (here pyvenv.cfg, `fleet`'s). Before, the rollback stopped the server and started that unit as root. Now the
    dry run and the rollback refuse it in the same words, before anything stops: nothing changed."""
    _fresh(sandbox_inventory)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = (llama_playbook(tmp_path / d, ladder, name="llama-rbown") for d, ladder in (("a", A), ("b", B)))
    said = []
    try:
        for book in (first, second):
            proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
            assert proc.returncode == 0, proc.stderr[-2000:]
        sh(sandbox_inventory, HOST, "chown fleet /root/ml-env/pyvenv.cfg")
        before = _state(sandbox_inventory)
        for extra in (("--dry-run",), ("--yes",)):
            proc = inv(sandbox, "rollback", "--host", HOST, "--playbook", str(first), *extra)
            assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr[-2000:])
            text = " ".join((proc.stdout + proc.stderr).split())  # the terminal's width wraps it
            said.append(text[text.find("rollback to "):text.find("nothing was changed") + 19])
            assert _state(sandbox_inventory) == before
    finally:
        sh(sandbox_inventory, HOST, "chown root /root/ml-env/pyvenv.cfg")
        _fresh(sandbox_inventory)
    assert said[0] == said[1], said
    assert said[0].startswith("rollback to ") and said[0].endswith("; nothing was changed"), said
    assert "refused: venv /root/ml-env is fleet (uid 1000)'s, and the unit runs as root" in said[0], said
