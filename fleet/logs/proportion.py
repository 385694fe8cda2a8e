"""Wilson's score interval of a proportion: how far k successes in n trials may lie from the truth, at 95% by default
(bysite's held-out policy; the benches in bench/ and the tests that state a rate)."""

from __future__ import annotations

import math


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval of k successes in n trials (0 to 1 when n is 0: no evidence)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    mid, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (mid - half) / (1 + z * z / n), (mid + half) / (1 + z * z / n)
