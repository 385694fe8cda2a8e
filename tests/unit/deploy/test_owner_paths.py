"""Found by review (h-adv15, stop 54) of the owner rule for what a unit loads (fleet.deploy.preflight.loaded) and for a
release's unit read back (fleet.host.render.unit_runs): each test states what should hold; they fail on main
(dbbc9f2)."""

from __future__ import annotations

from fleet.deploy.preflight import loaded, unclear
from fleet.host.render import UnitSpec, render_unit, unit_runs, workdir


def test_a_put_back_reads_the_venv_systemd_runs_not_its_percent_escaped_spelling():
    # fields.abs_path takes '%' (only quotes, '\\' and '$' are refused); systemd_quote doubles it for ExecStart, and
    # systemd's specifier expansion makes it one again. unit_runs gave '/opt/v%%1': the owner check at a put-back
    # (restore.owner_problem) asks about a venv that does not exist, reads 'not there' and lets the unit start
    # (unit_owner_problem returns None where the venv is missing), whoever owns /opt/v%1 now; in_unit_venv patches
    # the wrong (missing) venv too
    unit = render_unit(UnitSpec(playbook="p", rung="r", release="x", user="root", workdir=workdir("root"),
                                env_file="/etc/fleet/sglang.env", argv=["/opt/v%1/bin/python", "-m", "sglang"],
                                env={}))
    assert unit_runs(unit) == ("root", "/opt/v%1")  # before: ('root', '/opt/v%%1')


def test_relative_entries_of_what_the_unit_loads_are_judged_where_they_lead():
    # a root unit works in / (WorkingDirectory=/): PYTHONPATH=opt/shared is /opt/shared to python (sys.path gets
    # '//opt/shared'), LD_PRELOAD=opt/x.so is /opt/x.so to ld.so. loaded() keeps only entries starting with '/':
    # these were never walked, and root imports what the owner of /opt/shared writes
    found = loaded([{"PYTHONPATH": "opt/shared", "LD_PRELOAD": "opt/x.so"}])
    assert found, found  # before: (): nothing judged, the deploy goes on


def test_an_empty_pythonpath_entry_is_the_working_folder_and_is_judged():
    # python puts the working folder on sys.path for an empty PYTHONPATH entry (PYTHONPATH=':/x' -> ['', cwd, '/x'])
    # and ld.so reads an empty LD_LIBRARY_PATH entry as '.': for a non-root unit (WorkingDirectory=-~) that is the
    # account's home, whoever may write it
    found = loaded([{"PYTHONPATH": "/opt/lib:", "LD_LIBRARY_PATH": ":/usr/local/cuda/lib64"}])
    assert len(found) > 2, found  # before: ('/opt/lib', '/usr/local/cuda/lib64')


def test_an_origin_relative_library_path_is_judged():
    # ld.so expands $ORIGIN (the program's folder: the venv python's real one, /usr/bin) in LD_LIBRARY_PATH and
    # LD_PRELOAD; the env file carries it as '\\$ORIGIN', systemd hands '$ORIGIN' over. Not starting with '/', it
    # was dropped: '$ORIGIN/../../home/ops/lib' is ops's folder, loaded by root
    found = loaded([{"LD_LIBRARY_PATH": "$ORIGIN/../../home/ops/lib"}])
    assert found, found  # before: ()


def test_a_path_the_server_runs_programs_from_counts_as_what_it_loads():
    # triton and flashinfer's JIT run a compiler found on PATH (or CC, CUDA_HOME/bin/nvcc) as the unit's user and
    # load what it builds: serve.env PATH=/home/ops/bin:/usr/bin on a root unit runs ops's `cc` as root at the
    # first compile. LOADS does not name PATH, CC, CXX or CUDA_HOME
    found = loaded([{"PATH": "/home/ops/bin:/usr/bin", "CC": "/home/ops/cc", "CUDA_HOME": "/home/ops/cuda"}])
    assert "/home/ops/bin" in found and "/home/ops/cc" in found and "/home/ops/cuda" in found, found  # before: ()


def test_a_library_path_is_split_as_ld_so_splits_it():
    # ld.so(8): LD_LIBRARY_PATH's items are separated by colons or semicolons. loaded() splits at ':' alone:
    # '/usr/lib;/home/ops/lib' is judged as one path that does not exist (nothing refused: /usr is root's), and
    # ld.so searches /home/ops/lib: root loads ops's libraries
    found = loaded([{"LD_LIBRARY_PATH": "/usr/lib;/home/ops/lib"}])
    assert "/home/ops/lib" in found, found  # before: ('/usr/lib;/home/ops/lib',)


def test_a_library_path_with_a_dynamic_string_token_is_refused_not_judged_literally():
    # ld.so expands $LIB (lib/x86_64-linux-gnu on Debian, lib64 elsewhere) and $PLATFORM in LD_LIBRARY_PATH and
    # LD_PRELOAD; '/opt/$LIB' was judged as a missing /opt/$LIB (its folders root's: nothing refused), while
    # /opt/lib/x86_64-linux-gnu (ops's) is what root loads. Now such an entry is refused, as relative, empty and
    # $ORIGIN ones are: fleet cannot tell where it leads
    for value in ("/opt/$LIB", "$ORIGIN/../lib", "opt/lib", "/usr/lib:", "/usr/lib;;/x"):
        why = unclear([{"NCCL_P2P_DISABLE": "1"}, {"LD_LIBRARY_PATH": value}])
        assert why and why.startswith("env LD_LIBRARY_PATH names ") and "write plain absolute paths" in why, value
    assert unclear([{"LD_LIBRARY_PATH": "/usr/local/cuda/lib64;/usr/lib", "PYTHONPATH": "/opt/a:/opt/b"}]) is None


def test_a_put_back_whose_venv_is_gone_is_refused_before_anything_stops(monkeypatch):
    # unit_owner_problem returns None where the release's venv has no bin/python now (removed, renamed): the
    # rollback (refuse_owner) and restore.restore go on, stop the server that serves, put the files back, and the
    # unit fails 203/EXEC; known before anything stopped
    from fleet.deploy import preflight
    from fleet.host.serverchecks import MARK, VenvRun

    monkeypatch.setattr(preflight, "venv_run", lambda *a: VenvRun.parse(f"{MARK}\nno\n0\n0\n\n\n"))
    unit = "[Service]\nUser=root\nExecStart=/opt/old-env/bin/python -m sglang.launch_server\n"
    assert preflight.unit_owner_problem(None, None, unit, "") is not None  # type: ignore[arg-type]  # before: None
