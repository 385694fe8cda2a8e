"""`inv check` reads the files a deploy reads the server's log with (playbooks/rules, the site classes, the startup
phases), and a deploy, tune or rollback refuses them broken before any host is contacted. A newcomer's hour: a rule
file edited by hand (`severity: fatl`, a regex missing its `)`) and `inv check` said `0 errors`; `inv deploy
--force` then stopped the server, failed its start on the rule file, failed its put-back on it too, and said
`nothing changed`."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.cli import check
from fleet.deploy import inputs
from fleet.errors import InputError
from fleet.logs import datafiles, rules
from fleet.ssh.connect import ConnectOptions

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def broken_rules(tmp_path, monkeypatch) -> Iterator[Path]:
    folder = tmp_path / "rules"
    shutil.copytree(REPO / "playbooks" / "rules", folder)
    cuda = folder / "cuda.yaml"
    text = cuda.read_text()
    cuda.write_text(text.replace("      - 'CUDA out of memory'\n", "      - 'CUDA out of (memory'\n", 1)
                    .replace("    severity: fatal\n", "    severity: fatl\n", 1))
    monkeypatch.setattr(rules, "RULES_DIR", folder)
    rules.default_rules.cache_clear()  # the shipped rules, loaded once a process, are read again from the copy
    yield cuda
    rules.default_rules.cache_clear()


def test_check_reports_every_problem_of_a_rule_file(broken_rules, capsys):
    assert check.command(["glm5-nvfp4"], None, False) == 2
    out = capsys.readouterr().out
    assert f"error: {broken_rules}:8: rule 'cuda_out_of_memory': severity: unknown severity 'fatl'" in out
    assert f"error: {broken_rules}:10: rule 'cuda_out_of_memory': regex: bad regex 'CUDA out of (memory'" in out
    assert ": 2 errors," in out.splitlines()[-1]


def test_check_json_names_them_apart(broken_rules, capsys):
    assert check.command(["glm5-nvfp4"], None, True) == 2
    report = json.loads(capsys.readouterr().out)
    assert len(report["rules_errors"]) == 2 and report["errors"] == 2
    assert report["playbooks"][0]["errors"] == []


def test_shipped_files_load_and_say_nothing(capsys):
    assert datafiles.problems() == []
    assert check.command(["glm5-nvfp4"], None, True) == 0
    assert json.loads(capsys.readouterr().out)["rules_errors"] == []


@pytest.mark.parametrize("task", ["deploy", "tune", "rollback"])
def test_a_deploy_tune_or_rollback_refuses_them_before_any_host(broken_rules, monkeypatch, task):
    from fleet.cli import deploy, tune

    def contacted(*args, **kwargs):
        raise AssertionError("a host was contacted")

    monkeypatch.setattr(deploy, "check_units", contacted)
    monkeypatch.setattr(tune, "check_units", contacted)
    monkeypatch.setattr(deploy, "_each_rollback", contacted)
    with pytest.raises(InputError) as refused:
        if task == "deploy":
            deploy.deploy([], "glm5-nvfp4", ConnectOptions(), False, False, False)
        elif task == "tune":
            tune.tune_command([], "glm5-nvfp4", ConnectOptions(), False, True)
        else:
            deploy.rollback([], None, None, ConnectOptions(), False)
    assert str(refused.value).startswith(f"{broken_rules}:8: rule 'cuda_out_of_memory': severity: unknown")
    assert "(and 1 more: inv check); nothing was contacted" in str(refused.value)


def test_a_bench_or_patch_still_loads_the_playbook(broken_rules):
    """They watch no start: a broken rule file is no reason to refuse them."""
    assert inputs.load_playbook("glm5-nvfp4")[0].name == "glm5-nvfp4"


def test_a_broken_phases_file_is_said_too(tmp_path, monkeypatch):
    from fleet.logs import phases
    broken = tmp_path / "startup.yaml"
    broken.write_text((REPO / "playbooks" / "phases" / "startup.yaml").read_text().replace("  - name: start\n",
                                                                                          "  - name: strat\n", 1))
    monkeypatch.setattr(phases, "PHASES_FILE", broken)
    found = datafiles.problems()
    assert found and all(str(broken) in p for p in found)
