"""YAML files that can say where a key lives: errors name the file and line, not only the key; and the JSON
values fleet writes and reads (`--json`, manifests, events, state files, the host programs' answers)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import UnionType
from typing import Any, TypeAlias, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from fleet.errors import InputError

# One JSON object as fleet builds it (`to_json`, `--json`) or json.loads reads it (a manifest, an event, a state
# file, a host program's answer): each value is read only after a check of its type (a host's JSON is data).
# A shape fleet knows field by field is a TypedDict or a typed value instead.
JsonObject: TypeAlias = dict[str, object]

# Where a value sits in a YAML document: the keys and list indexes down to it, e.g. ("ladder", 0, "flags").
Loc = tuple[str | int, ...]
M = TypeVar("M", bound=BaseModel)

@dataclass
class Document:
    path: Path
    data: Any
    lines: dict[Loc, int] = field(default_factory=dict)
    # load(collect=True): each key written twice (the last one read, as YAML does), said here rather than raised
    duplicates: list[InputError] | None = None

    def line_of(self, loc: Loc) -> int | None:
        """The line of the deepest key of `loc` that the file has."""
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get(())

    def error(self, loc: Loc, message: str) -> InputError:
        line = self.line_of(loc)
        where = f"{self.path}:{line}" if line else str(self.path)
        key = ".".join(str(p) for p in loc)
        return InputError(f"{where}: {key + ': ' if key else ''}{message}")

    def parse(self, model: type[M]) -> M:
        """The document as `model`; the first problem as one line naming file, line and key."""
        try:
            return model.model_validate(self.data)
        except ValidationError as err:
            raise self.validation_error(err, model) from None

    def validation_error(self, err: ValidationError, model: type[BaseModel] | None = None) -> InputError:
        """The first problem pydantic found, as one line naming file, line and key."""
        return self.validation_errors(err, model)[0]

    def validation_errors(self, err: ValidationError, model: type[BaseModel] | None = None) -> list[InputError]:
        """Every problem pydantic found, each as one line naming file, line and key; an unknown key with the
        nearest key `model` takes there ("did you mean user?")."""
        out = []
        for found in err.errors():
            loc = tuple(p for p in found["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            msg = found["msg"].removeprefix("Value error, ")
            if found["type"] == "extra_forbidden":
                # a key one level too high first (env: beside vars: is vars.env, not venv)
                near = _one_level_down(model, loc, found.get("input")) or \
                    difflib.get_close_matches(str(loc[-1]), keys_at(model, loc[:-1]), n=1, cutoff=0.6)
                msg = "unknown key" + (f"; did you mean {near[0]}?" if near and loc else "")
            elif found["type"] == "missing":
                msg = "required key is missing"
            out.append(self.error(loc, msg))
        return out


def keys_at(model: Any, loc: Loc) -> list[str]:
    """The keys `model` takes in the mapping at `loc` (its fields, by the name a file writes), through nested
    models, dicts, lists and `X | None`; [] where that is no model."""
    found = _type_at(model, loc)
    is_model = isinstance(found, type) and issubclass(found, BaseModel)
    return [f.alias or name for name, f in found.model_fields.items()] if is_model else []


def _type_at(model: Any, loc: Loc) -> Any:
    """What `model` takes at `loc` (None where no field is there)."""
    for part in (*loc, None):
        args = [a for a in get_args(model) if a is not type(None)]
        if get_origin(model) in (Union, UnionType) and len(args) == 1:
            model = args[0]
        is_model = isinstance(model, type) and issubclass(model, BaseModel)
        if part is None:
            return model
        if get_origin(model) in (dict, list):
            model = get_args(model)[-1]
        elif is_model and isinstance(part, str) and part in model.model_fields:
            model = model.model_fields[part].annotation
        else:
            return None
    return None


def _one_level_down(model: Any, loc: Loc, value: Any) -> list[str]:
    """`vars.env` for `env:` written beside vars: a key of the mapping next to it that takes a value of this kind."""
    def kind(t: Any) -> bool:
        return get_origin(t) is dict or (isinstance(t, type) and issubclass(t, BaseModel))
    return [f"{k}.{loc[-1]}" for k in keys_at(model, loc[:-1]) if str(loc[-1]) in keys_at(model, (*loc[:-1], k))
            and kind(_type_at(model, (*loc[:-1], k, loc[-1]))) == isinstance(value, dict)]


def not_a_file(path: Path, option: str, example: str) -> str | None:
    """Why `path` (given to `option`) is no file to read, None where it is one: a folder or a device was said as
    `no such file` (`-i inventory/`, `-i /dev/null`); a folder is answered with the file to name in it."""
    if path.is_file():
        return None
    why = (f"a folder: name the file in it, e.g. {option} {path / example}" if path.is_dir() else
           "not a regular file" if path.exists() else "no such file")
    return f"{option} {path}: {why}"


def load(path: Path, collect: bool = False) -> Document:
    """Parse a YAML file, rejecting duplicate keys, and record the line of every mapping key. `collect` (inv check):
    every duplicate key said in the Document's `duplicates`, the file read all the same."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x})") from None
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        doc = Document(path=path, data=None, duplicates=[] if collect else None)
        if node is None:
            return doc
        doc.lines[()] = node.start_mark.line + 1
        _walk(node, (), doc, set(), [0])
        return replace(doc, data=loader.construct_document(node))  # from the checked nodes: the text is parsed once
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{where}: invalid YAML: {problem}") from None
    finally:
        loader.dispose()


# libyaml's parser where PyYAML was built with it (the same nodes, marks and SafeConstructor; several times
# faster on a large inventory), else PyYAML's own.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TIMESTAMP, _STR = "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:str"
MAX_NODES = 100_000  # after aliases are expanded: a few hundred bytes of nested aliases can mean billions


def _walk(node: yaml.Node, loc: Loc, doc: Document, path: set[int], count: list[int]) -> None:
    """Record key lines; refuse duplicate and non-scalar keys, an alias inside itself, and alias bombs."""
    count[0] += 1
    if count[0] > MAX_NODES:
        raise InputError(f"{doc.path}:{node.start_mark.line + 1}: aliases expand to more than {MAX_NODES} "
                         "values; write the data out instead")
    if id(node) in path:
        raise InputError(f"{doc.path}:{node.start_mark.line + 1}: {'.'.join(map(str, loc)) or 'document'}: "
                         "an alias refers to the value that contains it")
    if not isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        if node.tag == _TIMESTAMP:  # no fleet field is a date: 2024-13-45 is text, not a crash in datetime()
            node.tag = _STR
        return
    path.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: set[object] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise InputError(f"{doc.path}:{key_node.start_mark.line + 1}: "
                                 f"{'.'.join(map(str, loc)) or 'document'}: a key must be a plain value, "
                                 "not a list or mapping")
            key = key_node.value
            if key in seen:
                first = doc.lines.get((*loc, key))
                dup = InputError(f"{doc.path}:{key_node.start_mark.line + 1}: "
                                 f"{'.'.join(map(str, (*loc, key)))}: duplicate key" + (
                                     f" (also at line {first}: YAML reads only this one, so the one at line {first} "
                                     "is not checked)" if first else ""))
                if doc.duplicates is None:
                    raise dup
                doc.duplicates.append(dup)
            seen.add(key)
            doc.lines[(*loc, key)] = key_node.start_mark.line + 1
            _walk(value_node, (*loc, key), doc, path, count)
    else:
        for i, item in enumerate(node.value):
            doc.lines[(*loc, i)] = item.start_mark.line + 1
            _walk(item, (*loc, i), doc, path, count)
    path.discard(id(node))
