"""Issue 44: results are made once, by their class, never filled in from outside as a run goes.

An assignment (plain, augmented or annotated) or a `del` of `x.attr` anywhere in fleet/, where `x` is not
`self` or `cls`, writes an attribute of another object from outside it. None is left but the few below, where the
object is another library's and setting the attribute is how that library is used.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# (file, the target as written): why a write from outside is right there
ALLOWED: dict[tuple[str, str], str] = {
    ("fleet/cli/fit.py", "console.width"): "rich's Console prints at its width: --wide widens it for one print, "
                                           "then puts it back",
    ("fleet/cli/fit.py", "renderable.min_width"): "a rich Table already built, measured, then kept that wide",
    ("fleet/cli/fit.py", "renderable.caption"): "--wide prints a rich Table's caption under it, whole, apart",
    ("fleet/cli/program.py", "sys.dont_write_bytecode"): "the interpreter's flag (no .pyc files), as invoke's",
    ("fleet/host/programs/launch.py", "sys.argv"): "the server module's argv, as runpy runs it in this process",
    ("fleet/deploy/hostrun.py", "exc.args"): "the operator's one-line error gains what the skeleton did; the "
                                             "exception, its type and traceback stay",
    ("fleet/ssh/remote.py", "exc.args"): "the error names the command as the operator typed it",
    ("fleet/multihost/proxmox.py", "timer.daemon"): "threading.Timer takes no daemon argument",
    ("fleet/parallel.py", "_local.on"): "a threading.local's per-thread values are its attributes",
    ("fleet/upstream/wheelhouse.py", "parser.optionxform"): "configparser's documented hook (names kept as written)",
    ("fleet/yamlfile.py", "node.tag"): "a PyYAML node retagged before it is constructed (a date read as text)",
}

def outside_writes(source: str) -> list[tuple[int, str]]:
    """(line, target) of each write of an attribute of an object other than self or cls."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign | ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for sub in ast.walk(target):
                if (isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store | ast.Del)
                        and not (isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls"))):
                    found.append((node.lineno, ast.unparse(sub)))
    return sorted(found)


def library_writes() -> dict[tuple[str, str], list[int]]:
    out: dict[tuple[str, str], list[int]] = {}
    for path in sorted((ROOT / "fleet").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        for line, target in outside_writes(path.read_text()):
            out.setdefault((name, target), []).append(line)
    return out


def test_no_attribute_of_another_object_is_written_from_outside_it():
    left = {f"{name}:{lines[0]}: {target}" for (name, target), lines in library_writes().items()
            if (name, target) not in ALLOWED}
    assert not left, "written from outside its class (build it once, or give its class a method):\n" + "\n".join(
        sorted(left))


def test_every_allowed_write_is_still_there():
    assert set(ALLOWED) <= set(library_writes()), set(ALLOWED) - set(library_writes())


def test_the_check_sees_each_kind_of_write_and_passes_over_self():
    source = """
class C:
    def m(self, other, rows):
        self.a = 1
        self.b += 1
        cls.c = 2
        other.d = 1
        other.e += 1
        other.f: int = 2
        del other.g
        (other.h, x) = (1, 2)
        self.inner.i = 3
        rows[0].j = 4
        rows[0] = 5
        y = other.k
"""
    assert [t for _, t in outside_writes(source)] == [
        "other.d", "other.e", "other.f", "other.g", "other.h", "self.inner.i", "rows[0].j"]
