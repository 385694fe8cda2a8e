"""Rolling deploys, the pure part: parse `--serial` and `--max-fail`, cut hosts into batches, decide
whether the rollout goes on. No I/O here; `fleet.multihost.rolling` runs the batches.

`--serial 1,2,25%` as Ansible users know it: batch sizes in order, the last one repeating; a percentage is
of the number of hosts, rounded down, at least 1. No `--serial`: one batch of every host.
`--max-fail N` or `P%`: the rollout stops once more than N hosts (P% of all, rounded down) failed; the
batch that crossed the line finishes, later batches are not started (their hosts are `skipped`).
A canary: `--serial 1,25%` sets its first batch apart (a first size followed by others, and more than one
batch); when a host of it fails, serves only by falling back to a later rung (whatever changed: versions or
playbook), or was `unchanged` (it deployed nothing), the rollout stops there whatever --max-fail allows, the
later batches `skipped` as a --max-fail stop leaves them (a change that did not pass its canary never reaches
the rest). `--serial 1` alone names no canary: every batch is alike, and
--max-fail alone decides; so does `1,1` (the last size repeats: a size written again at the end adds nothing).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from fleet.errors import InputError

T = TypeVar("T")

_AMOUNT = re.compile(r"\s*(\d+)\s*(%?)\s*")


@dataclass(frozen=True)
class Amount:
    """A count of hosts, or a percentage of all of them."""

    value: int
    percent: bool = False

    def of(self, total: int) -> int:
        return self.value * total // 100 if self.percent else self.value

    def __str__(self) -> str:
        return f"{self.value}{'%' if self.percent else ''}"


def _amount(text: str, flag: str, whole: str) -> Amount:
    m = _AMOUNT.fullmatch(text)
    if not m:
        raise InputError(f"{flag} {whole!r}: {text.strip()!r} is not a whole number or a percentage like 25%")
    value, percent = int(m.group(1)), bool(m.group(2))
    if percent and value > 100:
        raise InputError(f"{flag} {whole!r}: {value}% is more than 100%")
    return Amount(value, percent)


def parse_serial(text: str | None) -> list[Amount] | None:
    """`1,2,25%` -> [1, 2, 25%]; None or empty -> None (one batch of every host)."""
    if text is None or not str(text).strip():
        return None
    text = str(text)
    sizes = [_amount(part, "--serial", text) for part in text.split(",")]
    for size in sizes:
        if size.value == 0:
            raise InputError(f"--serial {text!r}: a batch size must be at least 1 (or 1%)")
    return sizes


def parse_max_fail(text: str | int | None) -> Amount:
    """`2` or `10%`; None -> 0 (the first failure stops the rollout)."""
    if text is None or not str(text).strip():
        return Amount(0)
    return _amount(str(text), "--max-fail", str(text))


def parse_timeout(text: str | float | None) -> float | None:
    if text is None or not str(text).strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"--host-timeout {text!r}: not a number of seconds") from None
    if not value > 0 or value != value or value == float("inf"):
        raise InputError(f"--host-timeout {text!r}: must be a positive number of seconds")
    return value


STARTUP_PHASES = ("start", "weight_load", "jit_compile", "autotune", "graph_capture", "ready")


def host_timeout_note(timeout: float | None, budgets: object) -> str | None:
    """What an operator needs before a rollout whose --host-timeout is shorter than a start's phase budgets: the
    progress lines count each phase against its own budget (`budget 1800s`), never against --host-timeout, which
    gives the host up mid-phase (issue 46, findings 5 and 8: which deadline wins was unsaid). None: it is not."""
    if timeout is None:
        return None
    phases = {name: float(getattr(budgets, name)) for name in STARTUP_PHASES}
    start = sum(phases.values())
    if timeout >= start:
        return None
    over = ", ".join(f"{name} {b:g}s" for name, b in phases.items() if b > timeout)
    return (f"--host-timeout {timeout:g}s wins over the playbook's budgets: a host still deploying then is given up "
            f"on mid-phase, whatever its phase's budget (a start may take {start:g}s"
            + (f"; longer than it alone: {over}" if over else "") + ")")


def batch_sizes(serial: Sequence[Amount] | None, total: int) -> list[int]:
    """How many hosts each batch takes; they add up to `total`."""
    if total <= 0:
        return []
    if not serial:
        return [total]
    sizes: list[int] = []
    left, i = total, 0
    while left > 0:
        size = min(left, max(1, serial[min(i, len(serial) - 1)].of(total)))
        sizes.append(size)
        left -= size
        i += 1
    return sizes


def batches(items: Sequence[T], serial: Sequence[Amount] | None) -> list[list[T]]:
    out, start = [], 0
    for size in batch_sizes(serial, len(items)):
        out.append(list(items[start:start + size]))
        start += size
    return out


def fail_limit(max_fail: Amount, total: int) -> int:
    """How many failed hosts the rollout tolerates; one more stops it."""
    return max_fail.of(total)


def should_stop(failed: int, max_fail: Amount, total: int) -> bool:
    return failed > fail_limit(max_fail, total)


def stop_reason(failed: int, max_fail: Amount, total: int) -> str:
    limit = fail_limit(max_fail, total)
    allowed = f"{max_fail} of {total} = {limit}" if max_fail.percent else str(limit)
    return f"{failed} host{'s' if failed != 1 else ''} failed, more than --max-fail {allowed}"



def is_canary(serial: Sequence[Amount] | None, batch_count: int) -> bool:
    """Whether the first batch is a canary: --serial gave it a size of its own (`1,25%`), and more batches follow.
    Sizes repeated at the end are one (`1,1` is `1`, `1,25%,25%` is `1,25%`): the last size repeats anyway."""
    sizes = list(serial or ())
    while len(sizes) > 1 and sizes[-1] == sizes[-2]:
        sizes.pop()
    return len(sizes) > 1 and batch_count > 1


def stop_after(batch: int, batch_count: int, canary: bool, bad: Sequence[str], failed: int, max_fail: Amount,
               total: int, fell_back: Sequence[str] = (), judged: Sequence[str] = (),
               not_back: Sequence[str] = ()) -> str | None:
    """Why the rollout stops after batch `batch` (1-based) whose hosts `bad` failed, `failed` hosts having failed
    in all, and `fell_back` ('h0 served on rung safe after ...', 'h0 unchanged (...)') served only on a later
    rung or deployed nothing (rolling.canary_misses), `judged` why the canary's judge did not pass it (--canary,
    fleet.multihost.canary), `not_back` the canary's hosts that were not put back after it; None when it goes on."""
    over = should_stop(failed, max_fail, total)
    fell = list(fell_back) if canary and batch == 1 else []
    if canary and batch == 1 and judged and not bad and not fell:
        return (f"the canary did not pass its judge after batch {batch} of {batch_count} (the canary: "
                f"{'; '.join(judged)}); " + (f"{', '.join(not_back)} not put back (see its line)" if not_back
                                             else "its hosts were put back") + _later(batch, batch_count))
    canary_down = canary and batch == 1 and bool(bad or fell)
    if not over and not canary_down:
        return None
    later = _later(batch, batch_count)
    reason = (stop_reason(failed, max_fail, total) if over else f"--max-fail {max_fail} does not excuse a canary"
              if bad else "a canary that fell back or deployed nothing is no change that passed")
    said = ([f"{', '.join(bad)} failed"] if bad else []) + fell
    where = f" (the canary: {'; '.join(said)})" if canary_down else ""
    return f"{reason} after batch {batch} of {batch_count}{where}{later}"


def _later(batch: int, batch_count: int) -> str:
    left = batch_count - batch
    return "" if left < 1 else f"; batch {batch + 1} not started" if left == 1 else \
        f"; batches {batch + 1}-{batch_count} not started"


@dataclass(frozen=True)
class DryRollout:
    """What `deploy --dry-run` says of the rollout the deploy would run on several hosts: its batches, and where the
    deploy would stop given what the dry run found (its failed hosts; a canary that would deploy nothing or serve
    only after refused rungs), by the rule the deploy stops by (stop_after)."""

    batches: list[list[str]]
    canary: bool
    stopped: str | None = None  # why it would stop, as the deploy's own summary words it
    not_started: tuple[str, ...] = ()  # the later batches' hosts, which the deploy would never start

    def to_json(self) -> dict[str, object]:
        return {"batches": self.batches, "canary": self.canary, "stopped": self.stopped,
                "not_started": list(self.not_started)}


def dry_rollout(names: Sequence[str], serial: Sequence[Amount] | None, max_fail: Amount, failed: Sequence[str],
                canary_misses: Sequence[str]) -> DryRollout:
    """`failed`: the hosts whose dry run failed (refused by preflight, not reached); `canary_misses`: why batch 1's
    hosts that would serve prove nothing ('h0 unchanged (...)'), as rolling.canary_misses words them."""
    groups = batches(list(names), serial)
    canary = is_canary(serial, len(groups))
    count = 0
    for i, group in enumerate(groups, 1):
        bad = [h for h in group if h in failed]
        count += len(bad)
        why = stop_after(i, len(groups), canary, bad, count, max_fail, len(names),
                         canary_misses if canary and i == 1 else ())
        if why:
            return DryRollout(groups, canary, why, tuple(h for g in groups[i:] for h in g))
    return DryRollout(groups, canary)
