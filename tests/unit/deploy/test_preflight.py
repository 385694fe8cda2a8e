"""Deploy preflight from probe facts alone (pure): what makes any start fail on the host."""

from __future__ import annotations

from fleet.deploy.preflight import host_problems
from fleet.host.facts import DiskFree, Gpu, HostFacts


def sm120_host() -> HostFacts:
    gpus = [Gpu(index=i, name="NVIDIA RTX PRO 6000 Blackwell", uuid=None, compute_cap="12.0", sm=120)
            for i in range(8)]
    return HostFacts(host="h", address="a", gpus=gpus, arch_family="blackwell-consumer")


def test_a_torch_without_the_gpu_arch_and_a_full_disk_block_the_deploy():
    f = sm120_host()
    f.torch_cuda_archs = ["sm_80", "sm_90", "sm_100"]
    f.disk = {"venv": DiskFree(path="/root/ml-env", mount="/", avail_kib=512 * 1024)}
    problems = host_problems(f)
    assert any("torch was not built for SM 120" in p for p in problems)
    assert any("only 512 MiB free on / (venv)" in p for p in problems)


def test_a_fitting_torch_and_enough_disk_pass():
    f = sm120_host()
    f.torch_cuda_archs = ["sm_90", "sm_100", "sm_120"]
    f.disk = {"venv": DiskFree(path="/root/ml-env", mount="/", avail_kib=50 * 2**20)}
    assert host_problems(f) == []


def test_preflight_names_what_a_host_does_not_need_of_a_set():
    from fleet.deploy.preflight import not_needed_notes
    from fleet.patches import offline
    from fleet.patches import sets as patchsets

    sets = patchsets.load_sets(["sm120-allreduce-fusion"])
    plan = offline.check(sets, {"sglang": "0.5.23", "flashinfer-python": "0.7.4"}, 120, fetch=False)
    (note,) = not_needed_notes(plan.sets)
    assert note.startswith("patch set sm120-allreduce-fusion: part not needed: flashinfer-python 0.7.4: flashinfer "
                           "0.6.17 ships upstream's fix")
    plan = offline.check(sets, {"sglang": "0.5.23", "flashinfer-python": "0.7.4"}, 100, fetch=False)
    assert not_needed_notes(plan.sets) == ["patch set sm120-allreduce-fusion: not-applicable: SM100 is not in "
                                           "applies_to.sm [120, 121]"]
    plan = offline.check(sets, {"sglang": "0.5.9", "flashinfer-python": "0.6.3"}, 120, fetch=False)
    assert not_needed_notes(plan.sets) == []


def test_flags_the_host_sglang_lacks_say_when_they_went_and_what_replaces_them():
    from fleet.deploy.preflight import flag_problems
    from fleet.upstream import flags as sglang_cli

    table = sglang_cli.default_table()
    flags = {"tp-size": 8, "cuda-graph-max-bs": 256, "enable-flashinfer-allreduce-fusion": True}
    # the host's own --help is the judge; the table says why a flag is missing
    help_0523 = {f"--{f}" for f in table.flags if table.has(f, "0.5.23")}
    blocking, deprecated = flag_problems(flags, "0.5.23", help_0523, table)
    assert blocking == ["--cuda-graph-max-bs was removed in sglang 0.5.20 (deprecated since 0.5.14); "
                        "use --cuda-graph-max-bs-decode"]
    assert deprecated == ["--enable-flashinfer-allreduce-fusion is deprecated since sglang 0.5.14; "
                          "use --flashinfer-allreduce-fusion-backend=auto"]
    # no --help answer: the table alone judges; a flag no release has is named as such
    blocking, _ = flag_problems({"tp-size": 8, "no-such-flag": 1}, "0.5.9", None, table)
    assert blocking == ["--no-such-flag is in no sglang release from 0.5.8.post1 to 0.5.23"]
    # a locally built sglang whose --help lacks a flag the table expects: still blocked, in plain words
    blocking, _ = flag_problems({"tp-size": 8}, "0.5.9", {"--model-path"}, table)
    assert blocking == ["--tp-size is not in the installed sglang 0.5.9"]
    assert flag_problems(flags, "0.5.9", None, table) == ([], [])
