"""The C preprocessor's `#if` expressions, evaluated for one `__CUDA_ARCH__` (pure).

Handles defined(), !, &&, ||, comparisons, arithmetic, ?:, parentheses, C++'s alternative tokens (`and`, `or`,
`not`, `not_eq`, `bitand`, `bitor`, `xor`, `compl`), `true`/`false`, and the function-like macros in KNOWN_CALLS
(as the headers that use them define them). Any other function-like macro raises ExprError naming it: it is
reported, never guessed. Identifiers other than the arch macros are 0, as in C.

For a device pass of an arch-specific target (flashinfer builds `sm_90a`, `sm_100a`, `sm_120a`), nvcc defines
`__CUDA_ARCH__`, `__CUDA_ARCH_SPECIFIC__` and `__CUDA_ARCH_FAMILY_SPECIFIC__` to the same value (e.g. 1200).
"""

from __future__ import annotations

import re

ALTERNATIVE = {"and": "&&", "or": "||", "not": "!", "not_eq": "!=", "bitand": "&", "bitor": "|", "xor": "^",
               "compl": "~"}
# cutlass/detail/helper_macros.hpp (flashinfer 0.7.x ships it under data/cutlass/include)
# name -> the macros whose value it compares its argument with (any of them equal: true)
KNOWN_CALLS = {"CUDA_ARCH_FAMILY": ("__CUDA_ARCH_FAMILY_SPECIFIC__",),
               "CUDA_ARCH_CONDITIONAL": ("__CUDA_ARCH_SPECIFIC__",),
               "CUDA_ARCH_CONDITIONAL_OR_FAMILY": ("__CUDA_ARCH_SPECIFIC__", "__CUDA_ARCH_FAMILY_SPECIFIC__")}
ARCH_MACROS = ("__CUDA_ARCH__", "__CUDA_ARCH_SPECIFIC__", "__CUDA_ARCH_FAMILY_SPECIFIC__")

_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|\d+)[uUlL]*|([A-Za-z_]\w*)"
                    r"|(&&|\|\||==|!=|<=|>=|<<|>>|[-+*/%<>!()~?:&|^,]))")


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
        tok = m.group(1) or m.group(2) or m.group(3)
        out.append(ALTERNATIVE.get(tok, tok))
        pos = m.end()
    return out


class _Parser:
    # precedence climbing over C's binary operators (the ones #if conditions use)
    BINARY = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, ">": 7, "<=": 7, ">=": 7,
              "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10}

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

    def call(self, name: str) -> int:
        if name not in KNOWN_CALLS:
            raise ExprError(f"unknown function-like macro {name}()")
        self.take("(")
        arg = self.ternary()
        self.take(")")
        return int(any(self.macros.get(m, 0) == arg for m in KNOWN_CALLS[name]))

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
        if tok[0].isdigit():
            if tok[:2] in ("0x", "0X"):
                return int(tok, 16)
            return int(tok, 8) if tok[0] == "0" and len(tok) > 1 else int(tok)
        if tok in ("true", "false"):
            return int(tok == "true")
        if re.match(r"[A-Za-z_]", tok):
            if self.peek() == "(":
                return self.call(tok)
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
            "&": lambda: a & b, "|": lambda: a | b, "^": lambda: a ^ b,
            "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
            "/": lambda: int(a / b), "%": lambda: a - b * int(a / b)}[op]()


def eval_cpp(expr: str, arch: int | None) -> bool:
    """An #if condition for a device pass with __CUDA_ARCH__=arch (e.g. 1200), or the host pass (None)."""
    macros = {} if arch is None else dict.fromkeys(ARCH_MACROS, arch)
    return bool(_Parser(_tokens(strip_comments(expr)), macros).parse())


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//.*", "", text)
