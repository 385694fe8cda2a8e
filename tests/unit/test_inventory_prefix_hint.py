"""A name that begins several hosts (issue 46, finding 6; h-new21's hour): `-H sbx` said `did you mean sbx3?`, one
of four hosts alike, picked by the order difflib happened to rank them; at 3 a.m. `-H pve-gpu` meant them all."""

from __future__ import annotations

import pytest

from fleet import inventory
from fleet.errors import InputError

HOSTS = "groups:\n  gpu-a: {}\n  gpu-b: {}\nhosts:\n" + "".join(
    f"  sbx{i}: {{address: 10.0.0.{i + 1}, groups: [gpu-a, gpu-b]}}\n" for i in range(4))


@pytest.fixture
def inv(tmp_path):
    (tmp_path / "hosts.yaml").write_text(HOSTS)
    return inventory.load(tmp_path / "hosts.yaml")


def test_a_name_that_begins_several_hosts_is_answered_with_the_glob(inv):
    with pytest.raises(InputError, match=r"^--host sbx: no such host in the inventory; did you mean --host 'sbx\*'\? "
                                         r"\(4 begin so: sbx0, sbx1, sbx2, sbx3\)$"):
        inv.select(names=["sbx"])


def test_a_group_name_that_begins_several_groups_is_answered_with_the_glob(inv):
    with pytest.raises(InputError, match=r"--group gpu: no such group; did you mean --group 'gpu\*'\? \(2 begin so"):
        inv.select(groups=["gpu"])


def test_a_name_one_letter_off_still_names_the_nearest(inv):
    with pytest.raises(InputError, match=r"--host sbx00: no such host in the inventory; did you mean sbx0\?$"):
        inv.select(names=["sbx00"])
