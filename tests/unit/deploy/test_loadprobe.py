"""fleet.deploy.loadprobe: the open-loop bench_serving line for one load point, and its details read back from the
benchmark script's output (a recorded bench_serving --output-details line between the script's markers)."""

from __future__ import annotations

import shlex
from pathlib import Path

from fleet.deploy import loadprobe, loadsearch
from fleet.deploy.slo import Metric
from fleet.host import benchrun
from fleet.playbook import Bench, Playbook

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bench"
BOOK = Playbook.model_validate({"name": "t", "model": {"path": "/models/GLM-5-NVFP4", "served_name": "glm-5"},
                                "ladder": [{"name": "base"}]})


def test_a_load_point_offers_a_poisson_rate_with_no_concurrency_cap_and_keeps_the_details():
    argv = shlex.split(loadprobe.command("/root/ml-env", BOOK, Bench(), 12.5, 1000))  # run as the owner by benchrun
    assert argv[:3] == ["/root/ml-env/bin/python", "-m", "sglang.bench_serving"]
    opts = dict(zip(argv[3:], argv[4:], strict=False))  # each option -> the word after it
    assert opts["--request-rate"] == "12.5" and opts["--num-prompts"] == "1000" and opts["--max-concurrency"] == "1000"
    assert opts["--output-file"] == benchrun.DETAILS and "--output-details" in argv
    assert opts["--tokenizer"] == "/models/GLM-5-NVFP4" and opts["--model"] == "glm-5"


def test_the_details_come_back_after_their_marker_and_give_every_request():
    line = (FIXTURES / "bench_serving_details_sim.jsonl").read_text().splitlines()[-1]
    script_out = "\n".join([f"{benchrun.MARK} rc=0", f"{benchrun.MARK} out", "... result block ...",
                            f"{benchrun.MARK} err", f"{benchrun.MARK} smi", "@@ 1.0", "0, 30.1, 600.00, 0",
                            f"{benchrun.MARK} details", line])
    record = loadprobe.details_of(script_out)
    assert record is not None and record["request_rate"] > 0
    assert len(loadsearch.samples_of(record)[Metric.TTFT]) == len(record["ttfts"]) > 0


def test_no_details_marker_or_a_torn_line_is_none():
    assert loadprobe.details_of(f"{benchrun.MARK} rc=0\n{benchrun.MARK} out\n") is None
    assert loadprobe.details_of(f"{benchrun.MARK} details\n{{\"ttfts\": [0.1\n") is None
    assert loadprobe.details_of(f"{benchrun.MARK} details\n") is None
