"""The numerics gate before a canary gets traffic (pure): the new release's greedy answers to the playbook's
prompts against the old release's, token by token. An answer matches when the first `match_tokens` tokens agree
(0: the whole answer, its length included); the gate passes while at most `max_mismatch` of the prompts part.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    """One greedy answer: the prompt and the token ids the server gave (temperature 0)."""

    prompt: str
    token_ids: tuple[int, ...]

    @classmethod
    def from_json(cls, data: object) -> Answer | None:
        """A line of fleet/host/programs/canary_load.py's `answers`; None for a prompt it got no answer to
        (ValueError when the line is not one)."""
        if not isinstance(data, dict) or not isinstance(data.get("prompt"), str):
            raise ValueError("an answer is {prompt, output_ids}")
        ids = data.get("output_ids")
        if ids is None:
            return None
        if not isinstance(ids, list) or not all(type(i) is int for i in ids):
            raise ValueError("output_ids are token ids")
        return cls(data["prompt"], tuple(ids))


@dataclass(frozen=True)
class Parted:
    prompt: str
    at: int  # the first token where the answers part (the shorter one's length when one is a prefix)
    old_tokens: int
    new_tokens: int

    def line(self) -> str:
        return (f"{self.prompt[:40]!r}: the answers part at token {self.at} "
                f"(old {self.old_tokens} tokens, new {self.new_tokens})")


@dataclass(frozen=True)
class NumericsVerdict:
    ok: bool
    compared: int
    parted: tuple[Parted, ...]

    def reasons(self) -> list[str]:
        return [p.line() for p in self.parted]


def _parts_at(old: Sequence[int], new: Sequence[int]) -> int | None:
    """Where two answers part, None when they are the same."""
    for i, (a, b) in enumerate(zip(old, new, strict=False)):
        if a != b:
            return i
    return None if len(old) == len(new) else min(len(old), len(new))


def compare(old: Sequence[Answer], new: Sequence[Answer], match_tokens: int = 0,
            max_mismatch: float = 0.0) -> NumericsVerdict:
    """The new release's answers against the old one's, prompt by prompt; a prompt the new one did not answer
    parts at token 0."""
    answered = {a.prompt: a.token_ids for a in new}
    parted = []
    for a in old:
        mine = answered.get(a.prompt)
        at = 0 if mine is None else _parts_at(a.token_ids, mine)
        if at is not None and (match_tokens == 0 or at < match_tokens):
            parted.append(Parted(a.prompt, at, len(a.token_ids), len(mine or ())))
    ok = bool(old) and len(parted) <= max_mismatch * len(old)
    return NumericsVerdict(ok, len(old), tuple(parted))
