"""fleet.upstream.lockfile: the lock beside a playbook, written by a pin set's first resolve, then holding the
wheelhouse to it: a wheel rebuilt under the same name and version is refused in one line naming it."""

from __future__ import annotations

import shutil
import stat
import zipfile
from pathlib import Path

import pytest
from test_resolver import HOST, wheel
from test_wheelhouse_fetch import index

from fleet.progress import Live
from fleet.upstream import lockfile, wheelhouse
from fleet.upstream.lockfile import LockError
from fleet.upstream.wheelhouse import Target, WheelhouseError

PINS = {"sglang": "0.5.9", "flashinfer-python": "0.6.3"}


def lines_of(said: list[str]):
    """A Progress keeping the lines said, not where a download stands now (a Live line each second it goes on)."""
    return lambda message: None if isinstance(message, Live) else said.append(message)


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


def test_an_entry_is_the_hosts_full_python_version_and_one_that_states_none_stands_for_every_one(house, tmp_path):
    lock = tmp_path / "llama.lock"
    seven, two = Target("3.11", "x86_64", "2.36", "3.11.7"), Target("3.11", "x86_64", "2.36", "3.11.2")
    lockfile.ensure(lock, PINS, seven, house)
    assert "python_full: 3.11.7" in lock.read_text()
    assert lockfile.find(lockfile.load(lock), PINS, seven).target == seven
    assert lockfile.find(lockfile.load(lock), PINS, two) is None  # not this entry's own version
    lockfile.ensure(lock, PINS, Target("3.12", "x86_64", "2.36", "3.12.1"), house)  # another X.Y: its own entry
    assert {e.target.full for e in lockfile.load(lock)} == {"3.11.7", "3.12.1"}
    older = tmp_path / "older.lock"  # written before hosts said their full version (or by inv check --lock)
    lockfile.ensure(older, PINS, HOST, house)
    assert "python_full" not in older.read_text()
    assert lockfile.find(lockfile.load(older), PINS, seven).target == HOST


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


def test_a_locked_file_the_wheelhouse_lacks_is_downloaded_and_held_to_the_lock(house, tmp_path, monkeypatch):
    # the review: a locked file missing from the wheelhouse was refused, never fetched
    lock = tmp_path / "llama.lock"
    first = [w.filename for w in lockfile.ensure(lock, PINS, HOST, house)]
    torch = house / "torch-2.9.1-py3-none-any.whl"
    remote = tmp_path / "remote"
    remote.mkdir()
    shutil.copy(torch, remote)  # the index has the locked bytes
    url = index(remote, tmp_path / "simple")
    monkeypatch.setenv("PIP_INDEX_URL", url)
    good = torch.read_bytes()
    torch.unlink()
    said: list[str] = []
    assert [w.filename for w in lockfile.ensure(lock, PINS, HOST, house, say=lines_of(said))] == first
    assert torch.read_bytes() == good
    assert said == [f"downloading {torch.name} (locked in {lock}) for {HOST} from {url} into {house}"]
    assert sorted(p.name for p in house.iterdir()) == sorted([*first, "torch-2.14.1-py3-none-any.whl"])


def test_a_downloaded_locked_file_with_other_bytes_is_refused_in_one_line_and_not_kept(house, tmp_path, monkeypatch):
    lock = tmp_path / "llama.lock"
    lockfile.ensure(lock, PINS, HOST, house)
    torch = house / "torch-2.9.1-py3-none-any.whl"
    torch.unlink()
    remote = tmp_path / "remote"
    remote.mkdir()
    wheel(remote, "torch", "2.9.1", "evil==1.0")  # the index's file: same name, other bytes
    url = index(remote, tmp_path / "simple")
    monkeypatch.setenv("PIP_INDEX_URL", url)
    with pytest.raises(LockError) as caught:
        lockfile.ensure(lock, PINS, HOST, house)
    text = str(caught.value)
    assert "\n" not in text and text.startswith(f"{torch}: downloaded from {url}, sha256 ")
    assert text.endswith(f"locked in {lock}: refused, not kept, nothing was sent")
    assert not torch.exists() and not [p for p in house.iterdir() if p.name.startswith(".fetch-")]
    empty = tmp_path / "empty"  # an index without it: the line says so, and how to go on
    empty.mkdir()
    (empty / "index.html").write_text("<html></html>\n")
    monkeypatch.setenv("PIP_INDEX_URL", empty.as_uri())
    with pytest.raises(LockError, match=r"but not in the wheelhouse, and pip download torch==2.9.1 from file:.*put "
                                        r"torch-2.9.1-py3-none-any.whl back in .*nothing was sent$"):
        lockfile.ensure(lock, PINS, HOST, house)


def _add(path: Path, name: str, mode: int = 0o644) -> None:
    with zipfile.ZipFile(path, "a") as zf:
        info = zipfile.ZipInfo(name, (2026, 1, 1, 0, 0, 0))
        info.external_attr = mode << 16
        zf.writestr(info, "print('written where it was put')\n")


@pytest.mark.parametrize("member", ["../outside.py", "torch/../../outside.py", "/etc/cron.d/outside",
                                    "torch-2.9.1.data/purelib/../../../outside.py", "..\\outside.py", "C:/outside.py"])
def test_a_wheel_that_writes_outside_the_venv_is_refused_before_any_host_and_never_locked(house, tmp_path, member):
    # the review: uv installed a wheel holding ../outside.py; pip refused it only on the host, after it was sent
    torch = house / "torch-2.9.1-py3-none-any.whl"
    _add(torch, member)
    lock = tmp_path / "llama.lock"
    with pytest.raises(WheelhouseError) as caught:
        lockfile.ensure(lock, PINS, HOST, house)
    assert str(caught.value) == (f"{torch}: holds {member!r}, a path outside the venv: refused, nothing was sent")
    assert not lock.exists()


def test_a_wheel_with_a_link_or_a_local_header_naming_another_path_is_refused(house, tmp_path):
    torch = house / "torch-2.9.1-py3-none-any.whl"
    _add(torch, "torch/link.py", stat.S_IFLNK | 0o777)
    with pytest.raises(WheelhouseError, match=r"holds 'torch/link.py' as a symbolic link: refused, nothing was sent"):
        lockfile.ensure(tmp_path / "a.lock", PINS, HOST, house)
    torch.unlink()
    wheel(house, "torch", "2.9.1")
    _add(torch, "torch/okfile.py")  # the directory says torch/okfile.py; its local header will say ../out.py
    data = torch.read_bytes()
    torch.write_bytes(data.replace(b"torch/okfile.py", b"torch/../out.py", 1))  # the first: the local header
    with pytest.raises(WheelhouseError, match=r"names 'torch/okfile.py' otherwise in its local header"):
        lockfile.ensure(tmp_path / "b.lock", PINS, HOST, house)


def test_a_wheel_whose_member_name_holds_a_nul_is_refused(house, tmp_path):
    # the review: zipfile's `filename` stops at the NUL, so the check read 'torch/ok.py' and passed the wheel
    torch = house / "torch-2.9.1-py3-none-any.whl"
    _add(torch, "torch/ok.py@/../../../outside.py")
    data = torch.read_bytes()
    assert data.count(b"ok.py@") == 2  # the local header and the directory
    torch.write_bytes(data.replace(b"ok.py@", b"ok.py\0"))
    with pytest.raises(WheelhouseError) as caught:
        lockfile.ensure(tmp_path / "a.lock", PINS, HOST, house)
    assert str(caught.value) == (f"{torch}: holds 'torch/ok.py?/../../../outside.py', a path outside the venv: "
                                 "refused, nothing was sent")
    assert not (tmp_path / "a.lock").exists()


@pytest.mark.parametrize("script", ["../../../tmp/outside", "sub/tool", "..\\tool", "tool..x"])
def test_a_wheel_naming_a_script_as_a_path_is_refused_before_any_host(house, tmp_path, script):
    # the review: pip refused '../x = os:getcwd' in entry_points.txt only on the host, after the wheel was sent
    torch = house / "torch-2.9.1-py3-none-any.whl"
    with zipfile.ZipFile(torch, "a") as zf:
        zf.writestr("torch-2.9.1.dist-info/entry_points.txt", f"[gui_scripts]\nok = a:b\n{script} = os:getcwd\n")
    with pytest.raises(WheelhouseError) as caught:
        lockfile.ensure(tmp_path / "a.lock", PINS, HOST, house)
    assert str(caught.value) == (f"{torch}: names the script {script!r} in entry_points.txt, a path outside the "
                                 "venv's bin/: refused, nothing was sent")


def test_a_wheel_whose_dist_info_is_another_distribution_or_version_is_refused(house):
    # pip's resolve passes over such a wheel, but a lock may name it (its sha256 is the lock's): the host's pip
    # refused it only once it was sent
    torch = house / "torch-2.9.1-py3-none-any.whl"
    (house / "torch-2.14.1-py3-none-any.whl").rename(torch)  # its .dist-info says 2.14.1
    assert wheelhouse.stray(torch) == "holds 'torch-2.14.1.dist-info', which is not torch 2.9.1 as its file name says"
    torch.unlink()
    wheel(house, "torch", "2.9.1")
    assert wheelhouse.stray(torch) is None
    _add(torch, "Torch-2.9.1.dist-info/RECORD")  # another spelling of the same: pip sees two
    assert wheelhouse.stray(torch) == "holds 2 .dist-info folders, not one"
    sglang = house / "sglang-0.5.9-py3-none-any.whl"
    assert wheelhouse.stray(sglang.rename(house / "sglang-0.5.9-py2-none-any.whl")) is None  # tags are not its name



def _small(tmp_path: Path, *sglang_requires: str, torch_python: str | None = None) -> Path:
    folder = tmp_path / "small"
    folder.mkdir()
    wheel(folder, "sglang", "0.5.9", "torch==2.9.1", *sglang_requires)
    wheel(folder, "torch", "2.9.1", python=torch_python)
    wheel(folder, "typing-extensions", "4.15.0")
    return folder


TWO, NINE = Target("3.11", "x86_64", "2.36", "3.11.2"), Target("3.11", "x86_64", "2.36", "3.11.9")


def test_an_entry_of_an_older_full_version_covers_the_host_where_every_wheel_reads_both_alike(tmp_path):
    # the review: a host upgraded from 3.11.2 to 3.11.9 no longer matched its entry; the deploy resolved again and
    # wrote a second entry without a word
    folder, lock, said = _small(tmp_path, torch_python=">=3.9"), tmp_path / "llama.lock", []
    first = lockfile.ensure(lock, {"sglang": "0.5.9"}, TWO, folder)
    text = lock.read_text()
    again = lockfile.ensure(lock, {"sglang": "0.5.9"}, NINE, folder, say=lines_of(said))
    assert [w.sha256 for w in again] == [w.sha256 for w in first] and lock.read_text() == text
    assert said == ["llama.lock: the entry locked for Python 3.11.2 holds for this host's 3.11.9 (every wheel's "
                    "Requires-Python and markers read both alike)"]


@pytest.mark.parametrize(("requires", "torch_python", "why"), [
    ((), ">=3.11,<3.11.5", "torch-2.9.1-py3-none-any.whl requires Python >=3.11,<3.11.5"),
    (('typing-extensions; python_full_version < "3.11.5"',), None,
     'sglang-0.5.9-py3-none-any.whl requires typing-extensions; python_full_version < "3.11.5"')])
def test_an_entry_of_an_older_full_version_that_reads_the_new_one_otherwise_is_refused_in_one_line(
        tmp_path, requires, torch_python, why):
    folder, lock = _small(tmp_path, *requires, torch_python=torch_python), tmp_path / "llama.lock"
    lockfile.ensure(lock, {"sglang": "0.5.9"}, TWO, folder)
    text = lock.read_text()
    with pytest.raises(LockError) as caught:
        lockfile.ensure(lock, {"sglang": "0.5.9"}, NINE, folder)
    assert str(caught.value) == (
        f"{lock}: these pins are locked for Python 3.11.2, not this host's 3.11.9, and {why}: refused, nothing was "
        "sent (to lock 3.11.9 on purpose: delete that entry from llama.lock, deploy again, review and commit the "
        "diff; README, 'Pinned packages and their lock')")
    assert lock.read_text() == text
