"""Found by review (h-adv15, stop 54) of what a unit's environment has it load (as_owner.py --who VENV PATH...,
owner.venv_owner(also=)): an LD_LIBRARY_PATH folder is walked as if it were a site folder, whole and with its .pth
files read as python reads a site folder's. ld.so takes the folder's files (and its glibc-hwcaps/, tls/, x86_64/
subfolders), never a .pth; python never reads a .pth outside a site folder. LD_LIBRARY_PATH=/usr/local/lib, as
common as it gets, holds python3.X/dist-packages: any .pth with an import line there (coloredlogs', an old easy-
install.pth) refuses the deploy of a root host whose every file is root's ('runs code whose effect fleet cannot
read'); on this machine /usr/local/lib is refused so. Run here as root. Fails on dbbc9f2."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from uidmark import venv_at

from fleet.host import programs as hostside

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="root's files judged as root's: needs root"),
              pytest.mark.skipif(not Path(hostside.SYSTEM_PYTHON).exists(), reason="no /usr/bin/python3 here")]


def test_a_library_folder_of_roots_with_a_python_site_below_it_is_roots(top):
    venv = venv_at(top / "venv")
    lib = top / "usr-local-lib"  # as /usr/local/lib: libraries, and python's dist-packages below
    site = lib / "python3.11" / "dist-packages"
    site.mkdir(parents=True)
    (lib / "libnccl.so.2").write_bytes(b"\x7fELF")
    (site / "coloredlogs.pth").write_text("import coloredlogs; coloredlogs.auto_install()\n")
    done = subprocess.run(["sh", "-c", hostside.owner_of_venv(str(venv), str(lib))], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "", (done.returncode, done.stdout, done.stderr)
    # before: exit 77, 'fleet runs nothing of .../venv as root: .../coloredlogs.pth runs code whose effect fleet
    # cannot read (an import line)': the deploy refused (PREFLIGHT) on a host where root alone may change anything
