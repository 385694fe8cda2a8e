"""`deploy --dry-run --host-timeout N` says what the deploy says first (issue 46, finding 1; newcomer h-new20): on
the sandbox, `inv deploy -H sbx3 -p llama-pinned-0.5.9 --host-timeout 2 --dry-run` said nothing of it, exit 0; the
deploy then said `--host-timeout 2s wins over the playbook's budgets`, gave sbx3 up mid-step and left it half-done
for the next run, exit 1."""

from __future__ import annotations

from pathlib import Path

from fleet.cli import deploy as deploy_cmd
from fleet.deploy.ladder import Deployer
from fleet.deploy.results import DeployResult
from fleet.inventory import Host
from fleet.outcomes import DeployStatus
from fleet.ssh.connect import ConnectOptions

LLAMA = "name: llama\nmodel: {path: /m}\nladder:\n  - name: fast\n"
HOST = Host(name="h0", address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(), source=Path("hosts.yaml"))


class DryRun(Deployer):
    def run(self, dry_run=False, force=False):
        assert dry_run
        return DeployResult(self.host.name, DeployStatus.DRY_RUN, config={"rung": "fast"}, diff="")


def test_the_dry_run_says_the_host_timeout_wins_as_the_deploy_does(monkeypatch, tmp_path, capsys):
    (tmp_path / "site/playbooks").mkdir(parents=True)
    (tmp_path / "site/playbooks/llama.yaml").write_text(LLAMA)
    monkeypatch.setenv("FLEET_SITE", str(tmp_path / "site"))
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))
    told: list[str] = []
    monkeypatch.setattr(deploy_cmd, "say_now", told.append)
    rc = deploy_cmd.deploy([HOST], "llama", ConnectOptions(), True, True, False, host_timeout="2",
                           deployer_of=DryRun)
    assert rc == 0
    assert [t for t in told if t.startswith("fleet: --host-timeout 2s wins over the playbook's budgets")], told
