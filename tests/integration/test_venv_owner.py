"""A venv its owner may change never runs as root (every step but kcache's, which test_warm_start covers).

serve.venv may be a user's own (a venv in that user's home). fleet runs as root on the host, so a step that runs
that venv's interpreter, its .pth files or its packages as root makes the user root. Here the venv is a copy of
the sandbox's /root/ml-env given to user `fleet`, with a site hook that records each uid it ran as (in the module
setuptools' distutils-precedence.pth imports: a .pth import line of another kind is refused outright); each step runs
no hook as root and still does its work (stdlib programs on the host's own python3 -I -S, the venv read as data;
steps that import the venv as its owner). A root-owned venv runs as before (the other integration tests)."""

from __future__ import annotations

import dataclasses
import shlex

import pytest
from fleetcli import sh

from fleet.deploy import bench
from fleet.errors import FleetError
from fleet.host import benchrun, canaryrun, p2pcheck, serverchecks
from fleet.host.render import LAUNCHER, launcher_text
from fleet.host.service import can_import, python_says, write_atomic
from fleet.patches import audit, engine
from fleet.patches import sets as patchsets
from fleet.playbook import Bench
from fleet.ssh.connect import open_connection
from fleet.ssh.remote import run

pytestmark = pytest.mark.sandbox

HOST = "sbx0"
VENV = "/home/fleet/venv-owned"
SEEN = "/home/fleet/venv-owned-hook"  # each uid the venv's site hook ran as, one a line
HOOKED = "_distutils_hack/__init__.py"  # setuptools' distutils-precedence.pth imports it at every start
SET = "sm120-allreduce-fusion"


def _uids(inv) -> list[str]:
    return sh(inv, HOST, f"cat {SEEN}; : > {SEEN}").split()


@pytest.fixture
def owned(sandbox, sandbox_inventory):
    """(inventory, host whose venv is the user's, connection); the venv made and removed around the test."""
    inv = sandbox_inventory
    hook = f"import os; open({SEEN!r}, 'a').write(str(os.geteuid()) + chr(10))"
    sh(inv, HOST, f"rm -rf {VENV} {SEEN} && cp -a /root/ml-env {VENV} && chown -R fleet:fleet {VENV} && "
                  f"runuser -u fleet -- touch {SEEN} && runuser -u fleet -- sh -c "
                  f"{shlex.quote(f'echo {shlex.quote(hook)} >> $(echo {VENV}/lib/python3*/site-packages)/{HOOKED}')}")
    sh(inv, HOST, f"runuser -u fleet -- {VENV}/bin/python -c pass")  # the hook works: as the venv's owner
    assert set(_uids(inv)) == {"1000"}, "the hook records the uid it runs as (fleet: 1000)"
    host = dataclasses.replace(inv.hosts[HOST], venv=VENV)
    conn = open_connection(host)
    try:
        yield inv, host, conn
    finally:
        conn.close()
        sh(inv, HOST, f"rm -rf {VENV} {SEEN}")


def test_the_patch_engines_read_and_the_audits_scan_run_nothing_of_a_users_venv_as_root(owned):
    inv, host, conn = owned
    state = engine.read_state(conn, host, patchsets.load_sets([SET]))
    after_read = _uids(inv)
    scan = audit.scan_host(conn, host, {"sglang": ["**/*.py"], "flashinfer": ["**/*.py"]})
    after_scan = _uids(inv)
    assert after_read == [] and after_scan == [], f"the user's venv hook ran as uid {after_read} / {after_scan}"
    comm = state.files[("flashinfer", "jit/comm.py")]
    assert comm.exists and comm.path and comm.path.startswith(f"{VENV}/lib/"), comm
    assert state.packages["sglang"]["path"].startswith(f"{VENV}/lib/") and state.dists, state.packages
    assert scan["packages"]["sglang"]["path"].startswith(f"{VENV}/lib/") and scan["files"], scan["packages"]


def test_steps_that_import_a_users_venv_run_as_its_owner(owned):
    inv, host, conn = owned
    py = f"{VENV}/bin/python"
    said = python_says(conn, host, py, "import os, sys; print(os.geteuid(), sys.prefix)")
    importable = can_import(conn, host, py, "sglang")
    helped = serverchecks.launch_help(conn, host, VENV)
    checked = p2pcheck.parse(*(lambda r: (r.stdout, r.exited))(run(conn, host, p2pcheck.command(VENV), timeout=200)))
    uids = _uids(inv)
    assert "0" not in uids and len(uids) >= 4, f"the user's venv hook ran as {uids}"
    assert said.split() == ["1000", VENV], said
    assert importable and "--model-path" in helped, helped[:300]
    assert checked.gpus == 8, checked  # the venv's torch ran
    root = "/root/ml-env"  # root's alone: as root, as before
    assert python_says(conn, host, f"{root}/bin/python", "import os, sys; print(os.geteuid(), sys.prefix)").split() \
        == ["0", root]
    assert "--model-path" in serverchecks.launch_help(conn, host, root) and can_import(conn, host, f"{root}/bin/python",
                                                                                       "sglang_router")


def test_a_benchmark_runs_as_the_venvs_owner_with_the_servers_key(owned):
    """bench_serving imports the venv: it runs as its owner, in a temp folder of that owner's, the server's key (root's,
    0600) handed over as a copy there."""
    inv, host, conn = owned
    key = "/etc/fleet/venv-owned.key"
    sh(inv, HOST, f"mkdir -p /etc/fleet /var/lib/fleet/bin && (umask 077 && echo sk-venv-owned > {key})")
    write_atomic(conn, host, LAUNCHER, launcher_text().encode(), 0o755)
    cmd = bench.command(VENV, 1, Bench(num_prompts=1, max_concurrency=1), key_path=key)
    try:
        res = benchrun.run_bench(conn, host, cmd, 120, venv=VENV, key_path=key)
    finally:
        sh(inv, HOST, f"rm -f {key}")
    rc, out, err, _ = bench.split_output(res.stdout)
    uids = _uids(inv)
    assert "0" not in uids and "1000" in uids, f"the user's venv hook ran as {uids}"
    assert rc not in (None, 0) and "Connection refused" in out + err, (rc, out, err)  # the key read, none serves


def test_a_canarys_traffic_runs_on_the_hosts_python_never_the_venvs(owned):
    inv, host, conn = owned
    res = run(conn, host, canaryrun.load_command(VENV, 1, None, 1, 2, 7), timeout=400)
    assert _uids(inv) == [], "the user's venv hook ran as root"
    assert [ln for ln in res.stdout.splitlines() if ln.startswith("[")], res  # each request timed (none answers)


def test_a_venv_others_may_change_is_refused_in_one_line(owned):
    inv, host, conn = owned
    sh(inv, HOST, f"chmod o+w {VENV}/lib")
    res = run(conn, host, p2pcheck.command(VENV), timeout=200)
    assert _uids(inv) == [] and res.exited == 77, res
    assert res.stderr.strip() == f"fleet runs nothing of {VENV} as root: {VENV}/lib is writable by others than its " \
                                 "owner", res.stderr


def test_a_host_without_the_system_python_refuses_plainly_and_changes_nothing(owned):
    inv, host, conn = owned
    sh(inv, HOST, "mv /usr/bin/python3 /usr/bin/python3.fleet-away")
    try:
        sums = sh(inv, HOST, f"find {VENV}/lib -type f -name '*.py' | sort | xargs sha256sum | sha256sum")
        with pytest.raises(FleetError) as read:
            engine.read_state(conn, host, patchsets.load_sets([SET]))
        with pytest.raises(FleetError) as scan:
            audit.scan_host(conn, host, {"sglang": ["**/*.py"]})
        after = sh(inv, HOST, f"find {VENV}/lib -type f -name '*.py' | sort | xargs sha256sum | sha256sum")
    finally:
        sh(inv, HOST, "mv /usr/bin/python3.fleet-away /usr/bin/python3")
    assert _uids(inv) == [] and sums == after
    for exc in (read.value, scan.value):
        assert "no /usr/bin/python3 on the host" in str(exc) and "nothing was run" in str(exc), exc


def test_a_users_venv_is_patched_and_reverted_as_that_user(owned):
    """Over real ssh: the patch engine's writes into the user's venv are the user's (patch_host.py as_owner), the
    files patched and put back, owned by that user, and no hook ran as root."""
    inv, host, conn = owned
    sets = patchsets.load_sets([SET])
    applied = engine.apply_host(conn, host, sets)
    assert applied.ok and applied.written, applied.error
    owners = sh(inv, HOST, "stat -c %U " + " ".join(map(shlex.quote, applied.written))).split()
    assert set(owners) == {"fleet"}, owners
    reverted = engine.revert_host(conn, host, sets)
    assert reverted.ok, reverted.error
    assert set(sh(inv, HOST, "stat -c %U " + " ".join(map(shlex.quote, applied.written))).split()) == {"fleet"}
    assert "0" not in _uids(inv)


def test_a_root_venv_one_folder_of_which_is_a_users_is_that_users_for_every_step(owned):
    """One rule over real ssh (owner.py): bin/ the user's, all else root's (in the user's home). Fails before:
    as_owner.sh ran the venv's code as the user, but benchrun judged the venv's top folder (root's) and gave that
    user neither temp folder nor key. The patch engine writes as the user, whom root's folders refuse."""
    inv, host, conn = owned
    sh(inv, HOST, f"chown -R root:root {VENV} && chown fleet:fleet {VENV}/bin")
    said = python_says(conn, host, f"{VENV}/bin/python", "import os; print(os.geteuid())")
    sums = sh(inv, HOST, f"find {VENV}/lib -type f -name '*.py' | sort | xargs sha256sum | sha256sum")
    applied = engine.apply_host(conn, host, patchsets.load_sets([SET]))
    after = sh(inv, HOST, f"find {VENV}/lib -type f -name '*.py' | sort | xargs sha256sum | sha256sum")
    key = "/etc/fleet/venv-owned.key"
    sh(inv, HOST, f"mkdir -p /etc/fleet /var/lib/fleet/bin && (umask 077 && echo sk-venv-owned > {key})")
    write_atomic(conn, host, LAUNCHER, launcher_text().encode(), 0o755)
    try:
        res = benchrun.run_bench(conn, host, bench.command(VENV, 1, Bench(num_prompts=1, max_concurrency=1),
                                                           key_path=key), 120, venv=VENV, key_path=key)
    finally:
        sh(inv, HOST, f"rm -f {key}")
    rc, out, err, _ = bench.split_output(res.stdout)
    assert said.strip() == "1000" and "0" not in _uids(inv), said
    assert not applied.ok and "Permission denied" in (applied.error or "") and sums == after, applied.error
    assert rc not in (None, 0) and "Connection refused" in out + err, (rc, out, err)  # the key read, none serves


EDITABLE = "/root/ml-env-editable"  # root's venv, a .pth (an editable install) naming root's folder SRC
SRC = "/srv/fleet-editable"  # root's folder; in it a module of user fleet's that the step imports


def test_a_root_venvs_pth_naming_a_users_module_runs_it_as_that_user_not_root(sandbox, sandbox_inventory):
    """Fails before: owner.py read no .pth, saw root alone (every file of the venv and SRC itself root's) and
    imported fleet's module as root: the hook recorded uid 0."""
    inv = sandbox_inventory
    hook = f"import os; open({SEEN!r}, 'a').write(str(os.geteuid()) + chr(10))"
    sh(inv, HOST, f"rm -rf {EDITABLE} {SRC} {SEEN} && cp -a /root/ml-env {EDITABLE} && mkdir -m 755 {SRC} && "
                  f"echo {shlex.quote(hook)} > {SRC}/userhook.py && chown fleet:fleet {SRC}/userhook.py && "
                  f"touch {SEEN} && chmod 666 {SEEN} && printf '%s\\n' {SRC} > "
                  f"$(echo {EDITABLE}/lib/python3*/site-packages)/__editable__.userhook.pth")
    host = dataclasses.replace(inv.hosts[HOST], venv=EDITABLE)
    conn = open_connection(host)
    try:
        assert can_import(conn, host, f"{EDITABLE}/bin/python", "userhook")  # found through the .pth's path line
        assert _uids(inv) == ["1000"], "the .pth's module ran as root, or not at all"
    finally:
        conn.close()
        sh(inv, HOST, f"rm -rf {EDITABLE} {SRC} {SEEN}")
