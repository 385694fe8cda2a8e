"""A lock and a wheelhouse as an attacker or a tired operator leaves them (found by review, issue 45)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from test_lockfile import PINS, house  # noqa: F401
from test_resolver import HOST, wheel

from fleet.upstream import lockfile
from fleet.upstream.lockfile import LockError
from fleet.upstream.wheelhouse import Target


def _swap_torch(folder: Path) -> Path:
    torch = folder / "torch-2.9.1-py3-none-any.whl"
    torch.unlink()
    wheel(folder, "torch", "2.9.1", 'evil; extra == "x"')  # same file name, other bytes
    return torch


def test_toctou_the_verified_wheels_sha256_is_read_again_from_disk(house, tmp_path):  # noqa: F811
    lock = tmp_path / "llama.lock"
    lockfile.ensure(lock, PINS, HOST, house)
    locked = {w.file: w.sha256 for w in lockfile.load(lock)[0].wheels}
    wheels = lockfile.ensure(lock, PINS, HOST, house)  # verified: every sha256 is the lock's
    _swap_torch(house)  # swapped after the check, before venvs.ensure reads w.sha256 (digest, build args)
    # venvs.ensure sends these bytes and tells venv_build.sh to expect w.sha256: the host's check then passes
    assert {w.filename: w.sha256 for w in wheels} == locked


def test_a_tampered_wheel_is_locked_silently_for_another_kind_of_host(house, tmp_path):  # noqa: F811
    lock = tmp_path / "llama.lock"
    lockfile.ensure(lock, PINS, HOST, house)
    _swap_torch(house)
    with pytest.raises(LockError):
        lockfile.ensure(lock, PINS, HOST, house)  # refused for the locked kind
    with pytest.raises(LockError, match="for another kind of host: refused, nothing was sent"):
        lockfile.ensure(lock, PINS, Target("3.12"), house)  # ... and for a host of another kind (it took it before)
    shas = {w.sha256 for e in lockfile.load(lock) for w in e.wheels if w.file == "torch-2.9.1-py3-none-any.whl"}
    assert len(shas) == 1, f"one file name, two sha256 in one lock: {sorted(s[:12] for s in shas)}"


def test_a_locked_wheel_must_be_the_version_the_lock_names(house, tmp_path):  # noqa: F811
    lock = tmp_path / "llama.lock"
    lockfile.ensure(lock, PINS, HOST, house)
    text = lock.read_text()
    lock.write_text(text.replace("file: torch-2.9.1-py3-none-any.whl", "file: torch-2.14.1-py3-none-any.whl")
                    .replace(next(w.sha256 for w in lockfile.load(lock)[0].wheels if w.name == "torch"),
                             __import__("hashlib").sha256((house / "torch-2.14.1-py3-none-any.whl")
                                                          .read_bytes()).hexdigest()))
    with pytest.raises(LockError):  # torch 2.14.1's file installed under sglang==0.5.9's torch==2.9.1
        lockfile.ensure(lock, PINS, HOST, house)


def test_a_nul_in_a_locked_file_name_is_one_line(house, tmp_path):  # noqa: F811
    lock = tmp_path / "llama.lock"
    lockfile.ensure(lock, PINS, HOST, house)
    lock.write_text(lock.read_text().replace("file: torch-2.9.1-py3-none-any.whl", 'file: "torch\\0.whl"'))
    with pytest.raises(LockError):
        lockfile.ensure(lock, PINS, HOST, house)


def test_a_small_lock_of_yaml_aliases_is_refused_quickly(tmp_path):
    lines = ["a0: &a0 [x,x,x,x,x,x,x,x,x,x]"]
    lines += [f"a{i}: &a{i} [*a{i-1},*a{i-1},*a{i-1},*a{i-1},*a{i-1},*a{i-1},*a{i-1},*a{i-1},*a{i-1},*a{i-1}]"
              for i in range(1, 9)]
    lines += ["locked:", "- pins: {sglang: 0.5.9}", "  python: '3.11'", "  machine: x86_64",
              "  wheels: [{name: *a8, version: '1', file: a.whl, sha256: x}]"]
    lock = tmp_path / "bomb.lock"
    lock.write_text("\n".join(lines) + "\n")
    assert lock.stat().st_size < 2000
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("load took over 10 s"))
    signal.alarm(10)
    try:
        with pytest.raises(LockError):
            lockfile.load(lock)
    finally:
        signal.alarm(0)


def test_a_lock_written_by_check_before_any_deploy_covers_the_hosts(house, tmp_path):  # noqa: F811
    lock = tmp_path / "llama.lock"
    (entry,) = lockfile.relock(lock, PINS, [], house)  # `inv check --lock` on a new playbook: no host asked
    # a glibc host says its glibc (venvs.host_target): its deploy must find the reviewed entry, not lock anew
    assert lockfile.find(lockfile.load(lock), PINS, Target(entry.target.python, "x86_64", "2.36")) is not None


@pytest.mark.parametrize("name", ["--requirement", "-e", "torch ", "tor ch", "torch\u0661"])
def test_a_lock_entry_name_that_is_no_distribution_name_is_refused_when_the_lock_is_read(tmp_path, name):
    # the review: '--requirement' locked as _requirement-1.0-py3-none-any.whl passed the file name check, and
    # `pip download --requirement==1.0` read it as pip's option
    lock = tmp_path / "llama.lock"
    bad = lockfile.Locked(name, "1.0", "_requirement-1.0-py3-none-any.whl", "0" * 64)
    lockfile.dump(lock, [lockfile.Entry(lockfile.key(PINS), HOST, (bad,))])
    with pytest.raises(LockError) as caught:
        lockfile.load(lock)
    assert str(caught.value).startswith(f"{lock}: locks {name!r}, which is no distribution name (PEP 508)")
    assert "\n" not in str(caught.value)


def test_pip_reads_a_requirement_that_begins_with_a_dash_as_a_requirement_not_its_option():
    from pip._internal.commands import create_command

    from fleet.upstream import wheelhouse
    argv = wheelhouse.download_command("--requirement==1.0", HOST, "/nowhere")
    assert argv[:2] == ["pip", "download"]
    options, args = create_command("download").parse_args(argv[2:])  # pip's own parser, as `pip download` runs it
    assert args == ["--requirement==1.0"] and options.requirements == []
