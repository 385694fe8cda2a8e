"""fleet.host.venvs: what the host says parsed as hostile text, and its two programs (venv_build.sh,
venv_prune.sh) run here against temporary folders that stand in for /var/lib/fleet. Stand-ins for `uv` and
`python3` on PATH make the venv, so no test waits on pip; the stand-in uv answers as the real uv 0.13.9 does
(its version line, its failures, its flags: tests/fixtures/venv_build, recorded from the real binary)."""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import subprocess
from pathlib import Path

import pytest

from fleet.host import programs as hostside
from fleet.host import venvs
from fleet.upstream.wheelhouse import Target

DIGEST = "0123456789abcdef"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "venv_build"
FAKE_UV = """#!/bin/sh
# stand-in uv 0.13.9: `uv --version`; `uv venv ... --python PY DIR` makes DIR/bin/python; `uv pip install ...`
# makes its --cache-dir and fails on demand with the real uv's words; each call's arguments appended to $FAKE_UV_ARGS
[ "$1" = --version ] && [ -n "${FAKE_UV_HANGS:-}" ] && exec sleep 600
[ "$1" = --version ] && { [ -n "${FAKE_UV_BROKEN:-}" ] && exit 126; cat "$FIXTURES/uv-0.13.9-version.txt"; exit 0; }
echo "$@" >> "${FAKE_UV_ARGS:-/dev/null}"
env >> "${FAKE_ENV:-/dev/null}"
if [ "$1" = venv ]; then eval "d=\\${$#}"; mkdir -p "$d/bin" && : > "$d/bin/python" && : > "$d/.lock"; \\
  chmod 0666 "$d/.lock"; exit 0; fi
while [ $# -gt 0 ]; do [ "$1" = --cache-dir ] && mkdir -p "$2"; shift; done
[ -n "${FAKE_UV_FAIL:-}" ] && { cat "$FIXTURES/$FAKE_UV_FAIL" >&2; exit 1; }
exit 0
"""
FAKE_PYTHON = """#!/bin/sh
# stand-in python3: `[-I] -m venv DIR` makes DIR/bin/python (this same stand-in); `[-I] -m pip install ...` records
# its args
i=; [ "$1" = -I ] && { shift; i="-I "; }
if [ "$2" = venv ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; exit 0; fi
echo "$i$@" >> "${FAKE_PIP_ARGS:-/dev/null}"
env >> "${FAKE_ENV:-/dev/null}"
[ -n "${FAKE_PIP_FAIL:-}" ] && { cat "$FIXTURES/$FAKE_PIP_FAIL" >&2; exit 1; }
exit 0
"""


def test_the_hosts_python_and_platform_are_read_as_such_or_refused():
    assert venvs.parse_target("3.11 3.11.2 x86_64 2.36\n") == Target("3.11", "x86_64", "2.36", "3.11.2")
    assert venvs.parse_target("3.12 3.12.10 aarch64 -\n") == Target("3.12", "aarch64", None, "3.12.10")  # musl
    for said in ("", "3.11", "3.11; rm -rf / 2.36", "Python 3.11.2 x86_64 2.36", "\x1b[2J3.11 3.11.2 x86_64 2.36",
                 "3." + "1" * 50 + " 3.11.2 x86_64 2.36", "3.11 3.11.2 x86_64 2.36\n3.11 3.11.2 x86_64 2.36",
                 "3.11 3.11.2 x86/64 2.36", "3.11 x86_64 2.36", "3.11 3.12.1 x86_64 2.36", "3.11 3.11.2rc1 x86_64 -"):
        with pytest.raises(venvs.VenvError):
            venvs.parse_target(said)


def test_the_hosts_version_is_ascii_digits_written_as_packaging_reads_it():
    # the review: `\d` took full-width digits ('\uff11' is int 1), and '3.11.007' went to the lock as written
    for said in ("3.\uff11\uff11 3.\uff11\uff11.\uff12 x86_64 2.\uff13\uff16", "3.11 3.11.\u0662 x86_64 2.36",
                 "3.11 3.11.2 x86_64 2.\u0663\u0666", "3.11 3.11.999 x86_64 2.36", "3.11 3.11.100 x86_64 -"):
        with pytest.raises(venvs.VenvError, match="did not say its version and platform"):
            venvs.parse_target(said)
    assert venvs.parse_target("3.11 3.11.007 x86_64 2.036") == Target("3.11", "x86_64", "2.36", "3.11.7")
    assert venvs.parse_target("3.09 3.9.01 x86_64 -") == Target("3.9", "x86_64", None, "3.9.1")


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
    for name, text in (("uv", FAKE_UV), ("python3", FAKE_PYTHON)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (wheels / "a-1.0-py3-none-any.whl").write_bytes(b"wheel a")
    return {"root": root, "wheels": wheels, "bin": bin_dir, "tmp": tmp_path}


def build(host: dict[str, Path], *wheel_args: str, name: str = DIGEST, python: str = "",
          **env: str) -> subprocess.CompletedProcess:
    """venv_build.sh run as venvs.ensure runs it, on the stand-in python3 (root's, as the host's own)."""
    args = ["sh", "-c", hostside.text("venv_build.sh"), "fleet-venv_build", python or str(host["bin"] / "python3"),
            str(host["root"] / name),
            str(host["wheels"]), '{"pins": {}}', *wheel_args]
    return subprocess.run(args, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{host['bin']}:{os.environ['PATH']}",
                               "FIXTURES": str(FIXTURES), **env})


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_venv_is_built_aside_then_published_whole_with_its_marker_and_logged(host):
    done = build(host, f"{sha(b'wheel a')} a-1.0-py3-none-any.whl", FAKE_UV_ARGS=str(host["tmp"] / "args"))
    assert (done.returncode, done.stdout) == (0, "built uv\n"), done.stderr
    final = host["root"] / DIGEST
    assert final.is_symlink() and os.readlink(final).startswith(f".build/{DIGEST}.")
    assert (final / ".fleet-venv").read_text() == '{"pins": {}}\n'
    install = (host["tmp"] / "args").read_text().splitlines()[-1].split()
    # the checked file by its path, nothing else: no --find-links over every wheel the host ever received
    assert install[-1] == f"{host['wheels']}/a-1.0-py3-none-any.whl" and "--no-index" in install
    assert "--find-links" not in install
    assert os.listdir(host["root"] / ".build") == [os.readlink(final).split("/")[1]]  # uv's cache went with it
    assert (host["root"] / "builds.log").read_text().split()[1:] == [DIGEST, "uv"]
    again = build(host, f"{sha(b'wheel a')} a-1.0-py3-none-any.whl")
    assert (again.returncode, again.stdout) == (0, "exists\n")
    assert len((host["root"] / "builds.log").read_text().splitlines()) == 1


def test_a_build_that_fails_publishes_nothing_and_leaves_nothing(host):
    done = build(host, f"{sha(b'wheel a')} a-1.0-py3-none-any.whl", FAKE_UV_FAIL="uv-0.13.9-missing-dist.txt")
    assert done.returncode == 72 and venvs.build_failure(done.stderr) == (
        "cause: Because sglang-sim-core was not found in the provided package locations and you require "
        "sglang-sim-core==0.1.0, we can conclude that your requirements are unsatisfiable.")
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


def uv_calls(host: dict[str, Path]) -> dict[str, list[str]]:
    """The stand-in uv's calls by subcommand ('venv', 'pip install'): their arguments."""
    calls = {}
    for line in (host["tmp"] / "args").read_text().splitlines():
        words = line.split()
        calls["venv" if words[0] == "venv" else " ".join(words[:2])] = words
    return calls


def test_uv_gets_only_flags_the_real_uv_knows_and_never_an_index_a_download_or_a_config(host):
    done = build(host, f"{sha(b'wheel a')} a-1.0-py3-none-any.whl", FAKE_UV_ARGS=str(host["tmp"] / "args"))
    assert done.returncode == 0, done.stderr
    calls = uv_calls(host)
    pid = os.readlink(host["root"] / DIGEST).rsplit(".", 1)[1]
    for sub, help_file in (("venv", "uv-0.13.9-venv-help.txt"), ("pip install", "uv-0.13.9-pip-install-help.txt")):
        known = set(re.findall(r"--[a-z][a-z-]+", (FIXTURES / help_file).read_text()))
        flags = {w for w in calls[sub] if w.startswith("--")}
        assert flags <= known, (sub, flags - known)  # a flag the real uv refuses (exit 2) fails every build
        assert {"--no-config", "--offline", "--no-python-downloads", "--cache-dir"} <= flags
        # both share one cache beside the build (the real `uv venv` otherwise left ~/.cache/uv on the host)
        assert calls[sub][calls[sub].index("--cache-dir") + 1] == f"{host['root']}/.build/{DIGEST}.{pid}.uv-cache"
    pip_install = calls["pip install"]
    assert {"--no-index", "--compile-bytecode"} <= set(pip_install) and "--find-links" not in pip_install
    # hardlinks from the cache whatever UV_LINK_MODE says: the real uv under UV_LINK_MODE=symlink made a venv of
    # links into the cache, dead once it is removed
    assert pip_install[pip_install.index("--link-mode") + 1] == "hardlink"
    assert oct((host["root"] / DIGEST / ".lock").stat().st_mode & 0o777) == "0o644"  # uv makes it 0666


def test_uv_builds_with_the_hosts_own_python3_not_any_python_3_it_finds(host):
    """A bare `python3` is uv's request "any Python 3", managed installs first (the recorded real uv took a pyenv
    shim over /usr/bin/python3): the script hands uv the checked file it was given."""
    assert "Using Python request `3`" in (FIXTURES / "uv-0.13.9-venv-python3-request.txt").read_text()
    done = build(host, f"{sha(b'wheel a')} a-1.0-py3-none-any.whl", FAKE_UV_ARGS=str(host["tmp"] / "args"))
    assert done.returncode == 0, done.stderr
    venv = uv_calls(host)["venv"]
    assert venv[venv.index("--python") + 1] == str(host["bin"] / "python3")


def test_a_uv_that_does_not_run_leaves_the_build_to_pip(host):
    done = build(host, f"{sha(b'wheel a')} a-1.0-py3-none-any.whl", FAKE_UV_BROKEN="1",
                 FAKE_UV_ARGS=str(host["tmp"] / "args"), FAKE_PIP_ARGS=str(host["tmp"] / "pip"))
    assert (done.returncode, done.stdout) == (0, "built pip\n"), done.stderr
    assert not (host["tmp"] / "args").exists()
    pip = (host["tmp"] / "pip").read_text().split()
    assert pip[:4] == ["-I", "-m", "pip", "install"] and "--no-index" in pip  # -I: not the folder sudo kept first
    assert pip[-1] == f"{host['wheels']}/a-1.0-py3-none-any.whl" and "--find-links" not in pip
    assert (host["root"] / "builds.log").read_text().split()[1:] == [DIGEST, "pip"]


def test_a_uv_that_hangs_is_given_a_minute_then_pip_builds(host):
    """`uv --version` runs under `timeout 60`: here a stand-in `timeout` that gives up at once, as the real one
    would after a minute (no test waits a minute)."""
    (host["bin"] / "timeout").write_text("#!/bin/sh\nexit 124\n")
    (host["bin"] / "timeout").chmod(0o755)
    done = build(host, f"{sha(b'wheel a')} a-1.0-py3-none-any.whl", FAKE_UV_HANGS="1",
                 FAKE_UV_ARGS=str(host["tmp"] / "args"))
    assert (done.returncode, done.stdout) == (0, "built pip\n"), done.stderr
    assert not (host["tmp"] / "args").exists()


def test_a_host_without_uv_builds_with_pip_from_its_python3(host):
    (host["bin"] / "uv").unlink()
    path = f"{host['bin']}:/usr/bin:/bin"
    done = build(host, f"{sha(b'wheel a')} a-1.0-py3-none-any.whl", FAKE_PIP_ARGS=str(host["tmp"] / "pip"), PATH=path)
    assert (done.returncode, done.stdout) == (0, "built pip\n"), done.stderr
    assert (host["root"] / DIGEST / "bin" / "python").read_text() == FAKE_PYTHON  # the python3 given made it


def _users(host: dict[str, Path]) -> Path:
    """A folder a user (nobody) owns, holding copies of the stand-ins: what a PATH may put before root's."""
    users = host["tmp"] / "users"
    users.mkdir()
    for name in ("uv", "python3"):
        (users / name).write_bytes((host["bin"] / name).read_bytes())
        (users / name).chmod(0o755)
    nobody = pwd.getpwnam("nobody")
    os.chown(users, nobody.pw_uid, nobody.pw_gid)
    return users


@pytest.mark.skipif(os.geteuid() != 0, reason="makes files of another user: needs root (CI runs as root)")
def test_root_builds_no_venv_on_a_python_a_user_may_change_nor_with_their_uv(host: dict[str, Path]) -> None:
    """Fails before: venv_build.sh ran a bare `python3` from PATH (a user's folder first: their python3, as root,
    and the venv built on it) and the first uv on PATH. Now: $1 absolute and checked (pycheck.sh, exit 77 and one
    line, nothing built); a uv the check refuses is not used (pip builds)."""
    users, wheel = _users(host), f"{sha(b'wheel a')} a-1.0-py3-none-any.whl"
    path = f"{users}:{host['bin']}:/usr/bin:/bin"
    for python, why in (("python3", "it is no absolute path"), (str(users / "python3"), f"{users} is not root's")):
        done = build(host, wheel, python=python, PATH=path, FAKE_UV_ARGS=str(host["tmp"] / "args"))
        assert (done.returncode, done.stdout, done.stderr.strip()) == (
            77, "", f"fleet runs nothing on {python} as root: {why}")
        assert not (host["tmp"] / "args").exists() and not (host["root"] / DIGEST).exists()
    done = build(host, wheel, PATH=path, FAKE_UV_ARGS=str(host["tmp"] / "args"), FAKE_PIP_ARGS=str(host["tmp"] / "pip"))
    assert (done.returncode, done.stdout) == (0, "built pip\n"), done.stderr
    assert not (host["tmp"] / "args").exists() and (host["tmp"] / "pip").exists()


def test_a_python_that_is_not_there_is_said_as_such_under_set_u(host: dict[str, Path]) -> None:
    """venv_build.sh runs under `set -u`: pycheck's `[ -n "$2" ]` on a path ls printed nothing for aborted the check
    with dash's `parameter not set`, exit 2, where it says `not found`, exit 127 (review of the diff)."""
    missing = str(host["tmp"] / "no-python3")
    done = build(host, f"{sha(b'wheel a')} a-1.0-py3-none-any.whl", python=missing)
    assert (done.returncode, done.stderr.strip()) == (127, f"fleet-interpreter: {missing}: not found"), done
    assert not (host["root"] / DIGEST).exists()


@pytest.mark.parametrize(("fixture", "line"), [
    ("uv-0.13.9-invalid-wheel.txt", "cause: Because flashinfer-python==0.6.3 has an invalid package format and you "
                                    "require flashinfer-python==0.6.3, we can conclude that your requirements are "
                                    "unsatisfiable."),
    ("uv-0.13.9-missing-dist.txt", "cause: Because sglang-sim-core was not found in the provided package locations "
                                   "and you require sglang-sim-core==0.1.0, we can conclude that your requirements "
                                   "are unsatisfiable."),
    ("uv-0.13.9-unknown-flag.txt", "error: unexpected argument '--bogus-flag' found"),
    ("pip-23.0.1-invalid-wheel.txt", "ERROR: Wheel 'flashinfer-python' located at "
                                     "/tmp/s42uv/bad1/flashinfer_python-0.6.3-py3-none-any.whl is invalid."),
    ("pip-23.0.1-missing-dist.txt", "ERROR: No matching distribution found for sglang-sim-core==0.1.0"),
])
def test_a_failed_build_is_told_by_the_line_that_says_why(host, fixture, line):
    """The real installers' words, as the script passes them on (its error lines and last lines)."""
    fail = {"FAKE_UV_FAIL": fixture} if fixture.startswith("uv") else {"FAKE_UV_BROKEN": "1", "FAKE_PIP_FAIL": fixture}
    done = build(host, f"{sha(b'wheel a')} a-1.0-py3-none-any.whl", **fail)
    assert done.returncode == 72 and venvs.build_failure(done.stderr) == line


def test_a_failed_build_that_says_nothing_useful_is_told_as_it_is():
    assert venvs.build_failure("") == "no output"
    assert venvs.build_failure("Killed\n\n") == "Killed"
    assert venvs.build_failure("  cause: \x1b[31mx" + "y" * 1000) == "cause: ?[31mx" + "y" * 287


@pytest.mark.parametrize("tool", ["uv", "pip"])
def test_the_hosts_own_pip_and_uv_settings_never_reach_the_build(host, tool):
    """A PIP_TARGET, PIP_USER or UV_PYTHON in the host's environment used to steer the build (pip honoured every
    PIP_* but the config file; uv every UV_*): the venv's packages could land elsewhere or be built for another
    Python."""
    env = {"PIP_TARGET": "/tmp/elsewhere", "PIP_USER": "1", "PIP_FIND_LINKS": "/tmp/other", "UV_PYTHON": "3.9",
           "UV_INDEX_URL": "https://pypi.example/simple", "PYTHONPATH": "/tmp/shadow",
           "FAKE_ENV": str(host["tmp"] / "env")}
    if tool == "pip":
        (host["bin"] / "uv").unlink()
        env["PATH"] = f"{host['bin']}:/usr/bin:/bin"
    done = build(host, f"{sha(b'wheel a')} a-1.0-py3-none-any.whl", **env)
    assert (done.returncode, done.stdout) == (0, f"built {tool}\n"), done.stderr
    seen = (host["tmp"] / "env").read_text().splitlines()
    assert seen and not [line for line in seen if line.split("=")[0] in env and not line.startswith(("FAKE_", "PATH="))]
