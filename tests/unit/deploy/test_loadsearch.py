"""fleet.deploy.loadsearch: the highest request rate under an SLO, found on a queue whose p99 is known in closed
form, judged isotonically, and the per-request samples read from bench_serving's recorded --output-details."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from fleet.deploy import loadsearch, slo
from fleet.deploy.loadsearch import Point
from fleet.deploy.slo import Metric, Verdict

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bench"
SERVICE_S = 0.05  # mean service time of the queue
CAPACITY = 20.0  # requests per second


def queue_measure(seed: int, promise: slo.Slo, requests: int = 1000):
    """An M/M/1 queue's time in system at `rate`: exponential with mean s / (1 - rho); past capacity, hopeless."""
    rng = random.Random(seed)
    calls: list[float] = []

    def measure(rate: float) -> Verdict:
        calls.append(rate)
        rho = rate / CAPACITY
        mean = SERVICE_S / (1 - rho) if rho < 1 else 1e3
        ttft = [rng.expovariate(1 / mean) for _ in range(requests)]
        return slo.judge({Metric.TTFT: ttft}, promise, rng, resamples=200)
    return measure, calls


def boundary(limit_s: float) -> float:
    """The rate at which the queue's true p99 equals the limit."""
    return CAPACITY * (1 - SERVICE_S * math.log(100) / limit_s)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_search_lands_just_under_the_true_boundary_in_few_points(seed):
    promise = slo.parse("ttft_p99=1s")
    measure, calls = queue_measure(seed, promise)
    found = loadsearch.search(measure, start=1.0, ceiling=64.0, rel_tol=0.03)
    truth = boundary(1.0)  # 15.4 req/s
    assert found.highest is not None and 0.85 * truth <= found.highest <= truth * 1.01
    assert found.lowest_failing is not None and found.lowest_failing > found.highest
    assert found.lowest_failing / found.highest <= 1.03 or len(calls) == 12
    assert len(calls) <= 12 and [p.rate for p in found.points] == calls


def test_a_start_that_already_fails_halves_until_a_pass():
    promise = slo.parse("ttft_p99=1s")
    measure, calls = queue_measure(4, promise)
    found = loadsearch.search(measure, start=40.0, ceiling=64.0, rel_tol=0.05)
    assert calls[:2] == [40.0, 20.0] and found.highest is not None
    assert 0.85 * boundary(1.0) <= found.highest <= boundary(1.0) * 1.01


def test_nothing_is_kept_when_even_the_lowest_rate_fails():
    promise = slo.parse("ttft_p99=10ms")  # under the service time itself
    measure, calls = queue_measure(5, promise)
    found = loadsearch.search(measure, start=1.0, ceiling=64.0)
    assert found.highest is None and min(calls) == pytest.approx(1 / 64)


def test_a_lucky_pass_above_a_failure_does_not_count():
    ok, bad = Verdict(1000, (), True), Verdict(10, (), False)
    points = [Point(4.0, ok), Point(8.0, bad), Point(6.0, ok), Point(12.0, ok), Point(7.0, bad)]
    assert loadsearch.highest_kept(points) == 6.0


def test_samples_come_from_bench_servings_recorded_details():
    record = json.loads((FIXTURES / "bench_serving_details_sim.jsonl").read_text().splitlines()[-1])
    samples = loadsearch.samples_of(record)
    n = len(record["ttfts"])
    assert len(samples[Metric.TTFT]) == n == len(samples[Metric.E2E]) == len(samples[Metric.TPOT])
    # bench_serving's own means agree with the per-request samples read here
    assert sum(samples[Metric.TTFT]) / n * 1000 == pytest.approx(record["mean_ttft_ms"], rel=1e-6)
    assert sum(samples[Metric.E2E]) / n * 1000 == pytest.approx(record["mean_e2e_latency_ms"], rel=0.05)
    assert sum(samples[Metric.TPOT]) / n * 1000 == pytest.approx(record["mean_tpot_ms"], rel=0.05)


def test_a_failed_request_is_left_out_of_the_samples():
    record = {"ttfts": [0.1, 0.0, 0.2], "itls": [[0.01, 0.03], [], [0.02]], "errors": ["", "boom", ""],
              "output_lens": [5, 0, 3]}  # chunks of several tokens: TPOT is over the tokens, not the chunks
    samples = loadsearch.samples_of(record)
    assert samples[Metric.TTFT] == [0.1, 0.2] and samples[Metric.TPOT] == pytest.approx([0.01, 0.01])
    assert samples[Metric.E2E] == pytest.approx([0.14, 0.22])


def _point(requests: int, duration: float, e2e: float) -> dict:
    return {"ttfts": [e2e] * requests, "itls": [[]] * requests, "output_lens": [1] * requests, "duration": duration}


def test_a_rate_the_client_did_not_offer_says_nothing_about_it():
    """The sim test at 107.6 req/s 'kept' a server of 91 prompts/s capacity in a busy run: its client had sent
    slower than asked. 150 requests at 100 req/s with 0.1 s answers take about 1.6 s."""
    assert loadsearch.client_lag(_point(150, 1.6, 0.1), 100.0) is None
    lag = loadsearch.client_lag(_point(150, 4.0, 0.1), 100.0)  # sent over 3.9 s: at most 38 req/s
    assert lag is not None and "at most 38.2 req/s of the 100 asked" in lag


def test_what_cannot_be_told_is_not_called_lag():
    assert loadsearch.client_lag(_point(150, 4.0, 0.1), math.inf) is None  # --request-rate inf
    assert loadsearch.client_lag(_point(150, 4.0, 4.0), 100.0) is None  # every answer as long as the point
    assert loadsearch.client_lag({**_point(150, 4.0, 0.1), "duration": None}, 100.0) is None
    assert loadsearch.client_lag(_point(1, 4.0, 0.1), 100.0) is None


def test_the_recorded_point_was_offered_as_asked():
    record = json.loads((FIXTURES / "bench_serving_details_sim.jsonl").read_text().splitlines()[-1])
    assert loadsearch.client_lag(record, float(record["request_rate"])) is None
