"""What the root-run tests of the owner rule share: a marker file that records the uid of every process that ran a
user's code (root's uid there is the failure), and a root venv on the host's own python. Run here as root."""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

from fleet.host import programs as hostside

NOBODY = pwd.getpwnam("nobody")
REAL = os.path.realpath(hostside.SYSTEM_PYTHON)
_ASK = ("import os, site, sys; print('python%d.%d' % sys.version_info[:2]); print(os.path.dirname(os.__file__)); "
        "print(site.getsitepackages()[0])")
_HOST = (subprocess.run([hostside.SYSTEM_PYTHON, "-I", "-S", "-c", _ASK], capture_output=True, text=True).stdout
         .split("\n") if os.path.exists(hostside.SYSTEM_PYTHON) else ["", "", ""])
VERSION, STDLIB, SYSTEM_SITE = _HOST[0], Path(_HOST[1]), _HOST[2]  # the host's python's, not the one running pytest


def marker(top: Path) -> Path:
    ran = top / "ran"
    ran.touch()
    ran.chmod(0o666)
    return ran


def code(ran: Path) -> str:
    """One line of Python that appends the uid running it to `ran`."""
    return (f"import os; fd = os.open({str(ran)!r}, os.O_WRONLY | os.O_APPEND); os.write(fd, b'%d\\n' % os.getuid()); "
            "os.close(fd)\n")  # os.write: `open` is no builtin yet while encodings loads


def chown_tree(top: Path, uid: int, gid: int) -> None:
    for here, dirs, files in os.walk(top):
        for name in [here, *(os.path.join(here, n) for n in dirs + files)]:
            os.lchown(name, uid, gid)


def site_of(venv: Path) -> Path:
    return venv / "lib" / VERSION / "site-packages"


def venv_at(at: Path, cfg: str = "home = /usr/bin\ninclude-system-site-packages = false\n") -> Path:
    """A root venv at `at`: bin/python a link to the host's, one package."""
    (site_of(at) / "gated").mkdir(parents=True)
    (site_of(at) / "gated" / "__init__.py").write_text("")
    (at / "bin").mkdir()
    (at / "bin" / "python").symlink_to(hostside.SYSTEM_PYTHON)
    (at / "pyvenv.cfg").write_text(cfg)
    return at
