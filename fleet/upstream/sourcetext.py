"""The texts a real release can print, read from its source (pure: parsed with `ast`, never imported).

A message in Python source is often an f-string or implicitly concatenated pieces; `templates()` renders each
string expression the way it prints, with `{}` where an f-string placeholder sits, so that a rule's literal such
as `Capture {} CUDA graph begin` can be found whatever the expression inside the braces is. `sites()` lists the
messages a module raises, asserts or logs at error level: the population the log rules are measured on.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass

PLACEHOLDER = "{}"
_LOG_LEVELS = frozenset({"error", "exception", "critical", "fatal", "error_once"})


def render(node: ast.expr) -> str | None:
    """A string expression as it prints, placeholders as `{}`; None if it is not a string expression."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                parts.append(v.value)
            else:
                parts.append(PLACEHOLDER)
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = render(node.left), render(node.right)
        if left is None and right is None:
            return None
        return (left if left is not None else PLACEHOLDER) + (right if right is not None else PLACEHOLDER)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):  # "text %s" % args
        return render(node.left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return render(node.func.value)  # "text {}".format(...): its braces already read as placeholders
    return None


def shape(template: str) -> re.Pattern[str]:
    """A regex a printed line matches when it is an instance of `template`: its fixed pieces, in order, with
    anything where the placeholders (and the space around them) were."""
    pieces = [p.strip() for p in template.split(PLACEHOLDER) if p.strip()]
    return re.compile(".*?".join(map(re.escape, pieces)), re.S)


def templates(source: str) -> list[str]:
    """Every string expression of a Python file, rendered (outermost only: an f-string's pieces are not
    listed again on their own). A file this Python cannot parse gives none (`contains` still reads it as text)."""
    try:
        tree = _parse(source)
    except SyntaxError:
        return []
    out: list[str] = []
    inner: set[int] = set()
    for node in ast.walk(tree):
        if id(node) in inner or not isinstance(node, ast.expr):
            continue
        text = render(node)
        if text is not None:
            out.append(text)
            inner.update(id(n) for n in ast.walk(node) if n is not node)
    return out


def contains(source: str, literal: str, python: bool) -> bool:
    """Whether the file says `literal` (`{}` = any f-string placeholder in Python files; C++ is read as text)."""
    if literal in source:
        return True
    return python and any(literal in t for t in templates(source))


@dataclass(frozen=True, slots=True)
class Site:
    """One place a module can stop or complain: what it raises, asserts or logs."""

    line: int
    kind: str  # raise | assert | log
    exception: str | None  # the raised type's name, e.g. "RuntimeError" (None: a log line, or not a call)
    text: str  # the message, placeholders as `{}`
    function: str | None = None  # the innermost function or method around it (None: module level)

    def as_line(self, sample: str = "1") -> str:
        """The line as a log would show it, each placeholder given `sample`."""
        msg = self.text.replace(PLACEHOLDER, sample)
        if self.kind == "assert":
            return f"AssertionError: {msg}"
        return f"{self.exception}: {msg}" if self.exception else msg


def sites(source: str) -> list[Site]:
    """Raise / assert / logger.error|exception|critical sites with a message we can read (pure)."""
    nodes = list(ast.walk(_parse(source)))  # walked once: the three passes below read the same list
    out: list[Site] = []
    held = _held_strings(nodes)
    around = _functions(nodes)
    for node in nodes:
        if isinstance(node, ast.Call) and node.args and _is_exception(_name(node.func)):
            # raised where it is built, or built to be raised later (`return RuntimeError(...)`, `err = ...`);
            # `msg = "..."; msg += f"..."; raise RuntimeError(msg)` reads the text `msg` holds by then
            arg = node.args[0]
            text = _held(held, arg.id, node.lineno) if isinstance(arg, ast.Name) else render(arg)
            if text:
                out.append(Site(node.lineno, "raise", _name(node.func), text, around(node.lineno)))
        elif isinstance(node, ast.Assert) and node.msg is not None:
            text = render(node.msg)
            if text:
                out.append(Site(node.lineno, "assert", "AssertionError", text, around(node.lineno)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in _LOG_LEVELS and node.args and _is_logger(node.func.value)):
            text = render(node.args[0])
            if text:
                out.append(Site(node.lineno, "log", None, text, around(node.lineno)))
    return sorted(out, key=lambda s: s.line)


def _functions(nodes: list[ast.AST]) -> Callable[[int], str | None]:
    """line -> the innermost function defined around it."""
    spans = sorted(((n.lineno, n.end_lineno or n.lineno, n.name) for n in nodes
                    if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), key=lambda s: s[0])

    def around(line: int) -> str | None:
        inside = [name for start, end, name in spans if start <= line <= end]
        return inside[-1] if inside else None  # sorted by start: the last that holds it is the innermost
    return around


def _held_strings(nodes: list[ast.AST]) -> dict[str, list[tuple[int, str, bool]]]:
    """Per variable name, the string assignments to it: (line, text, appended) in line order."""
    out: dict[str, list[tuple[int, str, bool]]] = {}
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            text = render(node.value)
            if text is not None:
                out.setdefault(node.targets[0].id, []).append((node.lineno, text, False))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name):
            text = render(node.value)
            if text is not None:
                out.setdefault(node.target.id, []).append((node.lineno, text, True))
    for assigns in out.values():
        assigns.sort()
    return out


def _held(held: dict[str, list[tuple[int, str, bool]]], name: str, line: int) -> str | None:
    """The text `name` holds at `line`: its last plain assignment before it, plus the appends after that
    (within 40 lines, so that a name reused in another function is not taken for this one)."""
    text: str | None = None
    for at, piece, appended in held.get(name, []):
        if at >= line or at < line - 40:
            continue
        text = (text or "") + piece if appended else piece
    return text


def _parse(source: str) -> ast.Module:
    return ast.parse(source.removeprefix("\ufeff"))


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_exception(name: str | None) -> bool:
    if not name:
        return False
    return name == "Exception" or (name[0].isupper() and name.endswith(("Error", "Exception", "Exit")))


def _is_logger(node: ast.expr) -> bool:
    name = _name(node) or ""
    return "log" in name.lower()
