"""How a canary is judged (a playbook's `canary:` section; fleet.deploy.judge, fleet.multihost.canary)."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from fleet import fields

NUMERICS_PROMPTS = ("The capital city of France is", "What is 2+2?", "Write one sentence about rivers.",
                    "List three prime numbers:", "Translate 'good morning' into French:")


class Canary(BaseModel):
    """How a canary is judged against its baseline on the same traffic (fleet.deploy.judge): per latency a rank
    test and the Hodges-Lehmann shift, at its location and in its tail; errors by their rate. A part fails only
    when the canary is shown worse by at least its effect that matters; it passes early when its interval rules
    that effect out, else the window extends by `window` seconds up to `max_window`, where a part not shown worse
    passes and one with too few requests leaves the verdict Inconclusive (it never promotes)."""

    model_config = ConfigDict(extra="forbid")

    min_effect: float = Field(default=0.05, gt=0, lt=1)  # the slowdown that matters
    confidence: float = Field(default=0.98, gt=0.5, lt=1)  # over the whole window, its looks together
    # an early pass: a part truly worse by its effect that matters passes before the cap at most this often
    pass_risk: float = Field(default=0.05, gt=0, lt=0.5)
    tail: float = Field(default=0.99, gt=0.5, lt=1)  # the quantile judged besides the location
    tail_min_effect: float = Field(default=0.05, gt=0, lt=1)  # the tail quantile's slowdown that matters
    max_error_increase: float = Field(default=0.02, gt=0, lt=1)  # error rate, canary minus baseline
    iqr_factor: float = Field(default=3.0, gt=0)  # Tukey's far-out fence (Kayenta's IQRDetector rule)
    length_bins: int = Field(default=5, ge=1, le=10)  # strata: prompt and output length, each in this many bins
    min_stratum: int = Field(default=10, ge=2)  # requests per side a stratum needs to be compared
    window: float = Field(default=120, gt=0)  # seconds of traffic before the first look, and between looks
    max_window: float = Field(default=600, gt=0)  # the cap: an unclear verdict there is Inconclusive
    rate: float = Field(default=10.0, gt=0, le=100)  # fleet's own load: requests a second on each host
    # the numerics gate before traffic (fleet.deploy.numerics): greedy answers of the new release and the old
    prompts: list[fields.Text] = Field(default_factory=lambda: list(NUMERICS_PROMPTS), min_length=1)
    answer_tokens: int = Field(default=32, ge=1, le=4096)  # max_new_tokens of each greedy answer
    match_tokens: int = Field(default=0, ge=0)  # 0: whole answers must match; N: their first N tokens
    max_mismatch: float = Field(default=0.0, ge=0, lt=1)  # the share of prompts allowed to part

    @property
    def looks(self) -> int:
        return max(1, math.ceil(self.max_window / self.window - 1e-9))
