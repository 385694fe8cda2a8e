"""fleet.deploy.bench_record: a benchmark's record typed, written back exactly as the fleet has always stored it,
and a record a host sends in the wrong shape refused with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.deploy import bench
from fleet.deploy.bench_record import BenchRecord, BenchRecordError, stored
from fleet.deploy.noise import Runs

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def recorded() -> dict:
    """The gate's record of a real sandbox deploy (tests/fixtures/status/deploy-sbx0.json, rung no-fusion)."""
    deploy = json.loads((FIXTURES / "status/deploy-sbx0.json").read_text())
    return next(a["bench"] for a in deploy["attempts"] if a.get("bench"))


def test_a_recorded_gate_record_reads_and_writes_back_byte_for_byte():
    raw = recorded()
    record = BenchRecord.from_json(raw)
    assert record.verdict is not None and record.settings is not None and record.power and record.power.gpus
    assert json.dumps(record.to_json()) == json.dumps(raw)  # the same keys, in the same order


def test_a_tuned_and_stored_record_keeps_its_runs_release_and_rung_in_the_order_they_were_added():
    raw = {**recorded(), "runs": Runs((3521.0, 3553.0, 3611.0), 3300.0).to_json(), "release": "r9",
           "rung": "no-fusion"}
    record = BenchRecord.from_json(raw)
    assert (record.tok_s, record.spread, record.release) == (3553.0, 90.0, "r9")
    assert json.dumps(record.to_json()) == json.dumps(raw)


def test_what_bench_run_returns_is_what_inv_bench_stored_before_typing():
    result = bench.parse((FIXTURES / "bench/sglang-v0.5.9.txt").read_text())
    power = bench.parse_power((FIXTURES / "bench/nvidia-smi-samples.txt").read_text())
    record = BenchRecord(settings=BenchRecord.from_json(recorded()).settings, result=result, power=power,
                         command="x", at="2026-12-02T14:33:05+00:00", seconds=12.5)
    assert list(record.to_json()) == ["settings", "result", "power", "command", "at", "seconds"]
    assert list(record.to_json()["power"]["gpus"][0]) == ["index", "mean_w", "max_w", "limit_w", "mean_util"]
    assert BenchRecord.from_json(record.to_json()) == record


@pytest.mark.parametrize("hostile, says", [
    ("x", "bench: expected an object"), ({}, "result: expected an object"),
    ({"result": {"output_throughput": "fast"}}, "result.output_throughput: not a finite number"),
    ({"result": {"ok": "yes"}}, "result.ok"), ({"result": {}, "settings": {"playbook": "p"}}, "settings: no model"),
    ({"result": {}, "runs": {"tok_s": ["a"]}}, "bench.runs"), ({"result": {}, "power": {"gpus": [{}]}}, "power.gpus"),
    ({"result": {}, "verdict": {"ok": True}}, "verdict: no ok"), ({"result": {}, "seconds": float("nan")}, "seconds"),
])
def test_a_record_in_the_wrong_shape_is_refused_with_one_line(hostile, says):
    with pytest.raises(BenchRecordError) as caught:
        BenchRecord.from_json(hostile)
    assert says in str(caught.value) and "\n" not in str(caught.value)
    assert stored(hostile) is None
