"""One command line for every task: the option vocabulary, help that never runs a task, typed numbers, the
exit-code table (the code, every task's help, README.md and docs/cli.md say the same)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.cli import tasking

REPO = Path(__file__).resolve().parents[3]
INV = Path(sys.executable).parent / "inv"


def _tasks():
    spec = importlib.util.spec_from_file_location("fleet_tasks_under_test", REPO / "tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ns


NS = _tasks()
TASKS = sorted(NS.task_names)


def _flags() -> dict[str, dict[str, list[str]]]:
    """task -> option -> its flags, as the parser sees them."""
    return {name: {a.name: sorted(a.names) for a in NS[name].get_arguments()} for name in TASKS}


def test_a_short_letter_means_one_option_in_every_task_and_h_is_only_help():
    """-n alone has two meanings (tasking.TWO_MEANINGS), never both in one task."""
    meaning: dict[str, set[str]] = {}
    for task, options in _flags().items():
        letters = [n for names in options.values() for n in names if len(n) == 1]
        assert len(letters) == len(set(letters)), task
        for option, names in options.items():
            for letter in (n for n in names if len(n) == 1):
                meaning.setdefault(letter, set()).add(option)
    for letter, options in meaning.items():
        assert options == set(tasking.TWO_MEANINGS.get(letter, options)) and (
            len(options) == 1 or letter in tasking.TWO_MEANINGS), f"-{letter} is {sorted(options)}"
    assert meaning["h"] == {"help"} and meaning["H"] == {"host"} and meaning["n"] == {"dry_run", "lines"}
    assert {(k, o) for k, v in meaning.items() if k != "h" for o in v} == {(v, k) for k, v in tasking.SHORT.items()}


def _parsed(task: str, *argv: str) -> dict[str, object]:
    """What invoke's parser makes of `inv TASK ARGV` with the task's own arguments."""
    from invoke.parser import Parser, ParserContext

    context = ParserContext(name=task, args=NS[task].get_arguments())
    done = Parser(initial=ParserContext(), contexts=[context]).parse_argv([task, *argv])
    parsed = next(c for c in done if c.name == task)
    return {name: arg.value for name, arg in parsed.args.items()}


def test_logs_takes_n_as_lines_as_tail_and_journalctl_do():
    """`inv logs -n 50` is the last 50 lines (it was refused: -n was --dry-run only); deploy's -n stays its dry
    run."""
    assert _parsed("logs", "-n", "50", "-f")["lines"] == "50"
    assert _parsed("logs", "-n50")["lines"] == "50"
    assert _parsed("deploy", "-n")["dry-run"] is True


def test_a_task_given_one_letter_for_two_options_is_refused_when_it_is_defined():
    def both(c, dry_run=False, lines=None):
        """Both meanings of -n in one task."""

    with pytest.raises(ValueError, match="one short letter for two options"):
        tasking.task(both).get_arguments()


def test_every_task_has_h_and_help():
    for task, options in _flags().items():
        assert options["help"] == ["h", "help"], task


def _table(path: Path, heading: str) -> list[list[str]]:
    text = path.read_text().split(heading, 1)[1]
    rows = []
    for line in text.splitlines()[1:]:
        if line.startswith("#"):
            break
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows[1:]


def test_the_docs_option_table_lists_every_option_with_its_letter():
    documented: dict[str, str] = {}
    for option, short, *_ in _table(REPO / "docs/cli.md", "## Options"):
        for name in re.findall(r"`--([a-z0-9-]+)`", option):
            documented[name] = short.strip("`-")
    every = {n for options in _flags().values() for names in options.values() for n in names if len(n) > 1}
    assert set(documented) == every
    for option, letter in tasking.SHORT.items():
        assert documented[option.replace("_", "-")] == letter
    assert {k for k, v in documented.items() if v} == {o.replace("_", "-") for o in tasking.SHORT} | {"help"}


@pytest.mark.parametrize(("doc", "heading"), [("README.md", "## Exit codes"), ("docs/cli.md", "## Exit codes")])
def test_the_exit_code_tables_are_the_code(doc, heading):
    rows = [(int(code), meaning) for code, meaning in _table(REPO / doc, heading)]
    assert rows == list(tasking.EXIT_CODES)


def test_every_tasks_help_ends_with_the_exit_codes():
    for task in TASKS:
        assert (NS[task].__doc__ or "").rstrip().endswith(tasking.EXIT_CODES_HELP), task


@pytest.mark.parametrize(("text", "sm"), [("120", 120), ("12.0", 120), ("8.6", 86), (" 90 ", 90), ("10.0", 100)])
def test_an_sm_is_read_as_fleet_or_nvidia_smi_writes_it(text, sm):
    assert tasking.parse_sm(text) == sm


@pytest.mark.parametrize("text", ["abc", "12.", "1.2.0", "12.05", "", "-120", "9", "１２０", "12.０"])
def test_an_sm_that_is_not_one_is_refused(text):
    with pytest.raises(ValueError):
        tasking.parse_sm(text)


@pytest.mark.parametrize(("name", "text"), [("port", "abc"), ("port", "0"), ("port", "70000"), ("interval", "0"),
                                            ("interval", "nan"), ("host_timeout", "-5"), ("runs", "2.5"),
                                            ("runs", "21"), ("hosts", "many"), ("port", "²²"), ("port", "２２")])
def test_numbers_that_are_not_are_refused(name, text):
    with pytest.raises(ValueError):
        tasking.NUMBERS[name](text)


def test_every_number_option_is_read_by_numbers():
    """An int or float default left to invoke's own cast would be a traceback on `--opt abc` (as --wait was)."""
    for task in TASKS:
        for param in NS[task].argspec(NS[task].body).parameters.values():
            if type(param.default) in (int, float):
                assert param.name in tasking.NUMBERS, f"inv {task} --{param.name}: add it to tasking.NUMBERS"


def _inv(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(INV), *args], cwd=REPO, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("args", [("classify", "--help"), ("classify", "x.log", "-h"), ("exec", "--help"),
                                  ("unlock", "-h"), ("sandbox.cut", "--help"), ("deploy", "-h"),
                                  ("deploy", "-H", "nosuchhost", "--help")])
def test_help_is_help_before_and_after_positionals_and_reads_nothing(args, tmp_path):
    done = _inv(*args[:1], "-i", str(tmp_path / "none.yaml"), *args[1:]) if args[0] == "deploy" else _inv(*args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Usage: inv {args[0]} ") and "Exit codes:" in done.stdout
    assert done.stderr == ""


@pytest.mark.parametrize(("args", "says"), [
    (("status", "--interval", "2"), "--interval is the seconds between --watch's refreshes; add --watch"),
    (("status", "--detail", "sbx0", "-H", "sbx1"), "--detail sbx0 names its one host: leave out --host and --group"),
    (("status", "--detail", "sbx0", "-g", "pcie"), "--detail sbx0 names its one host"),
])
def test_an_option_that_would_do_nothing_is_refused(args, says, tmp_path):
    """The newcomer's second hour: `inv status --interval 2` drew one board and ended (--interval is --watch's),
    `inv status --detail sbx0 -H sbx1` showed sbx0 alone: each option taken and silently left unused."""
    done = _inv(*args[:1], "-i", str(tmp_path / "none.yaml"), *args[1:])
    assert (done.returncode, done.stdout) == (2, "") and done.stderr.startswith(f"error: {says}"), done.stderr


@pytest.mark.parametrize(("detail", "says"), [
    ("sbx9", "--detail sbx9: no such host in the inventory; did you mean sbx1?"),
    ("nosuch", "--detail nosuch: no such host in the inventory (known: sbx0, sbx1)"),
    ("sbx*", "--detail 'sbx*': one host in full (2 matched); name one"),  # quoted as typed: it was bare
])
def test_detail_names_itself_and_one_host(detail, says, tmp_path):
    """Newcomer's third hour: `inv status --detail sbx9` (a typo) said '--host sbx9: no such host', an option never
    typed, and `--detail 'sbx*'` drew every host matched, where --detail is one host in full. Nothing is contacted
    (the hosts listen nowhere)."""
    (tmp_path / "hosts.yaml").write_text("hosts: {sbx0: {address: 127.0.0.1, port: 9}, sbx1: {address: 127.0.0.1, "
                                         "port: 9}}\n")
    done = _inv("status", "-i", str(tmp_path / "hosts.yaml"), "--detail", detail)
    assert (done.returncode, done.stdout, done.stderr.splitlines()[-1]) == (2, "", f"error: {says}"), done.stderr


@pytest.mark.parametrize(("args", "says"), [
    (("status", "--port", "abc"), "--port 'abc': a port from 1 to 65535"),
    (("audit", "--sm", "abc"), "--sm 'abc': an SM like 120"),
    (("tune", "--runs", "lots"), "--runs 'lots'"),
    (("deploy", "--host-timeout", "soon"), "--host-timeout 'soon'"),
    (("recover", "--host", "h", "--wait", "abc"), "--wait 'abc': a number of seconds above 0"),
    (("recover", "--host", "h", "--wait", "0"), "--wait '0': a number of seconds above 0"),
    (("recover", "--host", "h", "--wait=-5"), "--wait '-5': a number of seconds above 0"),
])
def test_a_number_that_is_not_one_is_one_line_and_exit_2(args, says, tmp_path):
    done = _inv(*args[:1], "-i", str(tmp_path / "none.yaml"), *args[1:])
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == f"error: {done.stderr.strip()[7:]}" and says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_line_names_commands_as_the_program_the_operator_ran():
    line = "t.yaml:3: flags.x: ... (and 1 more: inv check --playbook t); `inv unlock --host h` or ~/.venv/bin/inv probe"
    assert tasking.as_run(line, "inv") == line
    assert tasking.as_run(line, "fleet") == ("t.yaml:3: flags.x: ... (and 1 more: fleet check --playbook t); `fleet "
                                             "unlock --host h` or ~/.venv/bin/inv probe")
    assert tasking.as_run("invalid inventory; inv", "fleet") == "invalid inventory; inv"


def test_the_help_of_deploy_and_of_the_targets_says_what_they_do_now():
    """The newcomer's second hour: `inv deploy --help` said --force is for a release that 'already serves this
    playbook' (the old "unchanged", before the dry run and the deploy shared one plan), and every task's --host
    and --group said 'host name or address' / 'inventory group', never the patterns they take (docs/cli.md)."""
    deploy = NS["deploy"].help
    assert "this playbook" not in deploy["force"] and "unchanged" in deploy["force"]
    assert all(word in deploy["force"] for word in ("unit", "env", "patch sets", "venv", "rung"))
    assert "nothing to do" in deploy["dry_run"] and "rung" in deploy["dry_run"]
    assert "--group" not in NS["recover"].help["inventory"]  # it has no --group, and needs its one --host
    for task in ("probe", "status", "logs", "history", "deploy", "rollback", "tune", "bench", "exec", "patch"):
        helps = NS[task].help
        assert "pattern" in helps["host"] and "'!" in helps["host"], task
        assert "'!" in helps["group"] and "'&" in helps["group"], task


def _documented_tasks(cell: str, host_tasks: list[str]) -> set[str] | None:
    """The tasks a cell of the option table names ('host tasks' as the page lists them, 'sandbox.cut/heal' as
    two), or None for 'every task ...'."""
    cell = cell.replace("`", "").replace("host tasks", " ".join(host_tasks))
    if cell.startswith("every task"):
        return None
    named = set()
    for word in re.findall(r"[a-z][a-z0-9.]*(?:/[a-z]+)*", cell):
        first, *more = word.split("/")
        named |= {first, *(f"{first.rsplit('.', 1)[0]}.{m}" for m in more)}
    return named & set(TASKS)


def test_the_docs_option_table_names_the_tasks_each_option_is_in():
    """The newcomer's second hour: --inventory, --host, --dry-run, -k ... were in recover, learned, forget or check
    too, which docs/cli.md's table left out (`inv recover -n` is its dry run; the table said deploy and forget)."""
    text = (REPO / "docs/cli.md").read_text()
    host_tasks = re.search(r"^Host tasks: ([a-z, ]+)\.", text, re.M).group(1).split(", ")
    flags = _flags()
    wrong = []
    for option, _short, tasks, *_ in _table(REPO / "docs/cli.md", "## Options"):
        names = re.findall(r"`--([a-z0-9-]+)`", option)
        documented = _documented_tasks(tasks, host_tasks)
        real = {t for t in TASKS for n in names if any(n in flag for flag in flags[t].values())}
        if documented is not None and documented != real:
            wrong.append(f"{', '.join(names)}: docs {sorted(documented)}, tasks {sorted(real)}")
    assert not wrong, "\n".join(wrong)


def test_every_task_s_line_in_the_list_is_a_whole_sentence():
    """The newcomer's second hour: `inv --list` shows each docstring's first line, and five stopped mid-sentence
    ('check  Check playbooks ...: schema, every flag against the sglang releases they can')."""
    cut = [t for t in TASKS if not (NS[t].__doc__ or "").strip().splitlines()[0].rstrip().endswith(".")]
    assert not cut, cut
