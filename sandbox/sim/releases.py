"""What differs between the releases the SIMULATED stack stands for, generated at wheel build time from the real
wheels of the upstream corpus (~/.cache/fleet/upstream; `inv upstream`), never copied by hand.

    sglang_files(version, cache) -> {path in the wheel: bytes}
    flashinfer_files(version, base, cache) -> {path in the wheel: bytes}

The committed simulator (sandbox/sim/pkgs) is sglang 0.5.9 and flashinfer-python 0.6.3. For every sglang version
the wheel gets `sglang/srt/sim_release.json`: the prog name its parser prints, the log lines of its startup phases
(each rendered from the release's own source site, fleet.upstream.sourcetext) and, for another release than
0.5.9, its launch_server flags (names, aliases, switch or value, int/float, read with `ast`), which the
simulated parser registers instead of 0.5.9's, so argparse accepts and refuses what that release does. For a
release whose sm120-allreduce-fusion variant edits other files than 0.5.9's, those files are written at their
real paths with the real lines the variant's edits anchor on (the gated statements, extracted with `ast`, and
the module-level literals they name), over the simulator's runtime_context stand-in: the gate the patch set
edits is the gate that runs. For flashinfer, another release's `supported_major_versions` of
gen_trtllm_comm_module and the kernel headers' `__CUDA_ARCH__` gates, in order, are that release's.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from pathlib import Path

from fleet.patches import sets as patchsets
from fleet.upstream import corpus, sourcetext
from fleet.upstream import flags as upstream_flags
from fleet.upstream.versions import in_range

HERE = Path(__file__).resolve().parent
OVERLAY = HERE / "overlay"
BASE_SGLANG = "0.5.9"
BASE_FLASHINFER = "0.6.3"
RELEASE_FILE = "sglang/srt/sim_release.json"
FUSION_SET = "sm120-allreduce-fusion"
HEADERS = "flashinfer/data/include/flashinfer/comm"
JIT_COMM = "flashinfer/jit/comm.py"

# The startup lines the simulator prints and fleet's phases read: key -> the real template it must be (a regex
# over the release's rendered templates; the first match in file order wins).
LINES = {
    "dist_begin": r"^Init (?:torch distributed|parallel) begin\.$",
    "dist_end": r"^Init (?:torch distributed|parallel) ends\. elapsed=\{\} s",
    "graph_begin": r"^Capture \{\} (?:CUDA graph )?begin\. ",
    "graph_bs": r"^Capture cuda graph bs ",
    "graph_end": r"^Capture \{\} (?:CUDA graph )?end\. ",
}
# how many placeholders the simulator fills for each line (the value tuples it gives sim_release.line)
FILLS = {"dist_begin": {0}, "dist_end": {1, 2}, "graph_begin": {2, 4}, "graph_bs": {1}, "graph_end": {4}}
LINE_FILES = ("sglang/srt/model_executor/model_runner.py", "sglang/srt/distributed/bootstrap.py",
              "sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py",
              "sglang/srt/model_executor/cuda_graph_runner.py")
_TYPES = {"int": "int", "float": "float"}


class ReleaseMissing(RuntimeError):
    """A file or site the simulator needs is not in that release's wheel (or the release not in the corpus)."""


def _root(dist: str, version: str, cache: Path | None) -> Path:
    rel = corpus.cached(dist, version, cache)
    if rel is None:
        raise ReleaseMissing(f"{dist} {version} is not in the upstream corpus ({cache or corpus.cache_dir()}); "
                             "run `inv upstream` first")
    return corpus.tree(rel, cache)


def _dump(doc: object) -> bytes:
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


# ------------------------------------------------------------------------------------------------ sglang

def sglang_files(version: str, cache: Path | None = None) -> dict[str, bytes]:
    root = _root("sglang", version, cache)
    doc: dict[str, object] = {"version": version, "prog": prog(root), "lines": lines(root),
                              "flags": None if version == BASE_SGLANG else flag_spec(root)}
    out = {RELEASE_FILE: _dump(doc)}
    if version != BASE_SGLANG:
        out.update(gate_files(root, version))
    return out


def prog(root: Path) -> str | None:
    """The `prog=` of the ArgumentParser prepare_server_args builds (None: argparse's default)."""
    tree = ast.parse((root / "sglang/srt/server_args.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "prepare_server_args":
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "ArgumentParser":
                    for kw in call.keywords:
                        if kw.arg == "prog" and isinstance(kw.value, ast.Constant):
                            return str(kw.value.value)
    return None


def lines(root: Path) -> dict[str, str]:
    """key -> the release's template for it (placeholders `{}`); a key the release has no site for is left out."""
    found: dict[str, str] = {}
    for rel in LINE_FILES:
        path = root / rel
        if not path.is_file():
            continue
        for text in sourcetext.templates(path.read_text(encoding="utf-8", errors="replace")):
            for key, rx in LINES.items():
                if key not in found and re.search(rx, text):
                    found[key] = text
    missing = {"dist_begin", "graph_begin"} - set(found)
    if missing:
        raise ReleaseMissing(f"{root}: no site of {sorted(missing)} in {', '.join(LINE_FILES)}")
    for key, template in found.items():  # a release that words it otherwise fails here, not in a host's start
        if template.count(sourcetext.PLACEHOLDER) not in FILLS[key]:
            raise ReleaseMissing(f"{root}: the simulator fills {sorted(FILLS[key])} placeholders of {key}, the "
                                 f"release's {template!r} has {template.count(sourcetext.PLACEHOLDER)}")
    return found


def flag_spec(root: Path) -> list[dict[str, object]]:
    """The release's launch_server flags as the simulated parser registers them: one entry per field or
    add_argument (its names, dest, switch, negatable, type), covering exactly what fleet.upstream.flags reads."""
    declared = upstream_flags.flags_of(root)
    entries: list[dict[str, object]] = []
    seen: set[str] = set()
    for path in [p for pattern in upstream_flags.FIELD_FILES for p in sorted(root.glob(pattern))]:
        for entry in _entries(path.read_text(encoding="utf-8")):
            names = [n for n in entry["flags"] if n[2:] in declared and n not in seen]  # type: ignore[attr-defined]
            if names:
                seen.update(names)
                entries.append({**entry, "flags": names})
    for name, flag in sorted(declared.items()):  # declared in a way the pass above does not model: as they are
        if f"--{name}" not in seen and not (name.startswith("no-") and f"--{name[3:]}" in seen):
            seen.add(f"--{name}")
            entries.append({"flags": [f"--{name}"], "dest": name.replace("-", "_"), "switch": flag.switch,
                            "negatable": False, "type": "str"})
    return entries


def _entries(source: str) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    entry = _field(stmt.target.id, stmt.annotation)
                    if entry:
                        out.append(entry)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            kws = {k.arg: k.value for k in node.keywords}
            action = ast.unparse(kws["action"]) if "action" in kws else ""
            kind = ast.unparse(kws["type"]) if "type" in kws else "str"
            dest = kws["dest"].value if isinstance(kws.get("dest"), ast.Constant) else None
            switch = bool(re.search(r"store_true|store_false|store_const|StoreTrue|StoreConst|Boolean", action))
            if names and names[0].startswith("--"):
                out.append({"flags": names, "dest": dest or names[0][2:].replace("-", "_"), "switch": switch,
                            "negatable": action.endswith("BooleanOptionalAction"), "type": _TYPES.get(kind, "str")})
    return out


def _field(name: str, annotation: ast.expr) -> dict[str, object] | None:
    if not (isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) in ("A", "Annotated")):
        return None
    parts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
    if len(parts) < 2:
        return None
    inner, meta = parts[0], parts[1]
    cli, aliases, action = "", [], ""
    if isinstance(meta, ast.Call) and ast.unparse(meta.func) == "Arg":
        kws = {k.arg: k.value for k in meta.keywords}
        if isinstance(kws.get("no_cli"), ast.Constant) and kws["no_cli"].value is True:  # type: ignore[attr-defined]
            return None
        cli = kws["cli_name"].value if isinstance(kws.get("cli_name"), ast.Constant) else ""  # type: ignore[attr-defined]
        if isinstance(kws.get("aliases"), ast.List | ast.Tuple):
            aliases = [e.value for e in kws["aliases"].elts if isinstance(e, ast.Constant)]  # type: ignore[attr-defined]
        action = ast.unparse(kws["action"]) if "action" in kws else ""
    text = ast.unparse(inner)
    kind = re.sub(r"^Optional\[(.*)\]$", r"\1", text)
    switch = kind == "bool" or bool(re.search(r"store_true|store_false|StoreTrue|BooleanOptional", action))
    return {"flags": [cli or "--" + name.replace("_", "-"), *aliases], "dest": name, "switch": switch,
            "negatable": action.endswith("BooleanOptionalAction"), "type": _TYPES.get(kind, "str")}


# ------------------------------------------------------------------------------ the fusion gates, as released

def gate_files(root: Path, version: str) -> dict[str, bytes]:
    """The files sm120-allreduce-fusion's variant for this sglang edits, with the real statements it edits."""
    fusion = patchsets.load_sets([FUSION_SET])[0]
    edits = [e for v in fusion.variants if v.dist == "sglang" and in_range(version, v.versions) for e in v.edits]
    if not edits:
        raise ReleaseMissing(f"{FUSION_SET} has no sglang variant with edits for {version}")
    by_file: dict[str, list[patchsets.Edit]] = {}
    for edit in edits:
        by_file.setdefault(f"{edit.package}/{edit.file}", []).append(edit)
    out = {f"sglang/srt/{p.relative_to(OVERLAY / 'sglang/srt').as_posix()}": p.read_bytes()
           for p in sorted((OVERLAY / "sglang/srt").rglob("*.py"))}
    for rel, edits in sorted(by_file.items()):
        real = root / rel
        if not real.is_file():
            raise ReleaseMissing(f"{real}: {FUSION_SET} edits it, the release's wheel has no such file")
        text = real.read_text(encoding="utf-8")
        body = _gated(text, edits, rel)
        head = (f'"""{rel} (SIMULATED sglang {version}): the statements {FUSION_SET} edits,\n'
                "copied by sandbox/sim/releases.py from the real wheel at build time; the names they use are the "
                'simulator\'s."""\n'
                "# ruff: noqa\nfrom sglang.srt.sim_gates import *  # noqa: F403\n\n")
        base = HERE / "pkgs" / rel
        keep = base.read_text(encoding="utf-8") + "\n\n" if base.is_file() else ""  # the simulator's own part
        out[rel] = (keep + head + body).encode() if keep else (head + body).encode()
        for parent in Path(rel).parents:
            init = parent / "__init__.py"
            if len(parent.parts) > 1 and not (HERE / "pkgs" / init).is_file():
                out.setdefault(init.as_posix(), b"")
    return out


def _gated(text: str, edits: list[patchsets.Edit], rel: str) -> str:
    """The smallest statements holding each edit's anchor and find (wrapped in a function when they are not a
    definition), and the module-level literal assignments they read."""
    tree = ast.parse(text)
    src = text.split("\n")
    chosen: dict[int, ast.stmt] = {}
    for edit in edits:
        at = text.find(edit.within.anchor) if edit.within else text.find(edit.find)
        if at < 0:
            raise ReleaseMissing(f"{rel}: {(edit.within.anchor if edit.within else edit.find)!r} is not in the file")
        line = text.count("\n", 0, at) + 1
        stmt = _innermost(tree, line, edit, text)
        chosen[stmt.lineno] = stmt
    names = {n.id for s in chosen.values() for n in ast.walk(s) if isinstance(n, ast.Name)}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in names and node.lineno not in chosen):
            if _literal(node.value):
                chosen[node.lineno] = node
    blocks = []
    for _, stmt in sorted(chosen.items()):
        lines_ = textwrap.dedent("\n".join(src[stmt.lineno - 1:stmt.end_lineno])).split("\n")
        if isinstance(stmt, ast.FunctionDef | ast.Assign | ast.AnnAssign) and stmt.col_offset == 0:
            blocks.append("\n".join(lines_))
        else:  # a statement inside a function: the simulator calls it as sim_block(**its locals)
            blocks.append("def sim_block(**scope):\n    globals().update(scope)\n"
                          + "\n".join("    " + ln if ln else ln for ln in lines_) + "\n    return {}")
    return "\n\n\n".join(blocks) + "\n"


def _literal(node: ast.expr) -> bool:
    """A constant, or frozenset/set/tuple of one: the module-level data a gate reads (never code)."""
    wrapped = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set")
    if wrapped and isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        node = node.args[0]
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


def _innermost(tree: ast.Module, line: int, edit: patchsets.Edit, text: str) -> ast.stmt:
    """The smallest statement whose lines hold `line` and the edit's `find` (every occurrence in its window)."""
    find_lines = set()
    start = 0
    while (i := text.find(edit.find, start)) >= 0:
        first = text.count("\n", 0, i) + 1
        find_lines.add(first)
        start = i + 1
    if edit.within:
        lo, hi = line - edit.within.before, line + edit.within.after
        find_lines = {n for n in find_lines if lo <= n <= hi}
    want = {line, *find_lines}
    best: ast.stmt | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.end_lineno is not None and \
                node.lineno <= min(want) and max(want) <= node.end_lineno:
            if best is None or node.end_lineno - node.lineno < best.end_lineno - best.lineno:  # type: ignore[operator]
                best = node
    if best is None:
        raise ReleaseMissing(f"no statement holds lines {sorted(want)}")
    return best


# ------------------------------------------------------------------------------------------------ flashinfer

def flashinfer_files(version: str, base: dict[str, bytes], cache: Path | None = None) -> dict[str, bytes]:
    """The base (0.6.3) files that differ in `version`, rewritten with that release's gates."""
    if version == BASE_FLASHINFER:
        return {}
    root = _root("flashinfer-python", version, cache)
    out: dict[str, bytes] = {}
    majors = jit_majors((root / JIT_COMM).read_text(encoding="utf-8"))
    ours = base[JIT_COMM].decode()
    old = jit_majors(ours)
    out[JIT_COMM] = ours.replace(f"supported_major_versions={old}", f"supported_major_versions={majors}", 1).encode()
    for name, data in base.items():
        if name.startswith(HEADERS + "/") and name.endswith(".cuh"):
            real = root / name
            if not real.is_file():
                raise ReleaseMissing(f"{real}: the simulator's {Path(name).name} has no counterpart in {version}")
            out[name] = retarget_gates(data.decode(), real.read_text(encoding="utf-8", errors="replace")).encode()
    return out


def jit_majors(source: str) -> str:
    """gen_trtllm_comm_module's supported_major_versions, as written ('[9, 10, 12]')."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == "gen_trtllm_comm_module":
            for kw in (k for c in ast.walk(node) if isinstance(c, ast.Call) for k in c.keywords):
                if kw.arg == "supported_major_versions":
                    return ast.unparse(kw.value)
    raise ReleaseMissing("no gen_trtllm_comm_module(... supported_major_versions=...) in jit/comm.py")


_GATE = re.compile(r"^#\s*(?:if|elif)\b.*__CUDA_ARCH__")


def retarget_gates(ours: str, real: str) -> str:
    """Our header with its i-th __CUDA_ARCH__ gate replaced by the real release's i-th (the releases keep the
    kernels in order; a release that adds gates adds them after ours, which the simulator has no kernel for)."""
    theirs = [ln for ln in real.split("\n") if _GATE.match(ln)]
    mine = [i for i, ln in enumerate(ours.split("\n")) if _GATE.match(ln)]
    if len(theirs) < len(mine):
        raise ReleaseMissing(f"the real header has {len(theirs)} __CUDA_ARCH__ gates, the simulator's {len(mine)}")
    out = ours.split("\n")
    for i, at in enumerate(mine):
        out[at] = theirs[i]
    return "\n".join(out)
