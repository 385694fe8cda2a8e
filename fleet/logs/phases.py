"""Which startup phase an sglang log line says the server is in, so each phase gets its own budget.

The markers are data, playbooks/phases/startup.yaml: per phase a regex over the lines real releases print,
examples, and the sources of those lines (checked against the corpus like the log rules' sources).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fleet import yamlfile
from fleet.logs.rules import CorpusSource, ProjectSource, literals_in_examples, source_kinds

PHASES_FILE = Path(__file__).resolve().parents[2] / "playbooks" / "phases" / "startup.yaml"
ORDER = ("start", "weight_load", "jit_compile", "autotune", "graph_capture", "ready")


class Marker(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    regex: str
    examples: list[str] = Field(min_length=1)
    sources: list[CorpusSource | ProjectSource] = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in ORDER:
            raise ValueError(f"unknown phase {v!r} (known: {', '.join(ORDER)})")
        return v

    _sources = field_validator("sources", mode="before")(classmethod(lambda cls, v: source_kinds(v)))

    @model_validator(mode="after")
    def _consistent(self) -> Marker:
        pattern = re.compile(self.regex)
        for example in self.examples:
            if not pattern.search(example):
                raise ValueError(f"example {example!r} does not match the regex")
        literals_in_examples(self.sources, self.examples)
        return self


class PhasesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    phases: list[Marker]


def load(path: Path = PHASES_FILE) -> tuple[Marker, ...]:
    """The markers, most advanced phase first (the order lines are tested in)."""
    spec = yamlfile.load(path).parse(PhasesFile)
    return tuple(sorted(spec.phases, key=lambda m: -ORDER.index(m.name)))


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
