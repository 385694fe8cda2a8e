"""fleet.deploy.trials: one flag at a time from the best configuration, a value that crashed never tried again,
the budget kept, and the winner written as a rung a playbook takes."""

from __future__ import annotations

import yaml

from fleet.deploy import trials
from fleet.deploy.searchspace import Dimension, Space
from fleet.deploy.trials import Outcome, Trial
from fleet.playbook import Playbook

SPACE = Space((Dimension("max-running-requests", (512, 1024)), Dimension("attention-backend", ("flashinfer", "fa3"))),
              ())
BASE = Trial.of({})


def run_search(surface: dict[tuple, Outcome], budget: int, defaults: dict | None = None) -> list[Trial]:
    """Climb against a table of outcomes keyed by the trial's flags."""
    results: dict[Trial, Outcome] = {}
    order = []
    while (t := trials.next_trial(SPACE, results, budget, defaults)) is not None:
        order.append(t)
        results[t] = surface[t.flags]
    return order


def test_the_climb_starts_at_the_base_moves_to_the_best_and_never_retries_a_crashed_value():
    mrr = (("max-running-requests", 1024),)
    surface = {
        (): Outcome(10.0),
        (("max-running-requests", 512),): Outcome(8.0),
        mrr: Outcome(14.0),
        (("attention-backend", "flashinfer"), ("max-running-requests", 1024)): Outcome(15.0),
        (("attention-backend", "fa3"), ("max-running-requests", 1024)): Outcome(None, crashed=True),
        (("attention-backend", "fa3"), ("max-running-requests", 512)): Outcome(None, crashed=True),
        (("attention-backend", "flashinfer"), ("max-running-requests", 512)): Outcome(9.0),
    }
    order = run_search(surface, budget=10)
    assert [t.flags for t in order] == [
        (), (("max-running-requests", 512),), mrr,
        (("attention-backend", "flashinfer"), ("max-running-requests", 1024)),
        (("attention-backend", "flashinfer"), ("max-running-requests", 512)),
        (("attention-backend", "fa3"), ("max-running-requests", 1024)),
    ]  # fa3 crashed once: (fa3, 512) is never started, and nothing is left around the best
    results = {t: surface[t.flags] for t in order}
    assert trials.best(results).flags == (("attention-backend", "flashinfer"), ("max-running-requests", 1024))
    assert trials.crashed_values(results, BASE) == {("attention-backend", "fa3")}


def test_the_budget_caps_the_starts_and_a_value_the_base_already_gives_is_not_a_new_trial():
    surface = {(): Outcome(10.0), (("max-running-requests", 512),): Outcome(8.0),
               (("attention-backend", "fa3"),): Outcome(None, crashed=True)}
    order = run_search(surface, budget=3, defaults={"max-running-requests": 1024, "attention-backend": "flashinfer"})
    assert [t.flags for t in order] == [(), (("max-running-requests", 512),), (("attention-backend", "fa3"),)]
    assert len(run_search(surface, budget=1)) == 1


def test_a_restart_is_needed_only_for_the_flags_that_change():
    a = Trial.of({"max-running-requests": 1024, "attention-backend": "triton"})
    b = Trial.of({"max-running-requests": 1024})
    assert a.differs_by(b) == {"attention-backend": "triton"} and a.differs_by(a) == {}


def test_the_winner_is_a_rung_the_playbook_accepts():
    winner = Trial.of({"max-running-requests": 1024, "chunked-prefill-size": 16384})
    text = trials.rung_yaml(winner, "ttft_p99=2s,tpot_p99=60ms", 12.34, "gpu-box-1")
    rung = yaml.safe_load(text)[0]
    book = Playbook.model_validate({"name": "t", "model": {"path": "/m"}, "ladder": [rung]})
    assert book.ladder[0].flags == {"chunked-prefill-size": 16384, "max-running-requests": 1024}
    assert book.ladder[0].name == "slo-chunked-prefill-size-16384-max-running-requests-1024"
    assert "12.3 req/s kept on gpu-box-1" in book.ladder[0].description
