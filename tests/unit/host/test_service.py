"""Who holds the GPUs (fleet.host.service.parse_holders) and which of them are the unit's own: pure, no host."""

from __future__ import annotations

import subprocess

from fleet.deploy.preflight import foreign_gpu_problem
from fleet.host.facts import Gpu, HostFacts
from fleet.host.service import HOLDERS, parse_holders

# HOLDERS' output on a host serving sglang on GPUs 0-1 while another team trains on GPU 3 (cgroup v1 + v2 lines),
# and a process in another PID namespace (a container): nvidia-smi lists it, /proc does not have it.
OUTPUT = (
    "252, 00000000:01:00.0, 85239, sglang::scheduler_TP0\n"
    "253, 00000000:02:00.0, 85239, sglang::scheduler_TP1\n"
    "4242, 00000000:04:00.0, 20480, python\n"
    "777, 00000000:05:00.0, 1000, [Not Found]\n"
    "@@\n"
    "P 252\troot\t/system.slice/sglang.service /system.slice/sglang.service \t/root/ml-env/bin/python -m sglang\n"
    "P 253\troot\t/system.slice/sglang.service/payload \t/root/ml-env/bin/python -m sglang\n"
    "P 4242\tbob\t/user.slice/user-1001.slice/session-4.scope \tpython train.py --epochs 90\n"
)
FACTS = HostFacts(host="h", address="10.0.0.1", gpus=[
    Gpu(index=i, pci_bus_id=f"00000000:0{i + 1}:00.0") for i in range(8)])


def test_holders_carry_user_command_and_cgroup_and_only_the_unit_s_own_are_its():
    apps = {a.pid: a for a in parse_holders(OUTPUT)}
    assert sorted(apps) == [252, 253, 777, 4242]
    assert apps[252].of_unit("sglang") and apps[253].of_unit("sglang")
    assert not apps[4242].of_unit("sglang") and not apps[777].of_unit("sglang")
    assert not apps[252].of_unit("sglang-b") and not apps[252].of_unit("glang")  # whole names only
    assert apps[4242].describe() == "pid 4242 (python train.py --epochs 90) of user bob, 20480 MiB"
    assert apps[777].user is None and apps[777].describe().startswith("pid 777 ([Not Found]) of user ?")


def test_preflight_names_each_foreign_holder_of_a_gpu_the_playbook_uses():
    why = foreign_gpu_problem(parse_holders(OUTPUT), "sglang", FACTS, {})
    assert why is not None and why.startswith("a GPU this playbook uses is held by a process that is not the unit's")
    assert "GPU 3: pid 4242 (python train.py --epochs 90) of user bob, 20480 MiB" in why
    assert "GPU 4: pid 777" in why and "252" not in why
    # GPUs 0-2 only: the job on GPU 3 and the one on GPU 4 are someone else's business
    assert foreign_gpu_problem(parse_holders(OUTPUT), "sglang", FACTS, {"CUDA_VISIBLE_DEVICES": "0,1,2"}) is None
    assert "GPU 3" in foreign_gpu_problem(parse_holders(OUTPUT), "sglang", FACTS, {"CUDA_VISIBLE_DEVICES": "3"})
    ours = "".join(line + "\n" for line in OUTPUT.splitlines() if "4242" not in line and not line.startswith("777"))
    assert foreign_gpu_problem(parse_holders(ours), "sglang", FACTS, {}) is None


def test_garbage_from_the_host_is_no_holder():
    assert parse_holders("") == []
    assert parse_holders("No running processes found\n@@\n") == []
    assert [a.pid for a in parse_holders("x, y, z, w\n12, , , \n@@\nP 12\tonly two\n")] == [12]


def test_the_holders_command_parses_under_posix_sh():
    assert subprocess.run(["sh", "-n", "-c", HOLDERS]).returncode == 0


def test_only_drop_ins_of_the_unit_itself_override_it_and_what_a_host_sends_is_bounded():
    from fleet.host.service import overriding, shown

    said = ("/etc/systemd/system/sglang.service.d/a.conf /run/systemd/system/sglang.service.d/b.conf "
            "/etc/systemd/system.control/sglang.service.d/50-CPUQuota.conf /usr/lib/systemd/system/service.d/x.conf "
            "relative/c.conf /etc/systemd/system/sglang.service.d/\x1b[31mred.conf")
    assert overriding(said) == ["/etc/systemd/system/sglang.service.d/a.conf",
                                "/run/systemd/system/sglang.service.d/b.conf",
                                "/etc/systemd/system.control/sglang.service.d/50-CPUQuota.conf",
                                "relative/c.conf",  # garbage counts: what a host sends is never taken as nothing
                                "/etc/systemd/system/sglang.service.d/\x1b[31mred.conf"]
    assert shown(overriding(said)).endswith("/etc/systemd/system/sglang.service.d/?[31mred.conf")
    assert overriding("") == [] and shown(overriding("/a.d/x " * 500)).endswith(", and 490 more")
    assert len(shown(["/" + "x" * 5000])) == 200


def test_a_drop_in_with_a_space_in_its_name_or_for_every_service_overrides_the_unit_too():
    """systemd quotes a path with a space (`systemctl show -p DropInPaths`, as read from systemd 252): it was split
    on the space and both halves dropped (neither begins with /), so `by hand.conf` was no drop-in at all: status
    clean, the deploy not refused, the owner rule blind to it. An admin's /etc/systemd/system/service.d/ applies to
    sglang as much as its own NAME.service.d/ does; the distribution's /usr/lib one alone is not fleet's concern."""
    from fleet.host.service import drop_in_files, overriding

    said = ('/etc/systemd/system/sglang-.service.d/c.conf "/etc/systemd/system/sglang.service.d/by hand.conf" '
            '/etc/systemd/system/service.d/pp.conf /usr/lib/systemd/system/service.d/10-timeout-abort.conf')
    assert overriding(said) == ["/etc/systemd/system/sglang-.service.d/c.conf",
                                "/etc/systemd/system/sglang.service.d/by hand.conf",  # before: missing
                                "/etc/systemd/system/service.d/pp.conf"]  # before: missing
    assert drop_in_files(said)[-1] == "/usr/lib/systemd/system/service.d/10-timeout-abort.conf"
    assert overriding('/etc/a.d/"unbalanced x') == ['/etc/a.d/"unbalanced', "x"]  # garbage kept, not dropped
