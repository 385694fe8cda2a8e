"""What `inv tune --slo` may try on one host: server flags and their values, per sglang release (pure).

From three data files and the host's facts: the default flags and values (playbooks/upstream/tune-space.yaml),
which release declares which flag (playbooks/upstream/sglang-flags.yaml: a deprecated flag is searched under its
named successor, a flag the release lacks is left out) and which values' kernels exclude an SM
(playbooks/upstream/backend-gates.yaml). A playbook's `tune:` section narrows the space (flag -> values); a value
gated away from the host's SM, or not among the release's argparse choices, is ruled out before any trial, with
the reason kept for the report.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from fleet import fields, yamlfile
from fleet.errors import InputError
from fleet.playbook import FlagValue
from fleet.site import SHIPPED
from fleet.upstream.flags import Table, default_table
from fleet.upstream.versions import in_range

SPACE_FILE = SHIPPED / "playbooks" / "upstream" / "tune-space.yaml"
GATES_FILE = SHIPPED / "playbooks" / "upstream" / "backend-gates.yaml"
_FLAG_IN = re.compile(r"--([a-z0-9][a-z0-9-]*)")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class DefaultSpace(_Strict):
    flags: dict[str, list[FlagValue]]


class BackendGate(_Strict):
    flag: str
    value: str
    dist: str  # the distribution whose release decides (sglang, flashinfer-python)
    releases: str  # version range of dist the gate is known for
    sm_majors: list[int]  # the SM majors that have the kernels
    file: str
    where: str | None = None
    text: str


class Gates(_Strict):
    gates: list[BackendGate]


@cache
def default_space(path: Path = SPACE_FILE) -> DefaultSpace:
    return yamlfile.load(path).parse(DefaultSpace)


@cache
def backend_gates(path: Path = GATES_FILE) -> tuple[BackendGate, ...]:
    return tuple(yamlfile.load(path).parse(Gates).gates)


@dataclass(frozen=True, slots=True)
class Dimension:
    flag: str  # as the host's release spells it
    values: tuple[FlagValue, ...]


@dataclass(frozen=True, slots=True)
class RuledOut:
    flag: str
    value: FlagValue | None  # None: the whole flag
    reason: str


@dataclass(frozen=True, slots=True)
class Space:
    dimensions: tuple[Dimension, ...]
    ruled_out: tuple[RuledOut, ...]

    def size(self) -> int:
        n = 1
        for d in self.dimensions:
            n *= len(d.values)
        return n


@dataclass(frozen=True, slots=True)
class Host:
    """What the search space needs of a host's facts."""

    sm: int  # e.g. 120
    gpus: int
    versions: Mapping[str, str]  # distribution -> installed version (sglang, flashinfer-python)


def spelled(flag: str, sglang: str, table: Table) -> tuple[str | None, str | None]:
    """(the flag as `sglang` takes it, why not): a deprecated flag becomes its successor where that is declared."""
    release = table.release_for(sglang)
    if release is None:
        return flag, None
    problem = table.problem(flag, sglang)
    span = table.flags.get(flag)
    if span is not None and span.deprecated and (problem or table.deprecated(flag, sglang)):
        successor = _FLAG_IN.search(span.deprecated.use)
        if successor is not None and table.has(successor.group(1), release):
            return successor.group(1), None
    return (None, problem) if problem else (flag, None)


def gated(flag: str, value: FlagValue, host: Host, gates: Sequence[BackendGate]) -> str | None:
    """Why `--flag value` cannot start on this host's SM (None: no known gate excludes it)."""
    for g in gates:
        version = host.versions.get(g.dist)
        if g.flag != flag or g.value != str(value) or version is None or not in_range(version, g.releases):
            continue
        if host.sm // 10 not in g.sm_majors:
            where = f"{g.file}" + (f" {g.where}" if g.where else "")
            majors = ", ".join(f"SM{m}x" for m in g.sm_majors)
            return f"--{flag} {value}: {g.dist} {version} has its kernels for {majors} only ({where})"
    return None


def build(host: Host, narrowed: Mapping[str, Sequence[FlagValue]] | None = None, *,
          table: Table | None = None, space: DefaultSpace | None = None,
          gates: Sequence[BackendGate] | None = None) -> Space:
    """The search space on `host`: the defaults (or the playbook's `tune:` flags, which replace them), each flag
    spelled for the host's sglang, values gated away from its SM and layouts that do not fit ruled out."""
    table = table or default_table()
    wanted = dict(narrowed) if narrowed else dict((space or default_space()).flags)
    gates = backend_gates() if gates is None else gates
    sglang = host.versions.get("sglang")
    dims: list[Dimension] = []
    out: list[RuledOut] = []
    for flag, values in wanted.items():
        if not values:
            raise InputError(f"playbook tune.{flag}: give at least one value")
        for v in values:
            if isinstance(v, str):
                try:
                    fields.text(v)
                except ValueError:
                    raise InputError(f"playbook tune.{flag}: {v!r} holds a newline or control character") from None
        name, why = spelled(flag, sglang, table) if sglang else (flag, None)
        if name is None:
            out.append(RuledOut(flag, None, why or "not declared"))
            continue
        kept = []
        for v in values:
            reason = gated(name, v, host, gates) or (table.value_problem(name, v, sglang) if sglang else None)
            if reason is None and name == "tp-size" and (not isinstance(v, int) or v < 1 or host.gpus % v):
                reason = f"--tp-size {v} does not divide the host's {host.gpus} GPUs"
            if reason:
                out.append(RuledOut(name, v, reason))
            else:
                kept.append(v)
        if kept:
            dims.append(Dimension(name, tuple(kept)))
    return Space(tuple(dims), tuple(out))
