"""fleet.host.venvs: what the host says parsed as hostile text, and its two programs (venv_build.sh,
venv_prune.sh) run here against temporary folders that stand in for /var/lib/fleet (a stand-in `uv` on PATH
makes the venv, so no test waits on pip)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from fleet.host import programs as hostside
from fleet.host import venvs
from fleet.upstream.wheelhouse import Target

DIGEST = "0123456789abcdef"
FAKE_UV = """#!/bin/sh
# stand-in uv: `uv venv --quiet --python PY DIR` makes DIR/bin/python; `uv pip install ...` fails on demand
if [ "$1" = venv ]; then eval "d=\\${$#}"; mkdir -p "$d/bin" && : > "$d/bin/python"; exit 0; fi
[ -n "${UV_FAIL:-}" ] && { echo "error: no solution for sglang==0.5.9" >&2; exit 1; }
echo "$@" > "${UV_ARGS:-/dev/null}"
"""


def test_the_hosts_python_and_platform_are_read_as_such_or_refused():
    assert venvs.parse_target("3.11 x86_64 2.36\n") == Target("3.11", "x86_64", "2.36")
    assert venvs.parse_target("3.12 aarch64 -\n") == Target("3.12", "aarch64", None)  # no glibc said (musl)
    for said in ("", "3.11", "3.11; rm -rf / 2.36", "Python 3.11.2 x86_64 2.36", "\x1b[2J3.11 x86_64 2.36",
                 "3." + "1" * 50 + " x86_64 2.36", "3.11 x86_64 2.36\n3.11 x86_64 2.36", "3.11 x86/64 2.36"):
        with pytest.raises(venvs.VenvError):
            venvs.parse_target(said)


@pytest.mark.parametrize(("free", "send", "venv", "ok"), [
    (10 * 10**9, 10**9, 4 * 10**9, True), (6 * 10**9, 10**9, 4 * 10**9, True),
    (5 * 10**9, 10**9, 4 * 10**9, False),  # 1 GB + 4 GB x 1.25 = 6 GB
    (0, 0, 0, True)])
def test_a_venv_is_built_only_where_the_wheels_and_the_venv_fit(free, send, venv, ok):
    assert (venvs.space_problem(free, send, venv) is None) is ok


def test_a_host_without_room_is_told_how_much_is_needed_and_where():
    said = venvs.space_problem(int(1.2e9), int(0.9e9), int(2.8e9))
    assert said == ("/var/lib/fleet has 1.20 GB free; the venv needs about 4.40 GB (0.90 GB of wheels to send, "
                    "2.80 GB unpacked): free space there (old venvs go with their releases)")


def test_only_wheels_with_the_controllers_sha256_count_as_on_the_host():
    good, other = "a" * 64, "b" * 64
    wanted = {"sglang-0.5.9-py3-none-any.whl": good, "torch-2.9.1+cu130-py3-none-any.whl": good}
    said = (f"{good}  /var/lib/fleet/wheels/sglang-0.5.9-py3-none-any.whl\n"
            f"{other}  /var/lib/fleet/wheels/torch-2.9.1+cu130-py3-none-any.whl\n"  # stale or corrupt: sent again
            f"{good}  /var/lib/fleet/wheels/evil.whl\n"  # never asked for
            "garbage line\n" + "x" * 10000)
    assert venvs.parse_have(said, wanted) == {"sglang-0.5.9-py3-none-any.whl"}


def test_a_recorded_venv_is_used_only_when_it_is_one_of_fleets():
    assert venvs.recorded({"venv": f"/var/lib/fleet/venvs/{DIGEST}"}) == f"/var/lib/fleet/venvs/{DIGEST}"
    for bad in (None, 3, "/root/ml-env", f"/var/lib/fleet/venvs/{DIGEST}/../../x", f"/var/lib/fleet/venvs/{DIGEST}\n"):
        assert venvs.recorded({"venv": bad}) is None


@pytest.fixture
def host(tmp_path: Path) -> dict[str, Path]:
    root, wheels, bin_dir = tmp_path / "venvs", tmp_path / "wheels", tmp_path / "bin"
    wheels.mkdir()
    bin_dir.mkdir()
    (bin_dir / "uv").write_text(FAKE_UV)
    (bin_dir / "uv").chmod(0o755)
    (wheels / "a-1.0-py3-none-any.whl").write_bytes(b"wheel a")
    return {"root": root, "wheels": wheels, "bin": bin_dir, "tmp": tmp_path}


def build(host: dict[str, Path], *wheel_args: str, name: str = DIGEST, **env: str) -> subprocess.CompletedProcess:
    args = ["sh", "-c", hostside.text("venv_build.sh"), "fleet-venv_build", "python3", str(host["root"] / name),
            str(host["wheels"]), '{"pins": {}}', *wheel_args, "--", "a==1.0"]
    return subprocess.run(args, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{host['bin']}:{os.environ['PATH']}", **env})


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_venv_is_built_aside_then_published_whole_with_its_marker_and_logged(host):
    done = build(host, f"{sha(b'wheel a')} a-1.0-py3-none-any.whl", UV_ARGS=str(host["tmp"] / "args"))
    assert (done.returncode, done.stdout) == (0, "built uv\n"), done.stderr
    final = host["root"] / DIGEST
    assert final.is_symlink() and os.readlink(final).startswith(f".build/{DIGEST}.")
    assert (final / ".fleet-venv").read_text() == '{"pins": {}}\n'
    assert "--no-index" in (host["tmp"] / "args").read_text() and "a==1.0" in (host["tmp"] / "args").read_text()
    assert (host["root"] / "builds.log").read_text().split()[1:] == [DIGEST, "uv"]
    again = build(host, f"{sha(b'wheel a')} a-1.0-py3-none-any.whl")
    assert (again.returncode, again.stdout) == (0, "exists\n")
    assert len((host["root"] / "builds.log").read_text().splitlines()) == 1


def test_a_build_that_fails_publishes_nothing_and_leaves_nothing(host):
    done = build(host, f"{sha(b'wheel a')} a-1.0-py3-none-any.whl", UV_FAIL="1")
    assert done.returncode == 72 and "no solution for sglang==0.5.9" in done.stderr
    assert not (host["root"] / DIGEST).exists() and list((host["root"] / ".build").iterdir()) == []


@pytest.mark.parametrize(("args", "code", "said"), [
    ((f"{'0' * 64} a-1.0-py3-none-any.whl",), 71, "is not the controller's"),
    ((f"{'0' * 64} b-1.0-py3-none-any.whl",), 71, "is not on the host"),
])
def test_a_wheel_missing_or_changed_on_the_host_stops_the_build_before_it_starts(host, args, code, said):
    done = build(host, *args)
    assert done.returncode == code and said in done.stderr
    assert not host["root"].exists()


def test_a_venv_name_that_is_not_a_digest_is_refused(host):
    done = build(host, name="../../etc")
    assert done.returncode == 70 and not host["root"].exists()


def test_prune_drops_venvs_no_release_names_and_builds_a_dead_run_left(tmp_path):
    root, releases = tmp_path / "venvs", tmp_path / "releases"
    kept, gone = "1" * 16, "2" * 16
    for digest in (kept, gone):
        (root / ".build" / f"{digest}.10" / "bin").mkdir(parents=True)
        (root / digest).symlink_to(f".build/{digest}.10")
    (root / ".build" / f"{kept}.99").mkdir()  # half-built by a run that died
    (root / "builds.log").write_text("x\n")
    (releases / "r1/files/etc/systemd/system").mkdir(parents=True)
    (releases / "r1/files/etc/systemd/system/sglang.service").write_text(f"ExecStart={root}/{kept}/bin/python -m x\n")
    done = subprocess.run(["sh", "-c", hostside.text("venv_prune.sh"), "fleet-venv_prune", str(root), str(releases),
                           str(tmp_path / "absent")], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, f"pruned {gone}\n")
    assert sorted(p.name for p in root.iterdir()) == [".build", kept, "builds.log"]
    assert [p.name for p in (root / ".build").iterdir()] == [f"{kept}.10"]


def test_prune_of_a_host_without_venvs_does_nothing(tmp_path):
    done = subprocess.run(["sh", "-c", hostside.text("venv_prune.sh"), "fleet-venv_prune", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "")


def test_prune_keeps_every_venv_when_there_are_no_releases_to_say_which_are_used(tmp_path):
    root = tmp_path / "venvs"
    (root / ".build" / f"{DIGEST}.1").mkdir(parents=True)
    (root / DIGEST).symlink_to(f".build/{DIGEST}.1")
    done = subprocess.run(["sh", "-c", hostside.text("venv_prune.sh"), "fleet-venv_prune", str(root),
                           str(tmp_path / "no-releases")], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "") and (root / DIGEST).is_dir()


def test_what_a_host_says_is_printed_only_as_printable_text():
    assert venvs.said("ERROR: \x1b[2Jno matching distribution\r") == "ERROR: ?[2Jno matching distribution?"
    assert len(venvs.said("x" * 10000)) == 300
