"""The layout's contracts, run with the suite (so CI runs them): the import layers and the library's
independence from rich (import-linter), types (mypy, configured in pyproject.toml), no import cycles, no
function-local imports in the library, tasks.py over the CLI layer only, modules one can read in a sitting."""

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
                 if not m.name.startswith(("fleet.cli", "fleet.hostside.")))
MAX_LINES = 500


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_import_linter_contracts_are_kept():
    done = _run(str(BIN / "lint-imports"), "--no-cache")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 kept, 0 broken" in done.stdout


def test_the_no_rich_contract_names_every_library_module():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    forbidden = next(c for c in config if c["type"] == "forbidden")
    assert sorted(forbidden["source_modules"]) == LIBRARY, "a new library module must join the contract"


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
