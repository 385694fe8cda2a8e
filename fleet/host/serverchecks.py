"""What a host must offer before a server starts on it, asked in one command each: the flags its sglang knows,
a model folder that is whole, a port free or held by the unit itself. The verdicts are fleet.deploy.preflight's."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

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


@dataclass(frozen=True)
class VenvRun:
    """Who would run the venv's code: whether its bin/python is there (what the unit's ExecStart names), who owns
    it by owner.py's rule, and the uid of the unit's user."""

    exists: bool
    owner: str | None  # as_owner.py --who's `uid:gid`, "" for root; None where the rule refused or did not answer
    owner_name: str  # that uid's account name, "" where it has none
    said: str  # the rule's refusal or the reason it did not answer, one line; "" where it answered
    user_uid: int | None  # the unit's user's uid, None: no such account on the host

    @classmethod
    def parse(cls, text: str) -> VenvRun:
        """After the marker line (what a login banner or profile printed before it is not the answer): `exists`,
        the user's uid (or -), the rule's exit, the owner's name, then what the rule printed. Anything else, or
        digits that are not ASCII ones, reads as no answer."""
        lines = text.splitlines()
        lines = [*lines[lines.index(MARK) + 1:], "", "", "", ""] if MARK in lines else ["", "", "?", "", ""]
        exists, uid, code, name, said = lines[0] == "yes", lines[1], lines[2], lines[3], lines[4:]
        answer = next((line for line in reversed(said) if line.strip()), "")  # a traceback's last line says why
        owner = answer.split(":")
        ok = code == "0" and (answer == "" or (len(owner) == 2 and all(map(_number, owner))))
        return cls(exists, answer if ok else None, name if ok else "",
                   "" if ok else (answer or f"no answer (exit {code or '?'})")[:300],
                   int(uid) if _number(uid) else None)


def _number(text: str) -> bool:
    return text.isascii() and text.isdigit()


MARK = "fleet-venv-run"


def venv_run(conn: Connection, host: Host, venv: str, user: str, also: tuple[str, ...] = ()) -> VenvRun:
    """VenvRun of `venv` for a unit run as `user` (an account name, fleet.fields.UserName), one round trip; `also`
    (files and folders the unit's environment has its python load) counts as part of the venv."""
    root = venv.rstrip("/") or "/"
    return VenvRun.parse(sh(conn, host, (
        f"echo {MARK}; if test -x {shlex.quote(root + '/bin/python')}; then echo yes; else echo no; fi; "
        f"id -u -- {shlex.quote(user)} 2>/dev/null || echo -; "
        f"o=$({hostside.owner_of_venv(root, *also)} 2>&1); echo $?; "
        "n=; case \"$o\" in [0-9]*:[0-9]*) n=$(id -un -- \"${o%%:*}\" 2>/dev/null) ;; esac; "
        "printf '%s\\n%s\\n' \"$n\" \"$o\""), check=False))


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
