"""Audit of architecture gates: which `#if __CUDA_ARCH__ ...` conditions and Python SM checks in the
installed flashinfer / sglang still keep a host's SM off a code path that SM90 / SM100 get.

A `__CUDA_ARCH__` conditional "excludes" an SM when it holds for one of the reference archs
(REFERENCE: SM90, SM100, the parts the kernels were written for) and not for that SM: `#if
__CUDA_ARCH__ < 800` legacy branches, or `>= 1000` paths SM120 also gets, are not reported for
SM120. A Python gate (a list of majors, an `or` of SM checks) excludes an SM whose major it lacks.

Evaluated:
- C preprocessor: #if / #elif / #ifdef / #ifndef on __CUDA_ARCH__ with defined(), !, &&, ||,
  comparisons, arithmetic and parentheses; an #elif is taken with the conditions before it in its
  chain negated; identifiers other than __CUDA_ARCH__ are 0 as in C. Verdicts agree with `cpp
  -D__CUDA_ARCH__=N` (tests/unit/test_archgate.py checks every directive of the simulated headers).
- Python: `supported_major_versions=[9, 10]`, `major in (9, 10)`, and lines chaining
  `is_smXX_supported` / `_is_smXX_supported` / `is_blackwell_supported` / `is_hopper...` with `or`.

The scan runs on the host in one round trip (only directive / gate lines come back); evaluation is
pure and local.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from fabric import Connection

from fleet import hostside, parallel, patchsets, remote
from fleet.connect import ConnectOptions, open_connection
from fleet.errors import FleetError, InputError
from fleet.inventory import Host
from fleet.patchsets import PatchSet

REFERENCE = (900, 1000)
DEFAULT_SCOPE: dict[str, list[str]] = {
    "flashinfer": ["data/include/flashinfer/comm/*.cuh", "data/csrc/trtllm_*.cu", "jit/comm.py"],
    "sglang": ["srt/server_args.py", "srt/layers/communicator.py"],
}
C_EXTS = (".cuh", ".cu", ".h", ".hpp", ".cc", ".cpp")


# --- the C preprocessor expression evaluator -------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(\d+)[uUlL]*|([A-Za-z_]\w*)|(&&|\|\||==|!=|<=|>=|<<|>>|[-+*/%<>!()~?:]))")


class ExprError(ValueError):
    pass


def _tokens(expr: str) -> list[str]:
    out, pos = [], 0
    expr = expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            if expr[pos:].strip() == "":
                break
            raise ExprError(f"cannot read {expr[pos:]!r}")
        out.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    return out


class _Parser:
    # precedence climbing over C's binary operators (the ones #if conditions use)
    BINARY = {"||": 1, "&&": 2, "==": 6, "!=": 6, "<": 7, ">": 7, "<=": 7, ">=": 7, "<<": 8, ">>": 8,
              "+": 9, "-": 9, "*": 10, "/": 10, "%": 10}

    def __init__(self, toks: list[str], macros: dict[str, int]):
        self.toks, self.i, self.macros = toks, 0, macros

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise ExprError(f"expected {want or 'more'}, got {tok!r}")
        self.i += 1
        return tok

    def parse(self) -> int:
        v = self.ternary()
        if self.peek() is not None:
            raise ExprError(f"unexpected {self.peek()!r}")
        return v

    def ternary(self) -> int:
        cond = self.binary(1)
        if self.peek() == "?":
            self.take("?")
            a = self.ternary()
            self.take(":")
            b = self.ternary()
            return a if cond else b
        return cond

    def binary(self, min_prec: int) -> int:
        left = self.unary()
        while (op := self.peek()) in self.BINARY and self.BINARY[op] >= min_prec:
            self.take()
            right = self.binary(self.BINARY[op] + 1)
            left = _apply(op, left, right)
        return left

    def unary(self) -> int:
        tok = self.take()
        if tok == "!":
            return int(not self.unary())
        if tok == "-":
            return -self.unary()
        if tok == "+":
            return self.unary()
        if tok == "~":
            return ~self.unary()
        if tok == "(":
            v = self.ternary()
            self.take(")")
            return v
        if tok == "defined":
            paren = self.peek() == "("
            if paren:
                self.take("(")
            name = self.take()
            if paren:
                self.take(")")
            return int(name in self.macros)
        if tok.isdigit():
            return int(tok)
        if re.match(r"[A-Za-z_]", tok):
            return self.macros.get(tok, 0)
        raise ExprError(f"unexpected {tok!r}")


def _apply(op: str, a: int, b: int) -> int:
    if op == "||":
        return int(bool(a) or bool(b))
    if op == "&&":
        return int(bool(a) and bool(b))
    if op in ("/", "%") and b == 0:
        raise ExprError("division by zero")
    return {"==": lambda: int(a == b), "!=": lambda: int(a != b), "<": lambda: int(a < b), ">": lambda: int(a > b),
            "<=": lambda: int(a <= b), ">=": lambda: int(a >= b), "<<": lambda: a << b, ">>": lambda: a >> b,
            "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
            "/": lambda: int(a / b), "%": lambda: a - b * int(a / b)}[op]()


def eval_cpp(expr: str, arch: int | None) -> bool:
    """An #if condition for a device pass with __CUDA_ARCH__=arch (e.g. 1200), or the host pass (None)."""
    macros = {} if arch is None else {"__CUDA_ARCH__": arch}
    return bool(_Parser(_tokens(_strip_comments(expr)), macros).parse())


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//.*", "", text)


def arch_of_sm(sm: int) -> int:
    """SM 120 -> __CUDA_ARCH__ 1200."""
    return sm * 10


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


_DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)$")


def cpp_directives(text: str) -> list[tuple[int, str, str, str]]:
    """(line, directive, condition, raw) for each preprocessor conditional; continuation lines joined."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        start, line = i + 1, lines[i]
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1] + " " + lines[i]
        m = _DIRECTIVE.match(line)
        if m:
            out.append((start, m.group(1), _strip_comments(m.group(2)).strip(), line))
        i += 1
    return out


def _as_expr(kind: str, cond: str) -> str:
    if kind == "ifdef":
        return f"defined({cond.split()[0]})" if cond else "0"
    if kind == "ifndef":
        return f"!defined({cond.split()[0]})" if cond else "0"
    return cond


def cpp_gates(file: str, directives: list[tuple[int, str, str, str]], sm: int,
              reference: tuple[int, ...] = REFERENCE) -> list[Gate]:
    """The __CUDA_ARCH__ conditionals of one file, each with whether it excludes `sm`."""
    chains: list[list[str]] = []  # per open #if: the conditions of the branches so far
    gates = []
    for line, kind, cond, raw in directives:
        if kind in ("if", "ifdef", "ifndef"):
            expr = _as_expr(kind, cond)
            chains.append([expr])
            effective = expr
        elif kind == "elif":
            if not chains:
                continue
            effective = " && ".join([*(f"!({c})" for c in chains[-1]), f"({cond})"])
            chains[-1].append(cond)
            expr = cond
        else:
            if kind == "endif" and chains:
                chains.pop()
            continue
        if "__CUDA_ARCH__" not in expr:
            continue
        g = Gate(file, line, "cpp", expr, raw.strip())
        try:
            g.excludes = _excludes(functools.partial(_holds, effective), sm, reference)
        except ExprError as exc:
            g.condition += f"  (not evaluated: {exc})"
        gates.append(g)
    return gates


def _holds(expr: str, arch: int) -> bool:
    return eval_cpp(expr, arch)


def _excludes(holds: Callable[[int], bool], sm: int, reference: tuple[int, ...]) -> bool:
    arch = arch_of_sm(sm)
    return any(holds(r) for r in reference if r != arch) and not holds(arch)


_MAJORS = re.compile(r"(supported_major_versions\s*=\s*|\bmajor\s+(?:not\s+)?in\s+)[\[(]([\d,\s]*)[\])]")
_SM_CHECK = re.compile(r"\b_?is_(sm(\d+)|blackwell|hopper\w*)_supported\b|\bis_hopper_with_cuda_\w+\b")
_FAMILY_MAJORS = {"blackwell": {10, 11, 12}, "hopper": {9}}


def py_gates(file: str, lines: list[tuple[int, str]], sm: int,
             reference: tuple[int, ...] = REFERENCE) -> list[Gate]:
    out = []
    for n, text in lines:
        code = text.split("#", 1)[0]
        g = py_gate(file, n, code, sm, reference)
        if g:
            g.text = text.strip()
            out.append(g)
    return out


def py_gate(file: str, n: int, code: str, sm: int, reference: tuple[int, ...] = REFERENCE) -> Gate | None:
    """A Python gate on one line (comments stripped), or None."""
    m = _MAJORS.search(code)
    if m:
        majors = {int(x) for x in re.findall(r"\d+", m.group(2))}
        negated = "not in" in m.group(1)

        def holds(arch: int) -> bool:
            return ((arch // 100) in majors) != negated

        return Gate(file, n, "py-majors", m.group(0).strip(), code.strip(), not holds(arch_of_sm(sm)))
    checks = list(_SM_CHECK.finditer(code))
    if len(checks) >= 2 and re.search(r"\bor\b", code):
        family: set[int] = set()
        for c in checks:
            if c.group(2):
                family.add(int(c.group(2)) // 10)
            elif c.group(1) and c.group(1).startswith("blackwell"):
                family |= _FAMILY_MAJORS["blackwell"]
            else:
                family |= _FAMILY_MAJORS["hopper"]
        cond = " or ".join(dict.fromkeys(c.group(0) for c in checks))
        return Gate(file, n, "py-sm-check", cond, code.strip(), (sm // 10) not in family)
    return None


def lifted_by(gate: Gate, sets: list[PatchSet], sm: int, reference: tuple[int, ...] = REFERENCE) -> list[str]:
    """Names of the sets whose edits, applied to the gate's line, make it stop excluding `sm`."""
    names = []
    for ps in sets:
        for e in ps.edits:
            if f"{e.package}/{e.file}" != gate.file or "\n" in e.find.strip("\n") or e.find.strip() not in gate.text:
                continue
            new = gate.text.replace(e.find.strip(), e.replace.strip())
            if gate.kind == "cpp":
                d = cpp_directives(new)
                if d and d[0][1] in ("if", "elif", "ifdef", "ifndef"):
                    still = cpp_gates(gate.file, [(gate.line, d[0][1], d[0][2], new)], sm, reference)
                    if not any(g.excludes for g in still):
                        names.append(ps.name)
            else:
                g = py_gate(gate.file, gate.line, new.split("#", 1)[0], sm, reference)
                if g is None or not g.excludes:
                    names.append(ps.name)
    return list(dict.fromkeys(names))


def evaluate(scan: dict[str, Any], sm: int, sets: list[PatchSet] | None = None,
             reference: tuple[int, ...] = REFERENCE) -> list[Gate]:
    """Every gate of a scan ({file: {"kind": "c"|"py", "lines": [[n, text], ...]}}) for `sm`."""
    gates: list[Gate] = []
    for file, item in sorted(scan.items()):
        lines = [(int(n), t) for n, t in item["lines"]]
        if item["kind"] == "c":
            gates += cpp_gates(file, cpp_directives_numbered(lines), sm, reference)
        else:
            gates += py_gates(file, lines, sm, reference)
    for g in gates:
        if g.excludes and sets:
            g.lifted_by = lifted_by(g, sets, sm, reference)
    return gates


def cpp_directives_numbered(lines: list[tuple[int, str]]) -> list[tuple[int, str, str, str]]:
    """cpp_directives over (line number, directive text) pairs as the host scan returns them."""
    out = []
    for n, text in lines:
        for _, kind, cond, raw in cpp_directives(text):
            out.append((n, kind, cond, raw))
    return out


# --- on the host ------------------------------------------------------------------------------------



@dataclass
class AuditResult:
    host: str
    sm: int | None
    gates: list[Gate]
    packages: dict[str, Any]
    error: str | None = None

    @property
    def excluding(self) -> list[Gate]:
        return [g for g in self.gates if g.excludes]

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "sm": self.sm, "packages": self.packages, "error": self.error,
                "excluding": [asdict(g) for g in self.excluding], "gates_seen": len(self.gates)}


def scope_for(packages: list[str] | None = None, full: bool = False) -> dict[str, list[str]]:
    names = packages or list(DEFAULT_SCOPE)
    out = {}
    for p in names:
        if full or p not in DEFAULT_SCOPE:
            out[p] = [f"**/*{ext}" for ext in (*C_EXTS, ".py")]
        else:
            out[p] = DEFAULT_SCOPE[p]
    return out


def scan_host(conn: Connection, host: Host, scope: dict[str, list[str]]) -> dict[str, Any]:
    python = f"{host.venv.rstrip('/')}/bin/python"
    payload = base64.b64encode(json.dumps({"scope": scope}).encode()).decode()
    res = remote.run(conn, host, hostside.python_command(python, "scan.py", payload), timeout=300)
    for line in reversed(res.stdout.splitlines()):
        if line.startswith("FLEET-JSON:"):
            scan: dict[str, Any] = json.loads(line[len("FLEET-JSON:"):])
            return scan
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
    return AuditResult(host.name, sm, evaluate(scan["files"], sm, sets), scan["packages"])


def audit_hosts(hosts: Sequence[Host], opts: ConnectOptions, packages: list[str], sm: int | None,
                sets: list[str], full: bool) -> list[parallel.Outcome[AuditResult]]:
    """Every host audited in parallel; unknown set names fail first, before any host is contacted."""
    loaded = patchsets.load_sets(sets) if sets else None

    def one(host: Host) -> AuditResult:
        conn = open_connection(host, opts)
        try:
            return audit_host(conn, host, sm=sm, packages=packages or None, sets=loaded, full=full)
        finally:
            conn.close()

    return parallel.run_all(hosts, one)
