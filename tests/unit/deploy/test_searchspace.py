"""fleet.deploy.searchspace: the flags `inv tune --slo` searches per release, narrowed by a playbook, with the
values whose kernels exclude the host's SM ruled out before any trial (the shipped data files as they are)."""

from __future__ import annotations

import pytest

from fleet.deploy import searchspace
from fleet.deploy.searchspace import Host
from fleet.errors import InputError
from fleet.playbook import Playbook

SEED = Host(sm=120, gpus=8, versions={"sglang": "0.5.9", "flashinfer-python": "0.6.3"})  # the seed's box
NEWER = Host(sm=120, gpus=8, versions={"sglang": "0.5.23", "flashinfer-python": "0.7.2"})
HOPPER = Host(sm=90, gpus=8, versions={"sglang": "0.5.9", "flashinfer-python": "0.6.3"})


def values(space: searchspace.Space) -> dict[str, tuple]:
    return {d.flag: d.values for d in space.dimensions}


def ruled(space: searchspace.Space) -> dict[tuple[str, object], str]:
    return {(r.flag, r.value): r.reason for r in space.ruled_out}


def test_on_the_seeds_box_the_backends_without_sm120_kernels_are_ruled_out_before_a_trial():
    space = searchspace.build(SEED)
    got = values(space)
    assert got["attention-backend"] == ("flashinfer", "triton")
    assert got["moe-runner-backend"] == ("flashinfer_cutlass", "triton")
    out = ruled(space)
    assert "attention_registry.py create_flashattention_v3_backend" in out[("attention-backend", "fa3")]
    assert "SM8x, SM9x only" in out[("attention-backend", "fa3")]
    assert out[("attention-backend", "trtllm_mha")].startswith("--attention-backend trtllm_mha: sglang 0.5.9")
    assert "flashinfer-python 0.6.3" in out[("moe-runner-backend", "flashinfer_trtllm")]
    assert got["cuda-graph-max-bs"] == (256, 512, 1024) and got["tp-size"] == (8, 4, 2)
    assert space.size() == 4 * 3 * 3 * 3 * 3 * 2 * 2 * 2 * 3


def test_a_newer_release_spells_the_flags_its_way_and_its_flashinfer_has_the_sm120_moe_kernels():
    got = values(searchspace.build(NEWER))
    assert "cuda-graph-max-bs" not in got and got["cuda-graph-max-bs-decode"] == (256, 512, 1024)
    assert got["moe-runner-backend"] == ("flashinfer_cutlass", "triton", "flashinfer_trtllm")  # 0.7.2: [10, 12]
    assert "fa3" not in got["attention-backend"]  # the assertion holds in every release of the corpus


def test_hopper_keeps_fa3_and_loses_the_blackwell_only_ones():
    space = searchspace.build(HOPPER)
    got = values(space)
    assert "fa3" in got["attention-backend"] and "trtllm_mha" not in got["attention-backend"]
    assert ("moe-runner-backend", "flashinfer_trtllm") in ruled(space)


def test_a_playbook_section_narrows_the_space_and_layouts_must_divide_the_gpus():
    book = Playbook.model_validate({
        "name": "t", "model": {"path": "/models/m"}, "ladder": [{"name": "base"}],
        "tune": {"max-running-requests": [512, 1024], "tp-size": [8, 3], "attention-backend": ["fa3"]}})
    space = searchspace.build(SEED, book.tune)
    assert values(space) == {"max-running-requests": (512, 1024), "tp-size": (8,)}
    out = ruled(space)
    assert out[("tp-size", 3)] == "--tp-size 3 does not divide the host's 8 GPUs"
    assert ("attention-backend", "fa3") in out


def test_a_flag_the_release_lacks_is_left_out_with_upstreams_reason():
    space = searchspace.build(SEED, {"cuda-graph-max-bs-decode": [256]})
    assert space.dimensions == ()
    assert ruled(space)[("cuda-graph-max-bs-decode", None)] == "--cuda-graph-max-bs-decode needs sglang >= 0.5.14 " \
                                                                 "(host has 0.5.9)"


def test_a_value_the_releases_argparse_refuses_is_ruled_out_with_its_nearest_choice():
    space = searchspace.build(SEED, {"schedule-policy": ["fcfs", "lfu"], "attention-backend": ["flashinfr"]})
    assert values(space) == {"schedule-policy": ("fcfs",)}
    out = ruled(space)
    assert out[("schedule-policy", "lfu")].startswith("--schedule-policy 'lfu' is not one of sglang 0.5.9's choices")
    assert out[("attention-backend", "flashinfr")].endswith("did you mean flashinfer?")


@pytest.mark.parametrize("tune, says", [
    ({"max-running-requests": []}, "playbook tune.max-running-requests: give at least one value"),
    ({"schedule-policy": ["fcfs\nExecStart=/bin/sh"]}, "playbook tune.schedule-policy: 'fcfs\\nExecStart=/bin/sh'"),
])
def test_bad_values_in_the_section_are_one_line_naming_it(tune, says):
    with pytest.raises(InputError) as err:
        searchspace.build(SEED, tune)
    assert str(err.value).startswith(says) and "\n" not in str(err.value)


def test_the_playbook_refuses_a_tune_flag_fleet_sets_itself():
    with pytest.raises(ValueError, match="--port is set by fleet"):
        Playbook.model_validate({"name": "t", "model": {"path": "/m"}, "ladder": [{"name": "b"}],
                                 "tune": {"port": [1, 2]}})
