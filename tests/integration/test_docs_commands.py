"""Every command the docs show works: `sh sandbox` blocks run in order against the test's sandbox fleet, `sh real`
blocks are checked (the task and each flag exist; a --dry-run runs against a sandbox host instead), `sh setup`
names files that exist. Real addresses are never contacted: the guard is on and they are blackholed."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
KINDS = {"sandbox", "real", "setup"}
SHELLS = {"sh", "bash", "shell", "console"}
DEMO_INVENTORY = "inventory/sandbox.yaml"  # what a user's demo fleet writes; the test's own fleet replaces it
INV = str(REPO / ".venv/bin/inv")


@dataclass(frozen=True)
class Command:
    where: str  # file:line
    kind: str
    text: str
    exit_code: int = 0
    until_ctrl_c: bool = False


def commands(path: Path) -> list[Command]:
    """The shell commands of a markdown file's fenced blocks, one per line; a shell block must say its kind."""
    found, kind, rel = [], None, path.relative_to(REPO)
    for n, line in enumerate(path.read_text().splitlines(), 1):
        fence = re.match(r"^\s*```(.*)$", line)
        if fence:
            if kind is not None:
                kind = None
                continue
            info = fence.group(1).split()
            if info and info[0] in SHELLS:
                assert len(info) > 1 and info[1] in KINDS, (
                    f"{rel}:{n}: a shell block must say where it runs: ```{info[0]} sandbox|real|setup")
                kind = info[1]
            else:
                kind = "other"
            continue
        if kind in KINDS and line.strip() and not line.lstrip().startswith("#"):
            text, _, comment = line.partition(" #")
            code = re.search(r"exit (\d+)", comment)
            found.append(Command(f"{rel}:{n}", kind, text.strip(), int(code.group(1)) if code else 0,
                                 "until Ctrl-C" in comment))
    return found


ALL = [c for path in DOCS for c in commands(path)]


def _argv(cmd: Command, inventory: Path) -> list[str]:
    argv = shlex.split(cmd.text)
    assert argv[0] == "inv", f"{cmd.where}: docs' commands are `inv ...`: {cmd.text}"
    return [INV, *(str(inventory) if a == DEMO_INVENTORY else a for a in argv[1:])]


def _flags(argv: list[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in argv if a.startswith("-")]


def _check_flags(cmd: Command, argv: list[str]) -> None:
    """The task exists and its --help lists every flag the docs use."""
    task, flags = argv[1], _flags(argv[2:])
    done = subprocess.run([INV, "--help", task], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{cmd.where}: no task {task!r}: {done.stderr}"
    options = done.stdout.split("Options:", 1)[-1]
    for flag in flags:
        assert re.search(rf"(^|[\s,]){re.escape(flag)}([=\s,]|$)", options, re.M), (
            f"{cmd.where}: `inv {task}` has no {flag} (docs: {cmd.text})")


def test_the_docs_show_commands_of_every_kind_and_every_shell_block_says_its_kind():
    kinds = {c.kind for c in ALL}
    assert kinds == KINDS, kinds
    assert sum(c.kind == "sandbox" for c in ALL) >= 10
    assert all(DEMO_INVENTORY not in c.text for c in ALL if c.kind == "real")  # real ones name real hosts


def test_nothing_here_can_reach_a_real_machine():
    assert os.environ.get("FLEET_SANDBOX_ONLY") == "1"
    real = yaml.safe_load((REPO / "inventory/hosts.example.yaml").read_text())["hosts"]
    routes = subprocess.run(["ip", "route", "show", "type", "blackhole"], capture_output=True, text=True).stdout
    for name, spec in real.items():
        assert re.search(rf"^blackhole {re.escape(spec['address'])}\b", routes, re.M), f"{name} is not blackholed"


@pytest.mark.parametrize("cmd", [c for c in ALL if c.kind == "setup"], ids=lambda c: c.where)
def test_setup_commands_name_what_exists(cmd):
    for part in cmd.text.split("&&"):
        argv = shlex.split(part)
        exe = REPO / argv[0]
        assert exe.is_file() and os.access(exe, os.X_OK), f"{cmd.where}: {argv[0]} is missing"
        if exe.name == "inv":
            _check_flags(cmd, ["inv", *argv[1:]])


@pytest.mark.timeout(300)
def test_real_machine_commands_exist_and_dry_runs_work_on_a_sandbox_host(sandbox):
    """Checked, never run against the hosts they name: --help for every task and flag; a --dry-run goes to sbx0."""
    real = [c for c in ALL if c.kind == "real"]
    assert real
    dry = 0
    for cmd in real:
        argv = _argv(cmd, sandbox.cfg.inventory_path)
        _check_flags(cmd, argv)
        if "--dry-run" in argv:
            args = argv[2:]
            for i, a in enumerate(args[:-1]):
                if a in ("--host", "-H"):
                    args[i + 1] = "sbx0"
            done = subprocess.run([INV, argv[1], "-i", str(sandbox.cfg.inventory_path), *args], cwd=REPO,
                                  capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
            assert done.returncode == 0, f"{cmd.where}: {cmd.text} (on sbx0): {done.stderr[-2000:]}"
            dry += 1
    assert dry >= 1


@pytest.mark.timeout(900)
def test_the_sandbox_tour_runs_as_written(sandbox):
    """In document order, as a user would type them; `inventory/sandbox.yaml` is this instance's inventory. As in
    a newcomer's shell, no FLEET_WHEELHOUSE: the pinned deploys build from the wheelhouse sandbox.up made."""
    newcomer = {k: v for k, v in os.environ.items() if k != "FLEET_WHEELHOUSE"}
    for cmd in [c for c in ALL if c.kind == "sandbox"]:
        argv = _argv(cmd, sandbox.cfg.inventory_path)
        if cmd.until_ctrl_c:
            # a terminal as far as rich is concerned, so the board draws at once instead of when it ends
            env = {**newcomer, "TTY_INTERACTIVE": "1", "TTY_COMPATIBLE": "1", "COLUMNS": "200"}
            proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    stdin=subprocess.DEVNULL, env=env)
            first = proc.stdout.readline()
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
            assert first and proc.returncode == 130 and "Traceback" not in err, f"{cmd.where}: {cmd.text}: {err}"
            continue
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                              env=newcomer)
        assert done.returncode == cmd.exit_code, (
            f"{cmd.where}: {cmd.text}: exit {done.returncode}, expected {cmd.exit_code}\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
