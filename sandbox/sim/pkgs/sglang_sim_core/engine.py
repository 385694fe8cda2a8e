"""Token generation and pacing of the simulated server.

Every request gets its tokens one by one at the modelled speed: with n requests running, each
advances at min(rate / saturation, rate / n) tok/s, so the server's aggregate output grows with
concurrency up to the modelled ceiling `rate` and a benchmark MEASURES it. The first token comes
after the prefill (prompt tokens at 5x the decode ceiling) plus its own decode step.
SGLANG_SIM_TOKEN_TIME_SCALE multiplies every delay; SGLANG_SIM_STREAM_SLICE_MS caps how often a
stream sends a chunk. Requests beyond --max-running-requests wait in a queue.
The profile's perf_model (sglang_sim_core.perfmodel.Shape) adds: prefills one at a time, a decode stall
while a large prefill chunk runs, eager (slower) steps above the captured graph batch, and each request's
own pace spread.

Text: a known-answer prompt ("2+2=" -> "4", the warm-up's "The capital city of France is" ->
" Paris") is answered correctly unless the kernels are broken, in which case every generation is
garbage (the empty-bodied lamport kernel returns whatever the buffer held, with no error).

A release can play a regression (`Regression`, README.md "A release that regresses"): every request
draws its quantile u; its delays are times exp(jitter * z(u)), and times 1 + slower where u is at or
above `percentile`; `differ` answers other prompts than the known ones otherwise after four tokens.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import NormalDist

from sglang_sim_core.perfmodel import Shape

KNOWN_ANSWERS: list[tuple[str, list[str]]] = [
    ("2+2=", ["4"]),
    ("2 + 2 =", [" 4"]),
    ("The capital city of France is", [" Paris", "."]),
    ("What is 2+2?", [" 2", "+", "2", " equals", " 4", "."]),
]

FILLER = [
    " " + w
    for w in (
        "The result follows from the numbers given , and the same reasoning applies to the next case"
        " as well . In practice the answer depends on the context of the question"
    ).split()
]

GARBAGE = [
    " Mehr", "ĠĠ", "@@", " ((", "ıldı", " sd", "<0x0A>", " ////", " enqu", " alta", "ß", " \u200b",
    " peri", " xmlns", "-$", " ancest", " ();", " Kaz", "ћ", " ^{", " pérd", " quad", "==", " utf",
]

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """The simulator's tokenizer: words and punctuation (bench_serving retokenizes with it too)."""
    return len(_TOKEN_RE.findall(text))


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def plan_tokens(prompt: str, max_new: int, ignore_eos: bool, garbage: bool,
                differ: bool = False) -> tuple[list[str], str]:
    """The tokens the model will produce and the finish reason ("length" or "stop"); `differ`: another
    release's numerics (the known answers alike, any other prompt's answer otherwise after 4 tokens)."""
    seed = _seed(prompt)
    if garbage:
        return [GARBAGE[(seed + 7 * i) % len(GARBAGE)] for i in range(max_new)], "length"
    answer: list[str] | None = None
    stripped = prompt.rstrip()
    for question, tokens in KNOWN_ANSWERS:
        if stripped.endswith(question):
            answer = tokens
            break
    if answer is None:
        natural = 8 + seed % 24
        answer = [FILLER[(seed + i + (differ and i >= 4)) % len(FILLER)] for i in range(natural)]
    if not ignore_eos and len(answer) <= max_new:
        return list(answer), "stop"
    tokens = list(answer[:max_new])
    i = 0
    while len(tokens) < max_new:
        tokens.append(FILLER[(seed + i) % len(FILLER)] if i % 12 else "\n")
        i += 1
    return tokens, "length"


def token_id(tok: str) -> int:
    return 10 + _seed(tok) % 151_000


@dataclass(frozen=True)
class Regression:
    """What a release plays against its predecessor (none by default)."""

    slower: float = 0.0  # a fraction: 0.10 = every delay of a slowed request 10% longer
    percentile: float = 0.0  # 0..1: requests whose quantile is at or above it are slowed (0: all)
    jitter: float = 0.0  # sigma of each request's log-normal delay factor (0: every request on the model)
    differ: bool = False  # answers differently (plan_tokens)

    def factor(self, u: float) -> float:
        """The delay factor of a request whose quantile is u (0 < u < 1)."""
        spread = math.exp(self.jitter * NormalDist().inv_cdf(u)) if self.jitter else 1.0
        return spread * (1 + self.slower if u >= self.percentile else 1.0)


@dataclass
class Result:
    text: str
    output_ids: list[int]
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    ttft: float
    latency: float
    rid: str = ""


@dataclass
class Stats:
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    requests_total: int = 0
    ttft: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)


class Engine:
    def __init__(
        self,
        *,
        rate: float,
        saturation: int,
        max_running_requests: int,
        token_time_scale: float,
        garbage: bool,
        max_total_tokens: int,
        stream_slice: float = 0.04,
        regression: Regression = Regression(),
        seed: int | None = None,
        shape: Shape | None = None,
    ) -> None:
        self.shape = shape or Shape()
        self.rate = max(rate, 0.01)
        self.per_request = self.rate / max(saturation, 1)
        # prompt tok/s: prefill runs ~5x the decode ceiling (the profile's chunk size moves it)
        self.prefill_rate = self.rate * 5.0 * self.shape.prefill_factor
        self._prefill_free_at = 0.0  # serial prefills: when the prefill engine is free again
        self._rng = random.Random()
        self.scale = token_time_scale
        self.garbage = garbage
        self.max_running_requests = max_running_requests
        self.max_total_tokens = max_total_tokens
        self.slice = stream_slice
        self.regression = regression
        self._draw = random.Random(seed)  # each request's quantile; no seed: this process's own
        self._slots = threading.BoundedSemaphore(max(max_running_requests, 1))
        self._lock = threading.Lock()
        self.running = 0
        self.queued = 0
        self.tokens_in_use = 0
        self.stats = Stats()
        self._recent: deque[tuple[float, int]] = deque()
        self._counter = 0

    # -- accounting -------------------------------------------------------------------------
    def _emitted(self, n: int) -> None:
        now = time.monotonic()
        with self._lock:
            self.stats.generation_tokens_total += n
            self._recent.append((now, n))
            while self._recent and self._recent[0][0] < now - 5.0:
                self._recent.popleft()

    def throughput(self, window: float = 2.0) -> float:
        """Output tokens per wall-clock second over the last `window` seconds."""
        now = time.monotonic()
        with self._lock:
            n = sum(c for t, c in self._recent if t >= now - window)
        return n / window

    def load_fraction(self) -> float:
        """How busy the GPUs are right now (0..1): running requests against the batch that saturates."""
        with self._lock:
            running = self.running
        return min(1.0, running / max(self.rate / self.per_request, 1.0))

    def _sleep(self, modelled_seconds: float) -> None:
        delay = modelled_seconds * self.scale
        if delay > 0:
            time.sleep(delay)

    # -- generation -------------------------------------------------------------------------
    def _prefill(self, prompt_tokens: int, scale: float) -> float:
        """When the prompt's prefill ends (monotonic time), at `scale` (the request's, a regression's included).
        Serial: after the prefills queued before it, as one prefill engine works through them (deadlines, not
        sleeps, so a busy machine's oversleeping never adds up)."""
        seconds = prompt_tokens / self.prefill_rate * scale
        now = time.monotonic()
        if not self.shape.serial_prefill:
            return now + seconds
        with self._lock:
            self._prefill_free_at = max(now, self._prefill_free_at) + seconds
            return self._prefill_free_at

    def _step(self, running: int) -> float:
        """Modelled seconds of one decode step of one request with `running` requests in the batch."""
        step = 1.0 / min(self.per_request, self.rate / running)
        shape = self.shape
        if shape.graph_bs is not None and running > shape.graph_bs:
            step /= shape.eager_factor
        if shape.decode_stall != 1.0 and self._prefill_free_at > time.monotonic():  # a prefill chunk is running
            step *= shape.decode_stall
        return step

    def generate(
        self,
        prompt: str,
        prompt_tokens: int,
        max_new_tokens: int,
        ignore_eos: bool,
        on_token: Callable[[str, int], None] | None = None,
    ) -> Result:
        """Generate at the modelled pace (scaled by SGLANG_SIM_TOKEN_TIME_SCALE)."""
        start = time.monotonic()
        max_new_tokens = max(0, int(max_new_tokens))
        tokens, finish = plan_tokens(prompt, max_new_tokens, ignore_eos, self.garbage, self.regression.differ)
        with self._lock:
            self.queued += 1
            self._counter += 1
            rid = f"{self._counter:032x}"
            u = min(max(self._draw.random(), 1e-9), 1 - 1e-9)
        scale = self.scale * self.regression.factor(u)
        self._slots.acquire()
        with self._lock:
            self.queued -= 1
            self.running += 1
            self.tokens_in_use += prompt_tokens + len(tokens)
            self.stats.prompt_tokens_total += prompt_tokens
        try:
            # deadline-based pacing: oversleeping in one step is made up in the next
            due = self._prefill(prompt_tokens, scale)
            with self._lock:
                pace = math.exp(self._rng.gauss(0.0, self.shape.request_sigma)) if self.shape.request_sigma else 1.0
            out_ids: list[int] = []
            text = ""
            last = start
            ttft = 0.0
            emitted = 0
            for i, tok in enumerate(tokens):
                # every token costs one decode step at the current per-request speed (the first one
                # comes out of the prefill's step); a stream wakes at most every `slice` seconds of
                # wall time and sends the tokens due meanwhile together (keeps a Python server able
                # to deliver thousands of tok/s; throughput and TPOT are unaffected, ITL is coarser)
                due += scale * pace * self._step(max(self.running, 1))
                text += tok
                out_ids.append(token_id(tok))
                if 0 < i < len(tokens) - 1 and due - last < self.slice:
                    continue
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                self._emitted(len(out_ids) - emitted)
                emitted = len(out_ids)
                now = time.monotonic()
                if i == 0:
                    ttft = now - start
                else:
                    with self._lock:
                        self.stats.itl.append(now - last)
                last = now
                if on_token is not None:
                    on_token(text, len(out_ids))
            latency = time.monotonic() - start
            if not tokens:
                ttft = latency
            with self._lock:
                self.stats.requests_total += 1
                self.stats.ttft.append(ttft)
                self.stats.e2e.append(latency)
                for series in (self.stats.ttft, self.stats.e2e, self.stats.itl):
                    del series[:-4096]
            return Result(text, out_ids, prompt_tokens, len(out_ids), finish, ttft, latency, rid)
        finally:
            with self._lock:
                self.running -= 1
                self.tokens_in_use -= prompt_tokens + len(tokens)
            self._slots.release()
