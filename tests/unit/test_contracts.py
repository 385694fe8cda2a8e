"""The layout's contracts, run with the suite (so CI runs them): the import layers between and within the
subpackages and the library's independence from rich (import-linter), types (mypy, configured in pyproject.toml),
no import cycles, no function-local imports in the library, tasks.py over the CLI layer only, modules one can read
in a sitting, and a layout whose folders say what they hold."""

from __future__ import annotations

import ast
import os
import pkgutil
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
    assert "9 kept, 0 broken" in done.stdout


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
