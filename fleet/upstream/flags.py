"""sglang's launch_server flags, read from a release's own sources with `ast` (pure: never imported, never run).

Where a release declares its flags:
- up to 0.5.13: `parser.add_argument("--x", ...)` calls in `srt/server_args.py`;
- 0.5.14 to 0.5.19: `ServerArgs` fields annotated `A[type, "help"]` or `A[type, Arg(...)]` in the same file
  (`sglang.srt.arg_groups.arg_utils.add_cli_args_from_dataclass` turns them into flags), plus a few calls;
- from 0.5.20: the same fields spread over `srt/arg_groups/fields/*.py`.

A field becomes `--` + its name with `_` -> `-` (or `Arg(cli_name=...)`), plus `Arg(aliases=[...])`; `no_cli=True`
fields are no flag. `argparse.BooleanOptionalAction` adds the `--no-` form. A flag is deprecated when its action
is one of sglang's `Deprecated*Action`s (their `new_flag=` names the replacement) or its help says so.

A flag's `choices=` (argparse refuses any other value at start) is read where it is a literal list, or a module-level
list of literals in the files read (up to 0.5.19 `server_args.py`, from 0.5.20 `srt/arg_groups/choices.py` too),
joined with `+` or wrapped in `list()`/`set()`/`sorted()`; anything built at run time (`list(X.keys())`) is no
choices: fleet cannot say, so it does not judge the value. Lists that upstream lets plugins extend
(`add_attention_backend_choices = ATTENTION_BACKEND_CHOICES.extend`, 0.5.23 choices.py line 225) are `open`.
"""

from __future__ import annotations

import ast
import difflib
import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from fleet import yamlfile
from fleet.upstream.versions import version_key

TABLE = Path(__file__).resolve().parents[2] / "playbooks" / "upstream" / "sglang-flags.yaml"
FIELD_FILES = ("sglang/srt/server_args.py", "sglang/srt/arg_groups/fields/*.py")
CHOICE_FILES = ("sglang/srt/arg_groups/choices.py",)  # named lists only, no flags (0.5.20 on)
_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?![\w-])")
_USE = re.compile(r"\buse\s+(`?--[a-z0-9][a-z0-9-]*(?:[=<{][^\s.)`]*)?`?)", re.I)


@dataclass(frozen=True, slots=True)
class Flag:
    name: str  # without the leading dashes, e.g. "cuda-graph-max-bs"
    switch: bool  # takes no value (store_true / store_false / store_const)
    deprecated: str | None = None  # what to use instead, as upstream words it ("" when it names nothing)
    choices: tuple[str, ...] | None = None  # the values argparse takes, as text (None: any, or not readable)
    open_choices: bool = False  # upstream lets plugins add to them
    kind: str | None = None  # "int" or "float": argparse's type= (None: text, or a conversion of sglang's own)


def flags_of(site_packages: Path) -> dict[str, Flag]:
    """Every launch_server flag the release unpacked at `site_packages` declares (its `sglang/` folder)."""
    files: list[Path] = []
    for pattern in FIELD_FILES:
        files.extend(sorted(site_packages.glob(pattern)))
    if not files:
        raise FileNotFoundError(f"{site_packages}: no sglang/srt/server_args.py")
    sources = [path.read_text(encoding="utf-8") for path in files]
    extra = [p.read_text(encoding="utf-8") for pattern in CHOICE_FILES for p in sorted(site_packages.glob(pattern))]
    lists = named_lists([*extra, *sources])
    out: dict[str, Flag] = {}
    for source in sources:
        for flag in parse(source, lists):
            out.setdefault(flag.name, flag)
    return out


@dataclass(frozen=True, slots=True)
class NamedList:
    values: tuple[str, ...] | None  # None: defined twice differently, or built at run time
    open: bool  # something extends it (`NAME.extend`, `.append`, `.add` named anywhere)


def named_lists(sources: Iterable[str]) -> dict[str, NamedList]:
    """Module-level lists of literals across `sources` (pure), by name."""
    trees = [ast.parse(s) for s in sources]
    values: dict[str, tuple[str, ...] | None] = {}
    for tree in trees:
        for stmt in tree.body:
            target, value = _assigned(stmt)
            if target is None or value is None:
                continue
            got = _choices(value, {k: NamedList(v, False) for k, v in values.items()})
            if target in values and values[target] != got:
                got = None
            if got is not None or target in values or isinstance(value, ast.List | ast.Tuple | ast.Set):
                values[target] = got
    extended = {_dotted(n.value) for tree in trees for n in ast.walk(tree)
                if isinstance(n, ast.Attribute) and n.attr in ("extend", "append", "add", "update", "insert")}
    return {name: NamedList(v, name in extended) for name, v in values.items()}


def _assigned(stmt: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id, stmt.value
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return stmt.target.id, stmt.value
    return None, None


def _choices(node: ast.expr | None, lists: dict[str, NamedList]) -> tuple[str, ...] | None:
    """The values a `choices=` expression names, as text (None: not a literal fleet can read)."""
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        if len(items) != len(node.elts) or any(isinstance(i, bool) or i is None for i in items):
            return None
        return tuple(str(i) for i in items)
    if isinstance(node, ast.Name):
        found = lists.get(node.id)
        return found.values if found else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _choices(node.left, lists), _choices(node.right, lists)
        return left + right if left is not None and right is not None else None
    if (isinstance(node, ast.Call) and _dotted(node.func) in ("list", "tuple", "set", "frozenset", "sorted")
            and len(node.args) == 1 and not node.keywords):
        return _choices(node.args[0], lists)
    return None


def _open(node: ast.expr | None, lists: dict[str, NamedList]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in lists and lists[n.id].open for n in ast.walk(node)) \
        if node is not None else False


def parse(source: str, lists: dict[str, NamedList] | None = None) -> list[Flag]:
    """The flags one source file declares, in file order (pure); `lists`: the named lists its `choices=` may
    name (default: the file's own)."""
    tree = ast.parse(source)
    lists = named_lists([source]) if lists is None else lists
    found: list[Flag] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            found.extend(_from_call(node, lists))
        elif isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    found.extend(_from_field(stmt.target.id, stmt.annotation, lists))
    return found


def _text(node: ast.expr | None) -> str:
    """A string expression's literal parts (f-string placeholders dropped, implicit concatenation joined)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(v) for v in node.values if isinstance(v, ast.Constant))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    return ""


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _dotted(node: ast.expr | None) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ""


def _deprecation(action: str, new_flag: ast.expr | None, help_text: str) -> str | None:
    if "Deprecated" in action.rsplit(".", 1)[-1]:
        return _text(new_flag) or _replacement(help_text)
    if re.match(r"\W*deprecated\b", help_text, re.I):
        return _replacement(help_text)
    return None


def _replacement(help_text: str) -> str:
    m = _USE.search(help_text)
    return m.group(1).strip("`") if m else ""


def _flags(names: list[str], action: str, switch: bool, deprecated: str | None, values: tuple[str, ...] | None,
           opened: bool, kind: str | None) -> list[Flag]:
    out = []
    for name in names:
        if not name.startswith("--"):
            continue
        out.append(Flag(name[2:], switch, deprecated, None if switch else values, opened and not switch,
                        None if switch else kind))
        if action.endswith("BooleanOptionalAction"):
            out.append(Flag("no-" + name[2:], True, deprecated))
    return out


def _typed(converter: str, choices: ast.expr | None, lists: dict[str, NamedList]) -> tuple[
        tuple[str, ...] | None, bool, str | None]:
    """(choices, open, kind) for a value argparse converts with `converter` (a callable's name): choices are kept
    only where fleet compares as argparse would (text, or a whole number written as text); kind is int or float."""
    kind = converter if converter in ("int", "float") else None
    if converter not in ("str", "int"):
        return None, False, kind
    values = _choices(choices, lists)
    return values, values is not None and _open(choices, lists), kind


def _from_call(call: ast.Call, lists: dict[str, NamedList]) -> list[Flag]:
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    action = _dotted(_kw(call, "action"))
    switch = action in ("store_true", "store_false", "store_const", "count") or action.endswith(
        ("StoreTrueAction", "StoreConstAction", "BooleanOptionalAction")) and _kw(call, "nargs") is None
    converter = _kw(call, "type")
    values, opened, kind = _typed(_dotted(converter) if converter is not None else "str", _kw(call, "choices"),
                                  lists)
    return _flags(names, action, switch, _deprecation(action, _kw(call, "new_flag"), _text(_kw(call, "help"))),
                  values, opened, kind)


def _from_field(field: str, annotation: ast.expr, lists: dict[str, NamedList]) -> list[Flag]:
    """A dataclass field as sglang's add_cli_args_from_dataclass makes it a flag (0.5.23 arg_groups/arg_utils.py:
    Optional unwrapped, a Literal's values its choices, a List's items typed, `type_parser` converting instead)."""
    if not (isinstance(annotation, ast.Subscript) and _dotted(annotation.value) in ("A", "Annotated")):
        return []
    parts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
    if len(parts) < 2:
        return []
    inner, meta = parts[0], parts[1]
    help_text, cli_name, aliases, action, new_flag, choices = _text(meta), "", [], "", None, None
    parser: ast.expr | None = None
    if isinstance(meta, ast.Call) and _dotted(meta.func) == "Arg":
        no_cli = _kw(meta, "no_cli")
        if isinstance(no_cli, ast.Constant) and no_cli.value is True:
            return []
        help_text = _text(_kw(meta, "help"))
        cli_name = _text(_kw(meta, "cli_name"))
        alias_node = _kw(meta, "aliases")
        if isinstance(alias_node, ast.List | ast.Tuple):
            aliases = [_text(e) for e in alias_node.elts]
        action = _dotted(_kw(meta, "action"))
        new_flag = _kw(meta, "new_flag")
        choices = _kw(meta, "choices")
        parser = _kw(meta, "type_parser") or _kw(meta, "type")
    elif not help_text and not isinstance(meta, ast.Constant):
        return []  # not a CLI field (an NS marker, a Derived record)
    is_bool = _is_bool(inner) and not action
    switch = is_bool or action in ("store_true", "store_false", "store_const") or action.endswith(
        ("StoreTrueAction", "StoreConstAction", "BooleanOptionalAction"))
    names = [cli_name or "--" + field.replace("_", "-"), *aliases]
    base = _unwrap(inner)
    if isinstance(base, ast.Subscript) and _dotted(base.value) in ("List", "list", "typing.List"):
        base = base.slice  # nargs: each item converted and checked
    if isinstance(base, ast.Subscript) and _dotted(base.value) in ("Literal", "typing.Literal"):
        literal = base.slice if isinstance(base.slice, ast.Tuple) else ast.Tuple(elts=[base.slice])
        choices = choices or literal
        first = literal.elts[0] if literal.elts else None
        converter = type(first.value).__name__ if isinstance(first, ast.Constant) else "str"
    else:
        converter = _dotted(base) if isinstance(base, ast.Name) and base.id in ("int", "float") else "str"
    if parser is not None or action:
        converter = _dotted(parser) if parser is not None else converter  # its own conversion, or its own action
    values, opened, kind = _typed(converter, choices, lists)
    if action:
        values, opened = None, False
    return _flags(names, action, switch, _deprecation(action, new_flag, help_text), values, opened, kind)


def _unwrap(node: ast.expr) -> ast.expr:
    """X from Optional[X] or X | None."""
    if isinstance(node, ast.Subscript) and _dotted(node.value) in ("Optional", "typing.Optional"):
        return node.slice
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        if isinstance(node.right, ast.Constant) and node.right.value is None:
            return node.left
        if isinstance(node.left, ast.Constant) and node.left.value is None:
            return node.right
    return node


def _is_bool(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "bool"
    if isinstance(node, ast.Subscript) and _dotted(node.value) in ("Optional", "typing.Optional"):
        return _is_bool(node.slice)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # bool | None
        sides = [node.left, node.right]
        return any(_is_bool(s) for s in sides) and all(
            _is_bool(s) or (isinstance(s, ast.Constant) and s.value is None) for s in sides)
    return False


# ---------------------------------------------------------------------------------------- the table over releases

class Deprecation(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    since: str  # the first corpus release that calls it deprecated
    use: str  # upstream's replacement ("" when it names none)


class Choices(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    spans: list[list[str]]  # [first, last] corpus releases whose argparse takes exactly these values
    values: list[str]
    open: bool | None = None  # true: upstream lets plugins add to them


class FlagSpan(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    spans: list[list[str]]  # [first, last] corpus releases that declare it, oldest first
    switch: bool
    deprecated: Deprecation | None = None
    choices: list[Choices] | None = None  # releases not in one: any value (or fleet cannot read them)
    type: str | None = None  # "int" or "float" where every release that declares it converts so


class Table(BaseModel):
    """Which release declares which flag: built from the corpus, committed as playbooks/upstream/sglang-flags.yaml
    so that a deploy needs no corpus."""

    model_config = ConfigDict(extra="forbid", strict=True)

    versions: list[str]  # the corpus releases, oldest first
    flags: dict[str, FlagSpan]

    def release_for(self, version: str) -> str | None:
        """The corpus release that stands for `version`: the newest one not newer than it (None: older than all)."""
        key = version_key(version)
        older = [v for v in self.versions if version_key(v) <= key]
        return older[-1] if older else None

    def has(self, flag: str, release: str) -> bool:
        span = self.flags.get(flag)
        key = version_key(release)
        return span is not None and any(version_key(a) <= key <= version_key(b) for a, b in span.spans)

    def problem(self, flag: str, version: str) -> str | None:
        """Why `--flag` cannot be given to sglang `version` (None: it can, or the table cannot say)."""
        release = self.release_for(version)
        if release is None or self.has(flag, release):
            return None
        span = self.flags.get(flag)
        if span is None:
            return f"--{flag} is in no sglang release from {self.versions[0]} to {self.versions[-1]}"
        key = version_key(release)
        first, last = span.spans[0][0], span.spans[-1][1]
        if key < version_key(first):
            return f"--{flag} needs sglang >= {first} (host has {version})"
        gone = self.versions[self.versions.index(last) + 1] if key > version_key(last) else release
        use = f"; use {span.deprecated.use}" if span.deprecated and span.deprecated.use else ""
        since = f" (deprecated since {span.deprecated.since})" if span.deprecated else ""
        return f"--{flag} was removed in sglang {gone}{since}{use}"

    def spell(self, text: str, version: str) -> str:
        """`text` (a remedy) with each flag sglang `version` no longer takes, or deprecates for a named
        successor, written as that successor: --cuda-graph-max-bs becomes --cuda-graph-max-bs-decode on 0.5.20."""
        release = self.release_for(version)
        if release is None:
            return text

        def successor(m: re.Match[str]) -> str:
            span = self.flags.get(m.group(1))
            if span is None or span.deprecated is None:
                return m.group(0)
            if self.has(m.group(1), release) and version_key(release) < version_key(span.deprecated.since):
                return m.group(0)
            new = _FLAG.search(span.deprecated.use)
            return new.group(0) if new is not None else m.group(0)
        return _FLAG.sub(successor, text)

    def value_problem(self, flag: str, value: object, version: str) -> str | None:
        """Why sglang `version`'s argparse would refuse `--flag value` at start: not of its type=, or not among
        its choices (None: it takes it, or the table cannot say). A value of several words (a flag of nargs) is
        judged word by word."""
        release = self.release_for(version)
        span = self.flags.get(flag)
        if release is None or span is None or isinstance(value, bool) or value is None:
            return None
        words = str(value).split() or [str(value)]
        if span.type is not None and (bad := next((w for w in words if not _converts(span.type, w)), None)):
            what = "a whole number" if span.type == "int" else "a number"
            return f"--{flag} takes {what} (sglang's type={span.type}), not {bad!r}"
        known = self._choices(span, release)
        wrong = [w for w in words if known is not None and w not in known.values]
        if known is None or not wrong:
            return None
        if version_key(version) != version_key(release):  # between two known releases, or after the newest
            later = self.versions.index(release) + 1
            after = self._choices(span, self.versions[later]) if later < len(self.versions) else None
            if after is None or any(w in after.values for w in wrong):
                return None  # it may have come in between: the table cannot say
        near = difflib.get_close_matches(wrong[0], known.values, n=1, cutoff=0.6)
        return (f"--{flag} {wrong[0]!r} is not one of sglang {release}'s choices ({', '.join(known.values)}"
                + ("; plugins may add more" if known.open else "") + ")"
                + (f"; did you mean {near[0]}?" if near else ""))

    @staticmethod
    def _choices(span: FlagSpan, release: str) -> Choices | None:
        key = version_key(release)
        return next((c for c in span.choices or [] if any(version_key(a) <= key <= version_key(b) for a, b in c.spans)),
                    None)

    def deprecated(self, flag: str, version: str) -> str | None:
        """`--flag` still works on `version` but upstream deprecated it: what it says to use instead."""
        release = self.release_for(version)
        span = self.flags.get(flag)
        if release is None or span is None or span.deprecated is None or not self.has(flag, release):
            return None
        if version_key(release) < version_key(span.deprecated.since):
            return None
        use = f"; use {span.deprecated.use}" if span.deprecated.use else ""
        return f"--{flag} is deprecated since sglang {span.deprecated.since}{use}"


def build(releases: Iterable[tuple[str, dict[str, Flag]]]) -> Table:
    """The table from each release's flags (pure); releases in any order."""
    ordered = sorted(releases, key=lambda r: version_key(r[0]))
    versions = [v for v, _ in ordered]
    flags: dict[str, FlagSpan] = {}
    for name in sorted({f for _, fl in ordered for f in fl}):
        spans: list[list[str]] = []
        prev_in = False
        switch, dep = False, None
        for v, fl in ordered:
            flag = fl.get(name)
            if flag is not None:
                switch = flag.switch
                if flag.deprecated is not None and dep is None:
                    dep = Deprecation(since=v, use=flag.deprecated)
                elif flag.deprecated is not None and dep is not None and flag.deprecated and not dep.use:
                    dep = Deprecation(since=dep.since, use=flag.deprecated)
                if prev_in:
                    spans[-1][1] = v
                else:
                    spans.append([v, v])
            prev_in = flag is not None
        kinds = {fl[name].kind for _, fl in ordered if name in fl}
        flags[name] = FlagSpan(spans=spans, switch=switch, deprecated=dep,
                               choices=_choice_spans([(v, fl.get(name)) for v, fl in ordered]),
                               type=kinds.pop() if len(kinds) == 1 else None)
    return Table(versions=versions, flags=flags)


def _converts(kind: str, word: str) -> bool:
    """Whether argparse's int() or float() takes `word`."""
    try:
        int(word) if kind == "int" else float(word)
    except ValueError:
        return False
    return True


def _choice_spans(releases: list[tuple[str, Flag | None]]) -> list[Choices] | None:
    """Consecutive releases that take the same values, as one span each (pure)."""
    out: list[Choices] = []
    prev: tuple[tuple[str, ...], bool] | None = None
    for version, flag in releases:
        now = (flag.choices, flag.open_choices) if flag is not None and flag.choices is not None else None
        if now is not None and now == prev:
            out[-1].spans[-1][1] = version
        elif now is not None:
            out.append(Choices(spans=[[version, version]], values=list(now[0]), open=now[1] or None))
        prev = now
    return out or None


def dump(table: Table) -> str:
    """The committed form: one flag per line, so a diff between corpora reads flag by flag (JSON is YAML)."""
    lines = ["# sglang launch_server flags per release, read with ast from the real wheels (fleet/upstream/flags.py).",
             "# Generated by `inv upstream --write-flags`; tests/upstream/test_sglang_flags.py checks it.",
             f"versions: {json.dumps(table.versions)}", "flags:"]
    for name, span in table.flags.items():
        entry = span.model_dump(exclude_none=True)
        lines.append(f"  {json.dumps(name)}: {json.dumps(entry, separators=(', ', ': '))}")
    return "\n".join(lines) + "\n"


@functools.cache
def default_table() -> Table:
    return load_table(TABLE)


def load_table(path: Path = TABLE) -> Table:
    return yamlfile.load(path).parse(Table)
