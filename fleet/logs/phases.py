"""Which startup phase an sglang log line says the server is in, so each phase gets its own budget.

The markers are data, playbooks/phases/startup.yaml: per phase a regex over the lines real releases print,
examples, and the sources of those lines (checked against the corpus like the log rules' sources).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fleet import yamlfile
from fleet.logs.rules import CorpusSource, ProjectSource, literals_in_examples, source_kinds

PHASES_FILE = Path(__file__).resolve().parents[2] / "playbooks" / "phases" / "startup.yaml"
ORDER = ("start", "weight_load", "jit_compile", "autotune", "graph_capture", "ready")


class _Sourced(BaseModel):
    """A regex over the lines real releases print, its examples, and the sources of those lines."""

    model_config = ConfigDict(extra="forbid")

    name: str
    regex: str
    examples: list[str] = Field(min_length=1)
    sources: list[CorpusSource | ProjectSource] = Field(min_length=1)

    _sources = field_validator("sources", mode="before")(classmethod(lambda cls, v: source_kinds(v)))

    def _examples_match(self, pattern: re.Pattern[str]) -> None:
        for example in self.examples:
            if not pattern.search(example):
                raise ValueError(f"example {example!r} does not match the regex")
        literals_in_examples(self.sources, self.examples)


class Marker(_Sourced):
    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in ORDER:
            raise ValueError(f"unknown phase {v!r} (known: {', '.join(ORDER)})")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Marker:
        self._examples_match(re.compile(self.regex))
        return self


class Counter(_Sourced):
    """A count (done/total) a real release's lines carry: a regex whose two groups are done and total."""

    @model_validator(mode="after")
    def _consistent(self) -> Counter:
        pattern = re.compile(self.regex)
        if pattern.groups != 2:
            raise ValueError(f"count {self.name}: the regex needs two groups (done, total), it has {pattern.groups}")
        self._examples_match(pattern)
        return self


class PhasesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    phases: list[Marker]
    counts: list[Counter] = []


@dataclass(frozen=True)
class Count:
    """Where a counted step stands: `done` of `total` (ninja's steps, autotune's profiles, weight shards)."""

    name: str
    done: int
    total: int

    def __str__(self) -> str:
        return f"{self.name} {self.done}/{self.total}"


def load(path: Path = PHASES_FILE) -> tuple[Marker, ...]:
    """The markers, most advanced phase first (the order lines are tested in)."""
    spec = yamlfile.load(path).parse(PhasesFile)
    return tuple(sorted(spec.phases, key=lambda m: -ORDER.index(m.name)))


def load_counts(path: Path = PHASES_FILE) -> tuple[Counter, ...]:
    return tuple(yamlfile.load(path).parse(PhasesFile).counts)


@functools.cache
def _counters() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((c.name, re.compile(c.regex)) for c in load_counts())


def count_in(line: str, counters: tuple[tuple[str, re.Pattern[str]], ...] | None = None) -> Count | None:
    """The count a line carries, its last one (a tqdm bar redrawn with carriage returns is one journal line)."""
    for name, pattern in _counters() if counters is None else counters:
        found = list(pattern.finditer(line))
        if found:
            done, total = (int(g) for g in found[-1].groups())
            if 0 <= done <= total:
                return Count(name, done, total)
    return None


@functools.cache
def _compiled() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((m.name, re.compile(m.regex)) for m in load())


def advance(current: str, line: str) -> str:
    """The phase after this line: startup moves forward only (autotune lines during capture don't go back)."""
    new = phase_of(line)
    if new is None or ORDER.index(new) <= ORDER.index(current):
        return current
    return new


def phase_of(line: str) -> str | None:
    for name, pattern in _compiled():
        if pattern.search(line):
            return name
    return None
