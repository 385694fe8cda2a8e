"""fleet.deploy.results: what a deploy reports of the stack it ran, beside the release that was current before."""

from __future__ import annotations

from fleet.deploy.results import DeployResult


def test_a_deploy_says_what_changed_in_the_stack_since_the_release_before():
    r = DeployResult(host="h", versions={"sglang": "0.5.23", "flashinfer-python": "0.7.2", "driver": "580.95.05"},
                     versions_before={"sglang": "0.5.9", "flashinfer-python": "0.6.3", "driver": "580.95.05"})
    assert r.upgrade() == [("sglang", "0.5.9", "0.5.23"), ("flashinfer-python", "0.6.3", "0.7.2")]
    assert r.to_json()["versions_before"]["sglang"] == "0.5.9" and r.to_json()["versions"]["sglang"] == "0.5.23"


def test_a_first_deploy_or_one_refused_before_the_probe_compares_nothing():
    first = DeployResult(host="h", versions={"sglang": "0.5.9"})
    assert first.upgrade() == [] and first.to_json()["versions_before"] == {}
    assert "versions" not in DeployResult(host="h").to_json()
    gained = DeployResult(host="h", versions={"sglang": "0.5.9", "sgl-kernel": "0.3.21"},
                          versions_before={"sglang": "0.5.9"})
    assert gained.upgrade() == [("sgl-kernel", None, "0.3.21")]
