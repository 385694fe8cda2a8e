"""Audit of architecture gates: which `#if __CUDA_ARCH__ ...` conditions and Python SM checks in flashinfer /
sglang still keep a host's SM off a code path that its reference architecture gets.

The reference of an SM is the nearest of REFERENCE (SM90, SM100: the parts the kernels were written for) at or
below it (SM120 -> SM100; below SM90 -> SM90). A preprocessor branch excludes the SM when the reference takes it,
the SM does not, and what the SM takes instead in that #if chain is nothing, an empty branch or an `#error`:
so `#if >= 1000 ... #elif >= 700` (SM120 takes the first branch), `#error` fallbacks and SM90-only branches
(SM100 skips them too) are not reported. A Python gate (a list of majors, an `or` of SM checks:
`is_sm100_supported()`, `_is_sm90_supported`, `get_platform().is_sm90`) excludes an SM whose major it lacks
while it holds for the reference.

Conditions are evaluated by fleet.upstream.cppexpr (checked against the real `cpp` in tests); a condition it cannot
read (an unknown function-like macro) is reported as not evaluated, never guessed. "Lifted by" is computed by
planning the named patch sets on the real file contents (their applies_to, variants, anchors and counts) and
auditing the result again.

The scan runs on the host in one round trip (only directive / gate lines come back); evaluation is pure and
local, and the same evaluation runs over the upstream corpus with no host (fleet.patches.offline).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TypedDict, cast

from fabric import Connection

from fleet import parallel
from fleet.errors import FleetError, InputError
from fleet.host import venvs
from fleet.host.service import run_system_python
from fleet.inventory import Host
from fleet.patches import engine as patches
from fleet.patches import kept as keptgates
from fleet.patches import plan as patchplan
from fleet.patches import sets as patchsets
from fleet.patches.kept import Kept
from fleet.patches.sets import PatchSet
from fleet.progress import Progress, hosts_note, quiet, ticking
from fleet.ssh.connect import ConnectOptions, open_connection
from fleet.upstream.cppexpr import ExprError, eval_cpp, strip_comments
from fleet.yamlfile import JsonObject

REFERENCE = (900, 1000)
FUSION_SCOPE: dict[str, list[str]] = {
    "flashinfer": ["data/include/flashinfer/comm/trtllm_allreduce*.cuh", "data/csrc/trtllm_allreduce*.cu",
                   "jit/comm.py"],
    "sglang": ["srt/server_args.py", "srt/arg_groups/overrides.py", "srt/layers/communicator.py",
               "srt/layers/flashinfer_comm_fusion.py", "srt/layers/layer_boundary/residual/add_norm.py"],
}
DEFAULT_SCOPE = FUSION_SCOPE
C_EXTS = (".cuh", ".cu", ".h", ".hpp", ".cc", ".cpp", ".inl")


def arch_of_sm(sm: int) -> int:
    """SM 120 -> __CUDA_ARCH__ 1200."""
    return sm * 10


def reference_for(sm: int, reference: tuple[int, ...] = REFERENCE) -> int:
    arch = arch_of_sm(sm)
    below = [r for r in reference if r <= arch]
    return max(below) if below else min(reference)


# --- gates -----------------------------------------------------------------------------------------


@dataclass
class Gate:
    file: str  # package/relative path
    line: int
    kind: str  # cpp | py-majors | py-sm-check
    condition: str
    text: str  # the source line as read
    excludes: bool = False
    lifted_by: list[str] = field(default_factory=list)
    error: str | None = None  # why the condition could not be evaluated
    where: str = ""  # the function a Python gate sits in ('' at module level, and for C/CUDA)
    kept: Kept | None = None  # upstream keeps it off the SM on purpose (playbooks/upstream/kept-gates.yaml)


@dataclass
class Directive:
    line: int
    kind: str  # if | ifdef | ifndef | elif | else | endif | error
    cond: str
    raw: str
    code: int = 0  # code lines between this directive and the next one


_DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif|error)\b(.*)$")


def is_code(line: str) -> bool:
    t = line.strip()
    return bool(t) and not t.startswith(("//", "/*", "*"))


def cpp_directives(text: str) -> list[Directive]:
    """Each preprocessor conditional (and #error), continuation lines joined, with the code lines after it."""
    out: list[Directive] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        start, line = i + 1, lines[i]
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1] + " " + lines[i]
        m = _DIRECTIVE.match(line)
        if m:
            out.append(Directive(start, m.group(1), strip_comments(m.group(2)).strip(), line))
        elif out and is_code(line) and not line.lstrip().startswith("#"):
            out[-1] = replace(out[-1], code=out[-1].code + 1)
        i += 1
    return out


def _as_expr(kind: str, cond: str) -> str:
    if kind == "ifdef":
        return f"defined({cond.split()[0]})" if cond else "0"
    if kind == "ifndef":
        return f"!defined({cond.split()[0]})" if cond else "0"
    if kind == "else":
        return "1"
    return cond


@dataclass
class _Branch:
    d: Directive
    expr: str
    code: bool = False
    error: bool = False


def _taken(branches: list[_Branch], arch: int) -> int | None:
    for i, b in enumerate(branches):
        if eval_cpp(b.expr, arch):
            return i
    return None


def _chain_gates(file: str, branches: list[_Branch], sm: int, ref: int) -> list[Gate]:
    gates = [Gate(file, b.d.line, "cpp", b.expr, b.d.raw.strip()) for b in branches
             if b.d.kind != "else" and "__CUDA_ARCH" in b.expr]
    if not gates:
        return []
    try:
        mine, theirs = _taken(branches, arch_of_sm(sm)), _taken(branches, ref)
    except ExprError as exc:
        return [replace(g, error=str(exc)) for g in gates]
    lacks = mine is None or not branches[mine].code or branches[mine].error

    def excludes(g: Gate) -> bool:
        i = next(k for k, b in enumerate(branches) if b.d.line == g.line)
        return bool(theirs == i and mine != i and lacks and not branches[i].error)
    return [replace(g, excludes=excludes(g)) for g in gates]


def cpp_gates(file: str, directives: list[Directive], sm: int, reference: tuple[int, ...] = REFERENCE) -> list[Gate]:
    """The __CUDA_ARCH__ conditionals of one file, each with whether it excludes `sm`."""
    ref = reference_for(sm, reference)
    chains: list[list[_Branch]] = []
    gates: list[Gate] = []
    for d in directives:
        if d.kind in ("if", "ifdef", "ifndef"):
            if chains:  # a nested block counts as code of the branch around it
                chains[-1][-1] = replace(chains[-1][-1], code=True)
            chains.append([_Branch(d, _as_expr(d.kind, d.cond), d.code > 0)])
        elif d.kind in ("elif", "else") and chains:
            chains[-1].append(_Branch(d, _as_expr(d.kind, d.cond), d.code > 0))
        elif d.kind == "error" and chains:
            chains[-1][-1] = replace(chains[-1][-1], error=True)
        elif d.kind == "endif" and chains:
            gates += _chain_gates(file, chains.pop(), sm, ref)
            if chains and d.code:
                chains[-1][-1] = replace(chains[-1][-1], code=True)
    for left in chains:  # unterminated (a scan cut short): judge what was read
        gates += _chain_gates(file, left, sm, ref)
    return sorted(gates, key=lambda g: g.line)


_MAJORS = re.compile(r"(supported_major_versions\s*=\s*|\bmajor\s+(?:not\s+)?in\s+)[\[(]([\d,\s]*)[\])]")
_SM_CHECK = re.compile(r"\b_?is_(sm(\d+)|blackwell|hopper\w*)_supported\b|\bis_hopper_with_cuda_\w+\b"
                       r"|\bget_platform\(\)\.is_(sm(\d+)|blackwell|hopper)\b")
_FAMILY_MAJORS = {"blackwell": {10, 11, 12}, "hopper": {9}}


def py_gates(file: str, lines: list[tuple[int, str, str]], sm: int,
             reference: tuple[int, ...] = REFERENCE) -> list[Gate]:
    """Gates of (line, text, function it sits in) of one Python file."""
    out = []
    for n, text, where in lines:
        code = text.split("#", 1)[0]
        g = py_gate(file, n, code, sm, reference)
        if g:
            out.append(replace(g, text=text.strip(), where=where))
    return out


def py_gate(file: str, n: int, code: str, sm: int, reference: tuple[int, ...] = REFERENCE) -> Gate | None:
    """A Python gate on one line (comments stripped), or None."""
    ref_major = reference_for(sm, reference) // 100
    m = _MAJORS.search(code)
    if m:
        majors = {int(x) for x in re.findall(r"\d+", m.group(2))}
        negated = "not in" in m.group(1)

        if negated:  # `if major not in (9, 10): raise ...`: the guarded branch is the refusal
            excludes = (sm // 10) not in majors and ref_major in majors
        else:
            excludes = ref_major in majors and (sm // 10) not in majors
        return Gate(file, n, "py-majors", m.group(0).strip(), code.strip(), excludes)
    checks = list(_SM_CHECK.finditer(code))
    if len(checks) >= 2 and re.search(r"\bor\b", code):
        family: set[int] = set()
        for c in checks:
            number, name = c.group(2) or c.group(4), c.group(1) or c.group(3)
            if number:
                family.add(int(number) // 10)
            elif name.startswith("blackwell"):
                family |= _FAMILY_MAJORS["blackwell"]
            else:
                family |= _FAMILY_MAJORS["hopper"]
        cond = " or ".join(dict.fromkeys(c.group(0) for c in checks))
        return Gate(file, n, "py-sm-check", cond, code.strip(), ref_major in family and (sm // 10) not in family)
    return None


def gate_lines(text: str) -> list[list[int | str]]:
    """What the host scan returns for one Python file: [line, text, function] of every gate-looking line."""
    lines = text.split("\n")
    return [[i + 1, t, enclosing_def(lines, i)] for i, t in enumerate(lines) if _PYGATE.search(t)]


_PYGATE = re.compile(r"supported_major_versions|\bmajor\s+(not\s+)?in\b|_supported\b|get_platform\(\)\.is_")
_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)|^\s*class\s+(\w+)")


def enclosing_def(lines: list[str], index: int) -> str:
    """The innermost `def`/`class` that line `index` (0-based) sits in, '' at module level: the nearest line above
    that is less indented, then the nearest less indented than that, until one is a def (host scan: the same)."""
    level = len(lines[index]) - len(lines[index].lstrip())
    for j in range(index - 1, -1, -1):
        raw = lines[j]
        indent = len(raw) - len(raw.lstrip())
        if not raw.strip() or indent >= level:
            continue
        m = _DEF.match(raw)
        if m:
            return m.group(1) or m.group(2)
        level = indent
    return ""


class ScannedFile(TypedDict):
    """One file as the gate scan read it (scan.py on a host, scan_text here): its kind, and [line, text(,
    code lines after it or the enclosing function)] of each gate-looking line."""

    kind: str  # c | py
    lines: list[list[int | str]]


class Scan(TypedDict):
    """scan.py's answer: the packages resolved, each file scanned (package/relative path), the GPUs' SMs."""

    packages: dict[str, keptgates.PackageInfo]
    files: dict[str, ScannedFile]
    sms: list[int]
    sm_error: str | None


def file_gates(file: str, item: ScannedFile, sm: int, reference: tuple[int, ...] = REFERENCE) -> list[Gate]:
    """Gates of one scanned file ({"kind": "c"|"py", "lines": [[n, text(, code)], ...]})."""
    if item["kind"] == "c":
        ds = [Directive(int(x[0]), *_kind_cond(str(x[1])), str(x[1]), int(x[2]) if len(x) > 2 else 1)
              for x in item["lines"]]
        return cpp_gates(file, [d for d in ds if d.kind], sm, reference)
    return py_gates(file, [(int(x[0]), str(x[1]), str(x[2]) if len(x) > 2 else "") for x in item["lines"]], sm,
                    reference)


def _kind_cond(raw: str) -> tuple[str, str]:
    m = _DIRECTIVE.match(raw)
    return (m.group(1), strip_comments(m.group(2)).strip()) if m else ("", "")


def scan_text(file: str, text: str) -> ScannedFile:
    """The host scan of one file, done locally (the patched contents, the upstream corpus)."""
    if file.endswith(".py"):
        return {"kind": "py", "lines": gate_lines(text)}
    return {"kind": "c", "lines": [[d.line, d.raw, d.code] for d in cpp_directives(text)]}


def evaluate(scan: dict[str, ScannedFile], sm: int, reference: tuple[int, ...] = REFERENCE) -> list[Gate]:
    """Every gate of a scan ({file: {"kind", "lines"}}) for `sm`."""
    gates: list[Gate] = []
    for file, item in sorted(scan.items()):
        gates += file_gates(file, item, sm, reference)
    return gates


def mark_kept(gates: list[Gate], sm: int, packages: dict[str, keptgates.PackageInfo],
              entries: tuple[keptgates.KeptGate, ...] | None = None) -> list[Gate]:
    """The gates, each excluding one that upstream keeps off `sm` on purpose in the releases read (packages)
    marked so, as `entries` name them (default: playbooks' kept gates, keptgates.load)."""
    return [replace(g, kept=keptgates.find(g.file, g.where, g.condition, sm, packages, entries)) if g.excludes
            else g for g in gates]


def _moved(line: int, content: bytes, steps: list[tuple[int, bytes, bytes]]) -> int:
    """Where a line of the original file is after the edit steps."""
    for off, find, repl in steps:
        at = content.count(b"\n", 0, off) + 1
        if line > at + find.count(b"\n"):
            line += repl.count(b"\n") - find.count(b"\n")
        content = content[:off] + repl + content[off + len(find):]
    return line


def lift(gates: list[Gate], state: patchplan.HostState, sets: list[PatchSet], sm: int,
         reference: tuple[int, ...] = REFERENCE) -> None:
    """Fill each excluding gate's lifted_by: the sets whose planned edits (on these very files) make it pass."""
    excluding = [g for g in gates if g.excludes]
    for ps in sets:
        plan = patchplan.plan([ps], state, allow_prebuilt=True)
        for change in plan.changes:
            name = f"{change.package}/{change.file}"
            mine = [g for g in excluding if g.file == name]
            if not mine:
                continue
            after = {g.line: g for g in file_gates(name, scan_text(name, change.after.decode("utf-8", "replace")),
                                                    sm, reference)}
            for g in mine:
                still = after.get(_moved(g.line, change.before, change.steps))
                if still is None or not still.excludes:
                    g.lifted_by.append(ps.name)


# --- on the host ------------------------------------------------------------------------------------



@dataclass
class AuditResult:
    host: str
    sm: int | None
    gates: list[Gate]
    packages: dict[str, keptgates.PackageInfo]
    error: str | None = None

    @property
    def excluding(self) -> list[Gate]:
        return [g for g in self.gates if g.excludes]

    @property
    def kept(self) -> list[Gate]:
        """Excluding gates upstream keeps off the SM on purpose: shown, never counted."""
        return [g for g in self.excluding if g.kept]

    @property
    def remaining(self) -> list[Gate]:
        """Gates that still exclude the SM once the sets asked about are applied, less those upstream keeps on
        purpose (the verdict, the exit code)."""
        return [g for g in self.excluding if not g.lifted_by and not g.kept]

    def verdict(self) -> str:
        """One sentence: what excludes the SM, what upstream keeps on purpose, what the sets lift, what remains."""
        where = f"{self.host}: "
        if not self.excluding:
            return where + f"none of the {len(self.gates)} gates seen excludes SM {self.sm}"
        kept = len(self.kept)
        lifted = len([g for g in self.excluding if g.lifted_by and not g.kept])
        said = where + f"{len(self.excluding)} of {len(self.gates)} gates exclude SM {self.sm}"
        if kept:
            said += f"; upstream keeps {kept} on purpose"
        if lifted:
            said += f"; the sets lift {lifted}"
        if kept or lifted:
            said += f", {len(self.remaining)} remain"
        return said

    def to_json(self) -> JsonObject:
        return {"host": self.host, "sm": self.sm, "packages": self.packages, "error": self.error,
                "excluding": [asdict(g) for g in self.excluding], "gates_seen": len(self.gates),
                "remaining": len(self.remaining), "kept_by_upstream": len(self.kept), "verdict": self.verdict(),
                "not_evaluated": [asdict(g) for g in self.gates if g.error]}


def scope_for(packages: list[str] | None = None, full: bool = False) -> dict[str, list[str]]:
    names = packages or list(DEFAULT_SCOPE)
    out = {}
    for p in names:
        if full or p not in DEFAULT_SCOPE:
            out[p] = [f"**/*{ext}" for ext in (*C_EXTS, ".py")]
        else:
            out[p] = DEFAULT_SCOPE[p]
    return out


SCAN_MAX = 32 << 20  # a full scan (--full) of every package lists many files
SCAN_S = 300.0  # one host's scan: every file of the packages read


def scan_host(conn: Connection, host: Host, scope: dict[str, list[str]]) -> Scan:
    payload = base64.b64encode(json.dumps({"scope": scope, "venv": host.venv}).encode()).decode()
    res = run_system_python(conn, host, "scan.py", payload, timeout=SCAN_S, max_output=SCAN_MAX)
    for line in reversed(res.stdout.splitlines()):
        if line.startswith("FLEET-JSON:"):
            return cast(Scan, json.loads(line[len("FLEET-JSON:"):]))  # as scan.py writes it
    raise FleetError(f"{host.name}: gate scan failed (exit {res.exited}): {(res.stderr or res.stdout).strip()[-300:]}")


def audit_host(conn: Connection, host: Host, sm: int | None = None, packages: list[str] | None = None,
               sets: list[PatchSet] | None = None, full: bool = False) -> AuditResult:
    """Scan the host's installed packages and say which gates exclude its SM (or `sm` if given)."""
    scan = scan_host(conn, host, scope_for(packages, full))
    if sm is None:
        sms = sorted(set(scan["sms"]))
        if not sms:
            raise FleetError(f"{host.name}: cannot tell the SM ({scan['sm_error']}); pass sm=")
        if len(sms) > 1:
            raise InputError(f"{host.name}: GPUs of several SMs ({sms}); pass sm= to pick one")
        sm = sms[0]
    gates = mark_kept(evaluate(scan["files"], sm), sm, scan["packages"])
    if sets and any(g.excludes for g in gates):
        lift(gates, patches.read_state(conn, host, sets), sets, sm)
    return AuditResult(host.name, sm, gates, scan["packages"])


def audit_hosts(hosts: Sequence[Host], opts: ConnectOptions, packages: list[str], sm: int | None,
                sets: list[str], full: bool, progress: Progress = quiet) -> list[parallel.HostOutcome[AuditResult]]:
    """Every host audited in parallel; unknown set names fail first, before any host is contacted. `progress` is
    told where the scans stand while they run (up to SCAN_S a host: a slow host's was silent until the table)."""
    loaded = patchsets.load_sets(sets) if sets else None
    ended: set[str] = set()

    def one(host: Host) -> AuditResult:
        conn = open_connection(host, opts)
        try:
            # the venv the current release serves from (packages:), not the inventory's
            return audit_host(conn, venvs.serving(conn, host), sm=sm, packages=packages or None, sets=loaded,
                              full=full)
        finally:
            conn.close()
            ended.add(host.name)

    try:
        with ticking(progress, "audit scan", SCAN_S, note=lambda: hosts_note([h.name for h in hosts], ended)):
            return parallel.run_all(hosts, one)
    except parallel.Interrupted as stop:  # what was gathered is shown, the hosts left unread marked so
        left = parallel.INTERRUPTED_ROW  # named: without --json the row is a line of its own on stderr
        raise parallel.PartlyDone([o if o is not None else
                                   parallel.HostOutcome(h, False, None, f"{h.name}: {left}", 0.0)
                                   for h, o in zip(hosts, stop.outcomes, strict=True)]) from None
