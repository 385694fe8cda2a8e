"""What a host must offer before a server starts on it, asked in one command each: the flags its sglang knows,
a model folder that is whole, a port free or held by the unit itself. The verdicts are fleet.deploy.preflight's."""

from __future__ import annotations

import shlex

from fabric import Connection

from fleet.host import programs as hostside
from fleet.host.service import sh
from fleet.inventory import Host

_MODEL_CHECK = (
    "import json,os,sys\n"
    "p=sys.argv[1]\n"
    "if not os.path.isfile(os.path.join(p,'config.json')): print('no config.json in '+p); sys.exit()\n"
    "i=os.path.join(p,'model.safetensors.index.json')\n"
    "if os.path.isfile(i):\n"
    " m=sorted(set(json.load(open(i)).get('weight_map',{}).values()))\n"
    " miss=[f for f in m if not os.path.isfile(os.path.join(p,f))]\n"
    " if miss: print('%d of %d shards missing in %s, e.g. %s'%(len(miss),len(m),p,miss[0]))\n"
)


def has_python(conn: Connection, host: Host, venv: str) -> bool:
    """The venv's bin/python is there and runs (what the unit's ExecStart names)."""
    python = shlex.quote(venv.rstrip("/") + "/bin/python")
    return sh(conn, host, f"test -x {python} && echo yes || true").strip() == "yes"


def launch_help(conn: Connection, host: Host, venv: str) -> str:
    """`sglang.launch_server --help` of the venv, as its owner where that is not root (as_owner.py); "" when it
    does not run."""
    argv = (f"{venv.rstrip('/')}/bin/python", "-m", "sglang.launch_server", "--help")
    return sh(conn, host, hostside.as_owner(venv, *argv) + " 2>/dev/null || true")


def model_check(conn: Connection, host: Host, path: str) -> str:
    """What is missing of the model folder (config.json, shards its index names), "" when it is whole; read as root
    by the host's own python, checked (hostside.checked_python), never a python3 a PATH finds first."""
    return sh(conn, host, hostside.checked_python("-c", _MODEL_CHECK, path)).strip()


def port_users(conn: Connection, host: Host, port: int, unit: str) -> str:
    """The first listener on `port` that is not a process of `unit` ("" when there is none)."""
    script = (f"out=$(ss -Hltnp 'sport = :{int(port)}' 2>/dev/null); [ -z \"$out\" ] && exit 0; "
              f"for p in $(echo \"$out\" | grep -o 'pid=[0-9]*' | cut -d= -f2); do "
              f"grep -q {shlex.quote('/' + unit + '.service')} /proc/$p/cgroup 2>/dev/null && exit 0; done; "
              f"echo \"$out\" | head -n 1")
    return sh(conn, host, script).strip()
