"""The layout's contracts, run with the suite (so CI runs them): the import layers between and within the
subpackages and the library's independence from rich (import-linter), types (mypy, configured in pyproject.toml),
no import cycles, no function-local imports in the library, tasks.py over the CLI layer only, modules one can read
in a sitting, and a layout whose folders say what they hold."""

from __future__ import annotations

import ast
import importlib.util
import ipaddress
import os
import pkgutil
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import fleet

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LIBRARY = sorted(m.name for m in pkgutil.walk_packages(fleet.__path__, "fleet.")
                 if not m.name.startswith(("fleet.cli", "fleet.host.programs.")))
MAX_LINES = 500


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_import_linter_contracts_are_kept():
    done = _run(str(BIN / "lint-imports"), "--no-cache")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "10 kept, 0 broken" in done.stdout


def _contracts() -> list[dict]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_the_no_rich_contract_covers_every_library_module():
    forbidden = next(c for c in _contracts() if c["type"] == "forbidden")
    sources = forbidden["source_modules"]
    uncovered = [m for m in LIBRARY if not any(m == s or m.startswith(s + ".") for s in sources)]
    assert uncovered == [], "a new library module must join the contract"


def _layer_names(layers: list[str]) -> set[str]:
    return {name.strip() for layer in layers for name in layer.replace("|", ":").split(":")}


def test_the_layers_place_every_subpackage_and_top_level_module():
    """A module or subpackage no layer names is free to import anything: each must have its place."""
    contracts = {tuple(c["containers"]): c["layers"] for c in _contracts() if c["type"] == "layers"}
    top = {p.stem for p in (REPO / "fleet").glob("*.py") if p.stem != "__init__"}
    packages = {p.parent.name for p in (REPO / "fleet").glob("*/__init__.py")}
    assert _layer_names(contracts[("fleet",)]) == top | packages
    for package in packages - {"cli"}:
        inside = {p.stem for p in (REPO / "fleet" / package).glob("*.py") if p.stem != "__init__"}
        inside |= {p.parent.name for p in (REPO / "fleet" / package).glob("*/__init__.py")}
        assert _layer_names(contracts[(f"fleet.{package}",)]) == inside, package


def test_the_top_level_holds_primitives_and_the_folders_say_what_they_hold():
    top = sorted(p.name for p in (REPO / "fleet").glob("*.py"))
    assert len(top) <= 12, top
    packages = sorted(p.parent for p in (REPO / "fleet").glob("*/__init__.py"))
    assert len(packages) >= 6
    for init in packages:
        doc = ast.get_docstring(ast.parse((init / "__init__.py").read_text())) or ""
        assert len(doc.splitlines()) >= 3 and "May use" in doc, f"{init.relative_to(REPO)}: say what it holds and uses"


def test_mypy_passes_on_all_of_fleet():
    done = _run(sys.executable, "-m", "mypy")
    assert done.returncode == 0, done.stdout[-4000:]


def _imports(path: Path) -> dict[str, set[str]]:
    """fleet modules each module imports, at any depth of its body."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fleet"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("fleet"))
    return {path.as_posix(): found}


def _module_files() -> dict[str, Path]:
    out = {}
    for path in (REPO / "fleet").rglob("*.py"):
        rel = path.relative_to(REPO).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out[name] = path
    return out


def test_no_import_cycles_among_fleet_modules():
    files = _module_files()
    graph = {m: {d for d in next(iter(_imports(p).values())) if d in files and d != m} for m, p in files.items()}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if d.startswith(m + "."):  # a package importing its own submodule is not a cycle
                continue
            assert state.get(d) != 1, "import cycle: " + " -> ".join([*path, m, d])
            if d not in state:
                visit(d, [*path, m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def test_the_library_imports_at_the_top_only():
    late = []
    for name in LIBRARY:
        path = _module_files()[name]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                late += [f"{path.relative_to(REPO)}:{n.lineno}" for n in ast.walk(node)
                         if isinstance(n, ast.Import | ast.ImportFrom)]
    assert late == []


def test_tasks_py_imports_only_the_cli_layer():
    imported = next(iter(_imports(REPO / "tasks.py").values()))
    assert imported and all(m.startswith("fleet.cli") or m == "fleet" for m in imported), sorted(imported)


def test_every_module_can_be_read_in_one_sitting():
    long = {str(p.relative_to(REPO)): n for p in (REPO / "fleet").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_test_files_have_unique_basenames():
    """pytest's default import mode (rootdir, no __init__.py in tests/) imports each test file by its basename: two
    files of one name make the whole collection fail in CI (stop 41 did not land for tests/unit/host/test_venvs.py
    beside tests/integration/test_venvs.py), though each half passed alone."""
    seen: dict[str, list[str]] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


# The run on a host is written once (fleet.deploy.hostrun): these calls open or close what the skeleton guards.
SKELETON_CALLS = {"hostlock.acquire", "hostlock.release", "acquire_lock", "release_lock", "ReleaseRun.open"}
SKELETON_HOMES = {"fleet/deploy/hostrun.py", "fleet/host/session.py", "fleet/host/lock.py"}


def _called(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        base = func.value
        if isinstance(base, ast.Name) and base.id in ("hostlock", "ReleaseRun"):
            return f"{base.id}.{func.attr}"
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def test_no_operation_takes_a_lock_opens_a_release_run_or_marks_a_rollback_outside_the_run_skeleton():
    """Lock, recovery, release run, rollback mark, fall-back and put-back live in fleet.deploy.hostrun; every
    operation (deploy, tune, bench, rollback, before-fleet, router, multi-node, patch, recover) gives its body."""
    found = []
    for path in sorted((REPO / "fleet").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel in SKELETON_HOMES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = _called(node)
                if name in SKELETON_CALLS or name.endswith(".held"):
                    found.append(f"{rel}:{node.lineno}: {name}")
                if name in ("write_atomic", "sh") and "ROLLBACK_MARK" in ast.unparse(node) and rel != \
                        "fleet/deploy/recovery.py":  # recovery reads and clears a dead run's mark
                    found.append(f"{rel}:{node.lineno}: {name} of ROLLBACK_MARK")
            if isinstance(node, ast.ImportFrom) and node.module == "fleet.host.lock":
                found += [f"{rel}:{node.lineno}: imports {a.name}" for a in node.names
                          if a.name in ("acquire", "release")]
    assert not found, "outside fleet.deploy.hostrun:\n" + "\n".join(found)


def test_one_fall_back_writes_where_a_failed_deploy_leaves_a_host():
    """Deploy, tune, router and multi-node fall back through fleet.deploy.fallback: no other module builds a
    FellBack (where a host was left, and the one line saying so) nor a fall-back of its own. Multi-node's
    group (every node stopped, put back, then started together) ends each node in the fall-back's words."""
    found = []
    for path in sorted((REPO / "fleet").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel == "fleet/deploy/fallback.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and _called(node) == "FellBack":
                found.append(f"{rel}:{node.lineno}: FellBack(...)")
            if isinstance(node, ast.FunctionDef) and node.name.lstrip("_") == "fall_back" and \
                    "fallback." not in ast.unparse(node):
                found.append(f"{rel}:{node.lineno}: a fall-back of its own")
    assert not found, "outside fleet.deploy.fallback:\n" + "\n".join(found)


# A sandbox test runs on whichever worker's fleet a parallel run gives it (tests/conftest.py: lane0, lane1, ...), so
# it names no instance and no address of one: it takes them from its fixtures (sandbox.cfg, the inventory) or from
# FLEET_SANDBOX_INSTANCE as conftest set it. A string that only looks like an address (an input fleet must refuse)
# says so on its line with this comment.
NOT_AN_INSTANCE_ADDRESS = "# not an instance's address"
_SANDBOX_FIXTURES = re.compile(r"\b(_sandbox_session|sandbox_inventory)\b|def \w+\([^)]*\bsandbox\b[,)]|"
                               r"from sandbox\.(config|hosts) import")
_QUAD = re.compile(r"(?<![\d.])(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})(?![\d.])")


def _sandbox_test_files() -> list[Path]:
    return [p for p in sorted((REPO / "tests").rglob("*.py"))
            if p != REPO / "tests" / "conftest.py" and _SANDBOX_FIXTURES.search(p.read_text())]


def _instance_literals(tree: ast.AST, instances: set[str]) -> list[tuple[int, str]]:
    """Where a literal instance name is given to the sandbox: config("test"), a FLEET_SANDBOX_INSTANCE value or
    default (environ.get, setenv, a dict or an assignment)."""
    found = []

    def literal(node: ast.AST | None) -> str | None:
        return node.value if isinstance(node, ast.Constant) and node.value in instances else None

    def names_var(node: ast.AST | None) -> bool:
        return isinstance(node, ast.Constant) and node.value == "FLEET_SANDBOX_INSTANCE"

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func == "config" and node.args and literal(node.args[0]):
                found.append((node.lineno, f"config({node.args[0].value!r})"))  # type: ignore[attr-defined]
            if func in ("get", "setenv", "setdefault", "getenv") and len(node.args) > 1 and names_var(node.args[0]) \
                    and literal(node.args[1]):
                found.append((node.lineno, f"FLEET_SANDBOX_INSTANCE {node.args[1].value!r}"))  # type: ignore
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if names_var(key) and literal(value):
                    found.append((node.lineno, f"FLEET_SANDBOX_INSTANCE: {value.value!r}"))  # type: ignore
        elif isinstance(node, ast.Assign) and literal(node.value):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and names_var(target.slice):
                    found.append((node.lineno, f"FLEET_SANDBOX_INSTANCE = {node.value.value!r}"))  # type: ignore
    return found


def test_sandbox_tests_assume_no_instance_and_no_fixed_address():
    """No sandbox test names a sandbox instance (the serial run's 'test' is not a parallel worker's) or carries an
    address, bridge, namespace or home of one: each would pass alone and fail on another worker's lane."""
    from sandbox.config import _INSTANCES, config

    instances = set(_INSTANCES)
    subnets = [config(name).subnet for name in instances]
    homes = re.compile(r"fleet-sandbox/(" + "|".join(sorted(instances)) + r")\b|\bfsbr?\d+(h\d|-)?\b")
    files = _sandbox_test_files()
    assert len(files) > 40, "the sandbox tests are found by their fixtures"
    found = []
    for path in files:
        rel = path.relative_to(REPO)
        text = path.read_text()
        found += [f"{rel}:{line}: {what}" for line, what in _instance_literals(ast.parse(text), instances)]
        for n, line in enumerate(text.splitlines(), 1):
            if NOT_AN_INSTANCE_ADDRESS in line:
                continue
            for quad in _QUAD.findall(line):
                try:
                    address = ipaddress.ip_address(quad)
                except ValueError:
                    continue
                if any(address in subnet for subnet in subnets):
                    found.append(f"{rel}:{n}: {quad}")
            found += [f"{rel}:{n}: {m.group(0)}" for m in homes.finditer(line)]
    assert found == [], "take the instance and its addresses from the fixtures (sandbox.cfg, the inventory)"


def test_the_contract_catches_an_instance_or_an_address_in_a_test():
    """The contract's own check, on a test that assumes the serial run's fleet."""
    from sandbox.config import _INSTANCES

    bad = ('def test_x(sandbox):\n    cfg = config("test")\n'
           '    env = {"FLEET_SANDBOX_INSTANCE": "test"}\n    os.environ.get("FLEET_SANDBOX_INSTANCE", "test")\n')
    assert [line for line, _ in _instance_literals(ast.parse(bad), set(_INSTANCES))] == [2, 3, 4]
    assert _SANDBOX_FIXTURES.search(bad)


def test_every_sandbox_instance_has_its_own_subnet_bridge_and_namespaces(monkeypatch):
    """The parallel suite's lanes (one per worker) and the named instances never share an address or a link."""
    monkeypatch.delenv("FLEET_SANDBOX_LANES", raising=False)  # the default pool, whatever this run was given
    from sandbox.config import _INSTANCES, LANES, SANDBOX_SUPERNET, config

    # tests/conftest.py's lanes (the instances a parallel run's workers take from), by path: in a worker that
    # already ran another folder's tests, "conftest" in sys.modules is that folder's
    spec = importlib.util.spec_from_file_location("tests_root_conftest", REPO / "tests" / "conftest.py")
    assert spec is not None and spec.loader is not None
    root = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root)
    lanes = root.lanes

    cfgs = [config(name) for name in _INSTANCES]
    for attr in ("subnet", "bridge", "index"):
        values = [getattr(c, attr) for c in cfgs]
        assert len(set(values)) == len(values), attr
    assert {c.netns("sbx0") for c in cfgs}.__len__() == len(cfgs)
    assert all(c.subnet.subnet_of(SANDBOX_SUPERNET) for c in cfgs)
    assert all(len(c.veth(199)) <= 15 and len(c.bridge) <= 15 for c in cfgs)  # Linux link names
    assert set(lanes()) <= set(LANES) and "test" not in lanes() and len(lanes()) >= 3


# Shell text is written in fleet.host and fleet.ssh only: every other layer says what it wants of a host through
# a verb of HostSession (or of a module of fleet.host), never how it is done there.
SHELL_HOMES = ("fleet/host/", "fleet/ssh/")
SHELL_CALLS = {"run", "sh", "sudo", "run_bytes"}


def _text(node: ast.AST, texts: set[str]) -> bool:
    """A string literal, an f-string, one built of them (+, %), or a name bound to one in the same scope."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return _text(node.left, texts) or _text(node.right, texts)
    return isinstance(node, ast.Name) and node.id in texts


def shell_sites(source: str) -> list[tuple[int, str]]:
    """Where a module builds shell: it imports shlex, or hands text to a `run`, `sh`, `sudo` or `run_bytes` call
    (a `with ... .run("what"):` is the run skeleton's context, not a command)."""
    tree = ast.parse(source)
    skeleton = {id(item.context_expr) for node in ast.walk(tree) if isinstance(node, ast.With) for item in node.items}
    found = []
    module_texts = {t.id for n in tree.body if isinstance(n, ast.Assign) and _text(n.value, set())
                    for t in n.targets if isinstance(t, ast.Name)}
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]:
        nodes = [n for n in ast.walk(scope)]
        texts = module_texts | {t.id for n in nodes if isinstance(n, ast.Assign) and _text(n.value, set())
                 for t in n.targets if isinstance(t, ast.Name)}
        for node in nodes:
            if scope is tree and isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found += [(node.lineno, "imports shlex") for name in names if name == "shlex"]
            if not isinstance(node, ast.Call) or id(node) in skeleton:
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            args = [*node.args, *(k.value for k in node.keywords if k.arg == "command")]
            if name.lstrip("_") in SHELL_CALLS and any(_text(a, texts) for a in args):
                found.append((node.lineno, f"shell text to {name}()"))
    return sorted(set(found))


def test_shell_text_lives_in_fleet_host_and_fleet_ssh_only():
    found = [f"{p.relative_to(REPO)}:{line}: {what}" for p in sorted((REPO / "fleet").rglob("*.py"))
             if not p.relative_to(REPO).as_posix().startswith(SHELL_HOMES)
             for line, what in shell_sites(p.read_text())]
    assert found == [], "say it with a verb of HostSession (fleet.host):\n" + "\n".join(found)


def test_the_shell_contract_catches_text_handed_to_a_command():
    bad = ('import shlex\n'
           'def f(s, conn, host, unit):\n'
           '    s.sh(f"systemctl stop {unit}")\n'
           '    sh(conn, host, "rm -f -- " + unit)\n'
           '    cmd = "journalctl -n 0"\n'
           '    s.run(cmd, timeout=5)\n'
           '    with hooks.run("deploy router", say) as run:\n'
           '        s.stop(unit)\n')
    assert [line for line, _ in shell_sites(bad)] == [1, 3, 4, 6]
