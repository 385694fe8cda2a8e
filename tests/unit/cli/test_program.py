"""`inv` is fleet's program (fleet/cli/program.py, installed by pip over invoke's): `inv --version` says fleet's
version, and a command line it cannot parse is one line naming the option, exit 2, with nothing run. Run as a user
runs them: the venv's `inv` and `fleet` scripts, in a fresh process each, from a folder outside the clone."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from invoke.exceptions import ParseError
from invoke.parser.context import ParserContext

from fleet.cli.program import miscast, refusal

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def run(script: str, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / script), *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_both_scripts_are_fleets_program():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["inv"] == scripts["fleet"] == "fleet.cli.program:main"
    assert "fleet.cli.program" in (BIN / "inv").read_text(), (
        f"{BIN / 'inv'} is still invoke's: reinstall fleet into the venv (./bootstrap.sh, or pip install -e .)")


@pytest.mark.parametrize("script", ["inv", "fleet"])
def test_version_is_fleets_from_any_folder(script, tmp_path):
    done = run(script, "--version", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"fleet {version('fleet')}\n", "")


@pytest.mark.parametrize(("args", "said"), [
    (["deploy", "--hots", "x"], "inv deploy: no such option --hots; did you mean --host? (`inv deploy --help` lists "
                                "its options)"),
    (["deploy", "--zzz", "x"], "inv deploy: no such option --zzz (`inv deploy --help` lists its options)"),
    (["deploy", "-H", "x", "--serial"], "inv deploy: --serial needs a value (`inv deploy --help` lists its options)"),
    (["recover", "--host"], "inv recover: --host needs a value (`inv recover --help` lists its options)"),
    # a repeatable option (--host, --group, --set...) left without its value read as never given: `inv status -H
    # $HOST` with HOST unset showed every host, exit 0; `-H -i FILE` took the inventory for nothing
    (["history", "-H"], "inv history: --host needs a value (`inv history --help` lists its options)"),
    (["status", "--group"], "inv status: --group needs a value (`inv status --help` lists its options)"),
    (["history", "-H", "-i", "x.yaml"], "inv history: --host needs a value (`inv history --help` lists its options)"),
    (["history", "-H", "a", "-H"], "inv history: --host needs a value (`inv history --help` lists its options)"),
    (["check", "-p"], "inv check: --playbook needs a value (`inv check --help` lists its options)"),
    (["unlock"], "inv unlock: missing host, token (`inv unlock --help` lists its options)"),
    (["deploy", "-host", "x"], "inv deploy: no such option -host (one dash takes one letter); did you mean --host? "
                               "(`inv deploy --help` lists its options)"),
    (["status", "-json"], "inv status: no such option -json (one dash takes one letter); did you mean --json? "
                          "(`inv status --help` lists its options)"),
    (["probe", "--p2p"], "inv probe: no such option --p2p; did you mean --p2p-check? (`inv probe --help` lists its "
                         "options)"),
    (["status", "-w", "2"], "inv status: -w takes no value, so '2' was read as a task's name (`inv status --help` "
                            "lists its options)"),
    (["status", "--json=true"], "inv status: --json takes no value, so 'true' was read as a task's name (`inv status "
                                "--help` lists its options)"),
    # a second word after an option's value (a shell's glob or list): said as the option's, no longer `no such task`
    (["status", "-H", "sbx0", "extra"], "inv status: -H takes one value, so 'extra' after it was read as a task's "
                                        "name (a shell's glob or list gives several words: give each its own -H) "
                                        "(`inv status --help` lists its options)"),
    # newcomer h-new14: a mistyped task had no nearest name, as hosts, playbooks and options have; a namespace was
    # "no such task"
    (["deploi"], "inv: no such task 'deploi'; did you mean deploy? (`inv --list` lists the tasks)"),
    (["Deploy"], "inv: no such task 'Deploy'; did you mean deploy? (`inv --list` lists the tasks)"),
    (["deploy "], "inv: no such task 'deploy '; did you mean deploy? (`inv --list` lists the tasks)"),
    (["sandbox_up"], "inv: no such task 'sandbox_up'; did you mean sandbox.up? (`inv --list` lists the tasks)"),
    (["sandbox"], "inv: 'sandbox' is a namespace of tasks, not a task: `inv --list sandbox` lists its tasks (`inv "
                  "sandbox.TASK ...`)"),
    (["zzz"], "inv: no such task 'zzz' (`inv --list` lists the tasks)"),
    # h-new20: git's and many tools' `help` and `version` words were `no such task 'help'`, the way to help unsaid
    (["help"], "inv: no such task 'help': help is `inv --help` (a task's: `inv TASK --help`; `inv --list` lists the "
               "tasks)"),
    (["help", "deploy"], "inv: no such task 'help': deploy's help is `inv deploy --help`"),
    (["version"], "inv: no such task 'version': fleet's version is `inv --version`"),
    # invoke runs every task a line names, and fleet's first ends the process: the second was dropped, exit 0
    (["history", "-H", "a", "probe", "-H", "b"], "inv history: one task per command, and 'probe' is a second (run "
                                                 "`inv probe ...` on its own; `inv history --help` lists its options)"),
    (["status", "-w", "probe"], "inv status: -w takes no value, so 'probe' was read as a second task (run `inv probe "
                                "...` on its own; `inv status --help` lists its options)"),
    # words after `--` went to no task: exec said only `missing cmd`, status ran as if they were not there
    (["exec", "-H", "a", "--", "nvidia-smi", "-L"], "inv exec: fleet's tasks take no words after `--` ('nvidia-smi "
                                                    "-L'): the command goes in --cmd: `inv exec ... --cmd 'nvidia-smi "
                                                    "-L'`"),
    (["status", "--", "x"], "inv status: fleet's tasks take no words after `--` ('x'): nothing is passed on"),
    (["--help", "deploi"], "inv: no such task 'deploi'; did you mean deploy? (`inv --list` lists the tasks)"),
    (["--hots"], "inv: no such option --hots (`inv --help` lists the options before a task, `inv TASK --help` a "
                 "task's)"),
    # invoke's own words, exit 1 (a failed host's code): `Sub-collection 'deploy' not found!`
    (["-l", "deploy"], "inv: --list deploy: a task, not a namespace of tasks: `inv deploy --help` is its help "
                       "(`inv --list` lists the tasks)"),
    (["--list", "sandbx"], "inv: --list sandbx: no such namespace of tasks; did you mean sandbox? (`inv --list` lists "
                           "the tasks)"),
    # newcomer h-new13: invoke's AttributeError traceback (`'FleetProgram' object has no attribute 'list_nosuch'`)
    (["-F", "nosuch", "-l"], "inv: --list-format 'nosuch': one of flat, nested, json (`inv --help` lists the options "
                             "before a task)"),
    # invoke's own line, not fleet's form, exit 1 (a failed host's code)
    (["-D", "1", "-F", "json", "-l"], "inv: --list-depth with --list-format json: JSON lists every level (`inv --help` "
                                      "lists the options before a task)"),
    (["--list-format=", "--list"], "inv: --list-format '': one of flat, nested, json (`inv --help` lists the options "
                                   "before a task)"),
])
def test_a_command_line_invoke_cannot_parse_is_one_line_and_exit_2(args, said):
    done = run("inv", *args)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"error: {said}\n")


def test_fleet_names_itself_in_the_error(tmp_path):
    done = run("fleet", "deploy", "--hots", "x", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (2, "error: fleet deploy: no such option --hots; did you mean --host? "
                                                 "(`fleet deploy --help` lists its options)\n")


def test_fleet_names_itself_in_a_task_s_own_error_lines(tmp_path):
    """The newcomer's second hour: parse errors said `fleet`, but a task's own refusals (and the library's
    advice in them) said `inv deploy ...`, a command the operator who typed `fleet` may not have."""
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text("hosts:\n  a: {address: 127.0.0.1}\n  b: {address: 127.0.0.2}\n")
    done = run("fleet", "deploy", "-i", str(inventory), "-H", "a", "-H", "b", "-p", "glm5-nvfp4", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "error: fleet deploy would change 2 hosts (a, b): no terminal to ask on; pass --yes to " \
                          "go ahead\n"
    done = run("inv", "deploy", "-i", str(inventory), "-H", "a", "-H", "b", "-p", "glm5-nvfp4", cwd=tmp_path)
    assert done.stderr.startswith("error: inv deploy would change 2 hosts")


@pytest.mark.parametrize("args", [["--help"], ["--list"], ["deploy", "--help"], ["--version"]])
def test_help_to_a_reader_already_gone_is_no_traceback(args):
    """`fleet --help | head -5` printed a BrokenPipeError traceback from invoke's help (when head had gone before
    the rest was written); now what is left is dropped, exit 0, as the tasks' own output does."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    try:
        done = subprocess.run([str(BIN / "fleet"), *args], cwd=REPO, stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")


# invoke's core options, which act on shell commands run through invoke (fleet runs none): `fleet --dry deploy`
# deployed for real, `-w` after `probe` set --warn-only without a word
INVOKES_OWN = ["--dry", "-R", "--echo", "-e", "--hide=both", "--pty", "-p", "--warn-only", "-w",
               "--prompt-for-sudo-password", "--command-timeout=5", "-T", "--config=x.yaml", "-f", "--debug", "-d",
               "--write-pyc", "--collection=x", "-c", "--search-root=x", "-r", "--no-dedupe"]


def test_help_lists_only_the_core_options_that_mean_something_for_fleet():
    done = run("fleet", "--help")
    core = done.stdout.split("Subcommands:")[0]
    assert done.returncode == 0
    for gone in ("--dry", "--echo", "--warn-only", "--prompt-for-sudo-password", "--command-timeout", "--config",
                 "--hide", "--pty", "--debug", "--write-pyc"):
        assert gone not in core, gone
    for kept in ("--help", "--version", "--list"):
        assert kept in core


@pytest.mark.parametrize(("option", "where"), [
    (option, where) for option in INVOKES_OWN for where in ("before the task", "after the task")
    if not (option == "-p" and where == "after the task")])  # after `deploy`, -p is deploy's own --playbook
def test_invokes_own_options_are_refused_in_one_line_and_nothing_runs(option, where, tmp_path):
    """Before the task or after it (invoke takes its core options anywhere): exit 2, one line naming the option,
    nothing on stdout; the deploy never starts (its inventory does not even exist)."""
    task = ["deploy", "-H", "gpu-node-1", "-i", str(tmp_path / "none.yaml"), "--playbook", "glm5-nvfp4", "--force"]
    args = [option, *task] if where == "before the task" else [*task, option]
    if option == "-T":
        args.insert(args.index("-T") + 1, "5")
    done = run("fleet", *args, cwd=tmp_path)
    flag = option.partition("=")[0]
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: fleet") and f" {flag} is " in done.stderr
    assert "Traceback" not in done.stderr and "none.yaml" not in done.stderr


@pytest.mark.parametrize(("args", "said"), [
    (["--dry", "deploy"], "fleet: --dry is an option of invoke, not of fleet: fleet's dry run is the task's own "
                          "--dry-run (-n): `fleet deploy --dry-run ...`"),
    (["status", "-w"], None),
    (["status", "-p", "x"], "fleet status: -p is --playbook, an option of some tasks, not of this one"),
    (["status", "-n", "5"], "fleet status: -n is --dry-run or --lines, an option of some tasks, not of this one"),
    (["--prompt-for-sudo-password", "probe"], "fleet: --prompt-for-sudo-password is an option of invoke, not of "
                                              "fleet: sudo's password is asked once by the task's --ask-become-pass "
                                              "(-k): `fleet deploy -k ...`"),
    (["-f", "x", "logs"], "fleet: -f is --follow, a task's option, given after the task's name"),
])
def test_a_dropped_option_says_what_fleet_has_in_its_place(args, said, tmp_path):
    done = run("fleet", *args, cwd=tmp_path)
    if said is None:  # status has -w (--watch): it parses, and fails later on the missing inventory instead
        assert "is an option of invoke" not in done.stderr
        return
    assert (done.returncode, done.stderr.partition(" (`")[0]) == (2, f"error: {said}")


def test_a_message_invoke_may_add_later_still_names_the_task_in_one_line():
    exc = ParseError("'x' is ambiguous when given after an optional-value flag", ParserContext(name="logs"))
    assert refusal(exc, "inv") == ("inv logs: 'x' is ambiguous when given after an optional-value flag "
                                   "(`inv logs --help` lists its options)")


@pytest.mark.parametrize(("argv", "said"), [
    (["recover", "--host", "h", "--wait", "abc"], "inv: --wait 'abc': want a whole number"),
    (["recover", "--host", "h", "--wait=abc"], "inv: --wait 'abc': want a whole number"),
    (["recover", "abc"], "inv: an option 'abc': want a whole number"),
])
def test_a_value_invokes_own_cast_refuses_is_one_line_naming_the_option(argv, said):
    """An int or float option not in tasking.NUMBERS (none today): invoke's int('abc') says which option."""
    line = miscast(ValueError("invalid literal for int() with base 10: 'abc'"), ["inv", *argv], "inv")
    assert line == f"{said} (`inv TASK --help` lists a task's options)"


def test_help_before_the_task_is_the_tasks_own_and_names_one_task():
    before, after = run("inv", "--help", "status"), run("inv", "status", "--help", "probe")
    assert before.returncode == after.returncode == 0 and before.stdout == after.stdout
    assert before.stdout.startswith("Usage: inv status [--options]\n") and "other tasks" not in before.stdout


@pytest.mark.parametrize("args", [["--help", "deploy", "--host"], ["-h", "deploy", "-H", "sbx0", "--dry-run"],
                                  ["--help", "deploy", "--nosuch"]])
def test_help_before_the_task_is_its_help_whatever_follows(args):
    """`inv --help deploy --host` said `--host is a task's option, given after the task's name` (it was), exit 2:
    invoke read `deploy` as --help's value and `--host` as one of its own options."""
    asked, plain = run("inv", *args), run("inv", "deploy", "--help")
    assert (asked.returncode, asked.stdout, asked.stderr) == (0, plain.stdout, ""), asked.stderr


def test_completion_still_reads_the_words_after_dashes():
    done = run("inv", "--complete", "--", "inv", "deploy", "--")
    assert done.returncode == 0 and "--dry-run" in done.stdout.split()


@pytest.mark.parametrize(("args", "said"), [
    # newcomer h-new13: `inv deploy --all --serial "$BATCH"` with BATCH unset deployed every host at once, exit 0;
    # `-i ''` read the site's inventory, `--max-fail ''` and `exec --timeout ''` their defaults, `-p ''` said "not
    # given": an empty value was read as the option left out
    (["deploy", "--all", "-p", "glm5-nvfp4", "--serial", "", "--yes"], "inv deploy: --serial ''"),
    (["deploy", "--all", "-p", "glm5-nvfp4", "--serial=", "--yes"], "inv deploy: --serial ''"),
    (["deploy", "-H", "a", "-p", "glm5-nvfp4", "--max-fail", "", "--dry-run"], "inv deploy: --max-fail ''"),
    (["deploy", "-i", "", "-H", "a", "--dry-run"], "inv deploy: --inventory ''"),
    (["deploy", "-H", "a", "-p", "", "--dry-run"], "inv deploy: --playbook ''"),
    (["exec", "-H", "a", "--timeout", "", "true"], "inv exec: --timeout ''"),
    (["exec", "-H", "a", ""], "inv exec: --cmd ''"),
    (["exec", "-H", "a", "--cmd="], "inv exec: --cmd ''"),
    # blanks alone were read the same way: `--serial ' '` deployed all at once too
    (["deploy", "--all", "-p", "glm5-nvfp4", "--serial= ", "--yes"], "inv deploy: --serial ' '"),
    (["deploy", "-i", " ", "-H", "a", "--dry-run"], "inv deploy: --inventory ' '"),
])
def test_an_empty_value_is_refused_not_read_as_the_option_left_out(args, said):
    done = run("inv", *args)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"error: {said}: an empty value (an unset shell variable?); leave the option out for "
                           f"its default (`inv {args[0]} --help` lists its options)\n")


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["learned", "--json"], ["deploi"]])
def test_invokes_config_files_are_never_read(args, tmp_path):
    """newcomer h-new14: fleet read invoke's config files (/etc/invoke.yaml, ~/.invoke.yaml, the clone's
    invoke.yaml) though it runs no shell command through invoke: a broken ~/.invoke.yaml left by Fabric work made
    every command, `--version` and `--help` too, a YAML ParserError traceback, exit 1; a ~/.invoke.py ran."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".invoke.yaml").write_text("run: [unclosed\n")
    (home / ".invoke.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    env = {**os.environ, "HOME": str(home), "FLEET_STATE_DIR": str(tmp_path / "state"),
           "INVOKE_RUNTIME_CONFIG": str(home / ".invoke.yaml"), "INVOKE_RUN_ENV": "not a dict"}
    done = subprocess.run([str(BIN / "inv"), *args], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env=env)
    assert "Traceback" not in done.stderr and "invoke.yaml" not in done.stderr, done.stderr
    assert done.returncode == (2 if args == ["deploi"] else 0), done.stderr
    assert not (tmp_path / "ran").exists()


def test_every_script_invoke_installs_is_fleets_program_too():
    """h-new20 (issue 46 finding 2): the venv's `invoke` (Invoke's documented name for `inv`) stayed invoke's own
    program, with every core option fleet refuses: `invoke --dry deploy ... --force` restarted sbx0's server for
    real (a new release), as `fleet --dry` did. pip writes fleet's scripts over its dependencies' of the same name."""
    from importlib.metadata import distribution

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    invokes = {e.name for e in distribution("invoke").entry_points if e.group == "console_scripts"}
    assert invokes >= {"inv", "invoke"}
    assert {name: scripts.get(name) for name in invokes} == dict.fromkeys(invokes, "fleet.cli.program:main")
