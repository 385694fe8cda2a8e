"""fleet.upstream.lockfile: the lock beside a playbook, written by a pin set's first resolve, then holding the
wheelhouse to it: a wheel rebuilt under the same name and version is refused in one line naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_resolver import HOST, wheel

from fleet.upstream import lockfile
from fleet.upstream.lockfile import LockError
from fleet.upstream.wheelhouse import Target

PINS = {"sglang": "0.5.9", "flashinfer-python": "0.6.3"}


@pytest.fixture
def house(tmp_path: Path) -> Path:
    folder = tmp_path / "house"
    folder.mkdir()
    wheel(folder, "sglang", "0.5.9", "flashinfer_python==0.6.3", "torch==2.9.1")
    wheel(folder, "flashinfer-python", "0.6.3", "torch")
    wheel(folder, "torch", "2.9.1")
    wheel(folder, "torch", "2.14.1")
    return folder


def test_the_first_resolve_writes_the_lock_and_the_next_reads_it(house, tmp_path):
    lock = lockfile.path_for(tmp_path / "llama.yaml")
    assert lock == tmp_path / "llama.lock"
    first = lockfile.ensure(lock, PINS, HOST, house)
    text = lock.read_text()
    assert text.startswith("# fleet's lock") and "inv check --lock --playbook NAME" in text
    (entry,) = lockfile.load(lock)
    assert entry.pins == (("flashinfer-python", "0.6.3"), ("sglang", "0.5.9")) and entry.target == HOST
    assert [(w.name, w.version, w.file) for w in entry.wheels] == [
        ("flashinfer-python", "0.6.3", "flashinfer_python-0.6.3-py3-none-any.whl"),
        ("sglang", "0.5.9", "sglang-0.5.9-py3-none-any.whl"), ("torch", "2.9.1", "torch-2.9.1-py3-none-any.whl")]
    assert [w.sha256 for w in entry.wheels] == [w.sha256 for w in first]
    wheel(house, "torch", "2.9.1+cu130")  # a newer build pip would now prefer: the lock still says which
    assert [w.filename for w in lockfile.ensure(lock, PINS, HOST, house)] == [w.filename for w in first]
    assert lock.read_text() == text
    lockfile.ensure(lock, PINS, Target("3.12"), house)  # another kind of host: its own entry
    assert len(lockfile.load(lock)) == 2


def test_a_wheel_rebuilt_under_the_same_name_and_version_is_refused_in_one_line(house, tmp_path):
    lock = tmp_path / "llama.lock"
    lockfile.ensure(lock, PINS, HOST, house)
    torch = house / "torch-2.9.1-py3-none-any.whl"
    torch.unlink()
    wheel(house, "torch", "2.9.1", "evil==1.0")  # same file name, other bytes
    with pytest.raises(LockError) as caught:
        lockfile.ensure(lock, PINS, HOST, house)
    text = str(caught.value)
    assert "\n" not in text and text.startswith(f"{torch}: sha256 ")
    assert f"locked in {lock}: refused, nothing was sent" in text and "inv check --lock --playbook llama" in text
    torch.unlink()
    with pytest.raises(LockError, match="locked in .* but not in the wheelhouse"):
        lockfile.ensure(lock, PINS, HOST, house)


def test_relock_on_purpose_takes_the_new_bytes_and_keeps_other_pin_sets(house, tmp_path):
    lock = tmp_path / "llama.lock"
    lockfile.ensure(lock, {"torch": "2.14.1"}, HOST, house)
    lockfile.ensure(lock, PINS, HOST, house)
    (house / "torch-2.9.1-py3-none-any.whl").unlink()
    wheel(house, "torch", "2.9.1", 'numpy; extra == "x"')  # rebuilt on purpose
    (fresh,) = lockfile.relock(lock, PINS, [], house)  # the kinds of host the lock knows
    assert fresh.target == HOST
    assert lockfile.ensure(lock, PINS, HOST, house)  # accepted now
    assert {e.pins for e in lockfile.load(lock)} == {(("torch", "2.14.1"),), lockfile.key(PINS)}


def test_a_lock_of_other_pins_is_stale_and_a_broken_lock_is_named(house, tmp_path):
    lock = tmp_path / "llama.lock"
    assert lockfile.stale(lock, PINS) is None  # no lock yet: the first deploy writes it
    lockfile.ensure(lock, PINS, HOST, house)
    assert lockfile.stale(lock, {"sglang": "0.5.9", "flashinfer_python": "0.6.3"}) is None
    assert lockfile.stale(lock, {"sglang": "0.5.23"}) == (
        f"{lock} locks other pins than packages: (the first deploy of these locks them; on purpose now: "
        "inv check --lock --playbook llama)")
    lock.write_text("locked: [{pins: 3}]\n")
    with pytest.raises(LockError, match=r"llama.lock: is not a lock fleet wrote \(AttributeError\)"):
        lockfile.load(lock)
