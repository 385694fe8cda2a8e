"""The values sglang takes for a flag beyond its argparse type (playbooks/upstream/sglang-ranges.yaml): a range its
help documents or a check at start enforces, read from the real wheels, and every `*-port` a TCP port. Pure."""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from fleet import yamlfile
from fleet.upstream.versions import version_key

RANGES = Path(__file__).resolve().parents[2] / "playbooks" / "upstream" / "sglang-ranges.yaml"


class Bounds(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    above: float | None = None  # more than this
    least: float | None = None  # this or more
    most: float | None = None  # this or less
    what: str  # what the value is, in a few words

    def outside(self, value: float) -> bool:
        return ((self.above is not None and value <= self.above) or (self.least is not None and value < self.least)
                or (self.most is not None and value > self.most))

    def words(self) -> str:
        low = (f"more than {self.above:g}" if self.above is not None
               else f"at least {self.least:g}" if self.least is not None else "")
        high = f"at most {self.most:g}" if self.most is not None else ""
        return " and ".join(w for w in (low, high) if w)


class Range(Bounds):
    how: str  # "documents" (its help says so) or "enforces" (a check stops the server at start)
    says: str  # the source's own words
    releases: list[str]  # [first, last] corpus releases that say them
    in_: dict[str, str] = Field(alias="in")  # from which release on, which file of the wheel says them

    def holds_on(self, release: str) -> bool:
        first, last = self.releases
        return version_key(first) <= version_key(release) <= version_key(last)

    def source(self, release: str) -> str:
        """The file of `release`'s wheel that says it."""
        key = version_key(release)
        return [path for since, path in sorted(self.in_.items(), key=lambda kv: version_key(kv[0]))
                if version_key(since) <= key][-1]


class Ranges(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    ranges: dict[str, Range]
    ports: Bounds

    def problem(self, flag: str, value: object, release: str, kind: str | None) -> str | None:
        """Why sglang `release` (a corpus release) would not take `--flag value` though its type does: out of the
        range it documents or enforces, or a port no socket takes (None: in range, not a number, or not ranged).
        `kind`: the flag's argparse type in the table ("int", "float" or None)."""
        number = _number(value)
        if number is None:
            return None  # not a number: the type check says it
        ranged = self.ranges.get(flag)
        if ranged is not None and ranged.holds_on(release):
            if not ranged.outside(number):
                return None
            why = (f"sglang {release}'s help: {ranged.says!r}" if ranged.how == "documents"
                   else f"sglang {release} stops at start: {ranged.says!r}, {ranged.source(release)}")
            return f"--{flag} {value!r} is out of range: {ranged.what}, {ranged.words()} ({why})"
        if ranged is None and kind == "int" and flag.endswith("-port") and self.ports.outside(number):
            return (f"--{flag} {value!r} is out of range: {self.ports.what}, {self.ports.words()} (no socket takes "
                    "another: sglang stops where it binds it)")
        return None


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None


@functools.cache
def default_ranges() -> Ranges:
    return load(RANGES)


def load(path: Path = RANGES) -> Ranges:
    return yamlfile.load(path).parse(Ranges)
