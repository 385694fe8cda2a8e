"""What the many-host fault-point harness (test_fault_points_many.py) does on the hosts: one connection per host,
commands on several hosts at once, the hosts' state folders on small tmpfs mounts (so `full` really fills them),
a snapshot per host and the reset to it in one round trip each, and each host's state read in one round trip."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fleet.ssh.connect import open_connection
from fleet.ssh.remote import run

FOLDERS = ["/var/lib/fleet", "/etc/fleet", "/etc/systemd/system"]
FILL = "for d in " + " ".join(FOLDERS) + "; do head -c 64M /dev/zero > $d/.fleet-fault-fill 2>/dev/null; done; true"
UNFILL = "rm -f " + " ".join(f"{d}/.fleet-fault-fill" for d in FOLDERS)
SNAPSHOT, DIGEST = "/root/fleet-many-snapshot.tar", "/root/fleet-many-digest"
# fleet's files on a host (server and router units, env and key files): a change means a restart after the reset
FILES_DIGEST = ("find /etc/systemd/system /etc/fleet -maxdepth 1 -type f -name 'sglang*' 2>/dev/null | sort "
                "| xargs -r sha256sum")


class Hosts:
    """The harness's own connections, one per host (opened once; again when one broke), and commands on many
    hosts at once (one thread per host)."""

    def __init__(self, inventory):
        self.inventory, self.conns = inventory, {}

    def sh(self, name: str, command: str, timeout: float = 180) -> str:
        host = self.inventory.hosts[name]
        for again in (False, True):
            try:
                if self.conns.get(name) is None:
                    self.conns[name] = open_connection(host)
                return run(self.conns[name], host, command, timeout=timeout).stdout
            except Exception:
                if self.conns.get(name) is not None:
                    self.conns[name].close()
                self.conns[name] = None
                if again:
                    raise
        raise AssertionError("unreachable")

    def each(self, names: Iterable[str], command: Callable[[str], str] | str, timeout: float = 180) -> dict[str, str]:
        names = list(names)
        with ThreadPoolExecutor(max_workers=len(names)) as pool:
            outs = pool.map(lambda n: self.sh(n, command(n) if callable(command) else command, timeout), names)
            return dict(zip(names, outs, strict=True))

    def close(self) -> None:
        for conn in self.conns.values():
            if conn is not None:
                conn.close()
        self.conns.clear()


def mount_command() -> str:
    """Each state folder moved onto a 24 MiB tmpfs with what it held (as test_fault_points does)."""
    return "; ".join(f"mkdir -p {d} /root/.ffm{i} && cp -a {d}/. /root/.ffm{i}/ && "
                     f"mount -t tmpfs -o size=24m,mode=0755 tmpfs {d} && cp -a /root/.ffm{i}/. {d}/ && "
                     f"rm -rf /root/.ffm{i}" for i, d in enumerate(FOLDERS)) + "; systemctl daemon-reload"


def unmount_command(units: list[str]) -> str:
    stops = "; ".join(f"systemctl stop {u} 2>/dev/null" for u in units)
    return (f"{UNFILL}; {stops}; " + "; ".join(f"umount -l {d}" for d in reversed(FOLDERS))
            + f"; rm -f {SNAPSHOT} {DIGEST}; systemctl daemon-reload; true")


SNAP = f"cd / && tar -cpf {SNAPSHOT} {' '.join(d.lstrip('/') for d in FOLDERS)} && {FILES_DIGEST} > {DIGEST}"
# Back to the snapshot: fleet's files, releases, locks and leftovers go, the snapshot's come back; prints
# `changed` when the server's or router's files differ from the snapshot's (then the caller restarts them).
RESET = f"""{UNFILL}; changed=0; [ "$({FILES_DIGEST})" = "$(cat {DIGEST})" ] || changed=1
rm -rf /var/lib/fleet/* /var/lib/fleet/.[!.]* /etc/fleet/* /etc/fleet/.[!.]* /etc/systemd/system/sglang* \
  /etc/systemd/system/.sglang* /etc/systemd/system/*.wants/sglang*
cd / && tar -xpf {SNAPSHOT} && systemctl daemon-reload || {{ echo "reset failed"; exit 0; }}
[ $changed = 1 ] && echo changed; echo reset"""


def serving_command(port: int, key: str | None, text: str = "2+2=", address: str = "127.0.0.1") -> str:
    """Prints yes when the server at address:port answers the known question with 4."""
    auth = f"-H {shlex.quote('Authorization: Bearer ' + key)} " if key else ""
    body = json.dumps({"text": text, "sampling_params": {"max_new_tokens": 4, "temperature": 0}})
    # a JSON content type: the real router answers 415 to curl -d's form type (sglang itself takes either)
    return (f"curl -s -m 10 {auth}-H 'Content-Type: application/json' -d {shlex.quote(body)} "
            f"http://{address}:{port}/generate 2>/dev/null "
            "| grep -qE '\"text\": *\"[[:space:]]*4' && echo yes || echo no")


def health_command(url: str, key: str | None) -> str:
    auth = f"-H {shlex.quote('Authorization: Bearer ' + key)} " if key else ""
    return f"curl -s -o /dev/null -w '%{{http_code}}' -m 5 {auth}{shlex.quote(url + '/health')} 2>/dev/null || true"


def state_command(root: str, unit: str, unit_file: str, env_file: str) -> str:
    """One release store (`root`) and its unit on a host, in lines `kind rest` (see parse_state)."""
    return f"""cd {root} 2>/dev/null || {{ echo "current "; exit 0; }}
echo "lock $(test -d /var/lib/fleet/lock && head -c 300 /var/lib/fleet/lock/owner.json 2>/dev/null || echo none)"
echo "current $(readlink current)"
echo "active $(systemctl is-active {unit})"
echo "unit $(sha256sum < {unit_file} | cut -c1-64)"
echo "env $(sha256sum < {env_file} | cut -c1-64)"
for m in releases/*/manifest.json; do
  [ -f "$m" ] && echo "release $(dirname $m | cut -d/ -f2) $(tr -d '\\n' < $m)"
done
find /etc/systemd/system /etc/fleet {root} -maxdepth 1 \\( -name '.*.fleet-*' -o -name '.*.kept-by-fleet.*' \\) \\
  2>/dev/null | sed 's/^/temp /'
true"""


def parse_state(out: str) -> dict[str, Any]:
    st: dict[str, Any] = {"releases": {}, "temp": []}
    for line in out.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "release":
            rid, _, text = rest.partition(" ")
            try:
                st["releases"][rid] = json.loads(text)
            except ValueError:
                st["releases"][rid] = {"status": "UNREADABLE"}
        elif kind == "temp":
            st["temp"].append(rest)
        elif kind:
            st[kind] = rest.strip()
    st["current"] = st.get("current", "").rsplit("/", 1)[-1]
    return st


def store_broken(name: str, st: dict[str, Any], unit_file: str, env_file: str, allowed: Callable[[dict], bool],
                 after_next: bool, what: str = "") -> tuple[list[str], list[str]]:
    """What of the invariant one release store breaks: (broken now, leftovers a next run must clear)."""
    bad: list[str] = []
    who = f"{name}{what}"
    current = st["releases"].get(st["current"])
    if current is None:
        bad.append(f"{who}: `current` ({st['current'] or 'none'}) is no readable release")
    else:
        if not allowed(current):
            bad.append(f"{who}: current is {st['current']} ({current.get('playbook')}), neither what served nor "
                       "what was asked for")
        files = current.get("files", {})
        if (files.get(unit_file, {}).get("sha256"), files.get(env_file, {}).get("sha256")) != \
                (st.get("unit"), st.get("env")):
            bad.append(f"{who}: the unit or env file is not release {st['current']}'s")
        if current.get("status") != "ok":
            bad.append(f"{who}: current release {st['current']} is {current.get('status')}")
    if st.get("active") != "active":
        bad.append(f"{who}: the unit is {st.get('active')}")
    bad += [f"{who}: release {rid}'s manifest is unreadable" for rid, r in st["releases"].items()
            if r.get("status") == "UNREADABLE"]
    left = [f"{who}: release {rid} is still in progress" for rid, r in st["releases"].items()
            if r.get("status") == "in-progress"]
    if st.get("lock", "none") != "none":
        left.append(f"{name}: a lock is left: {st['lock'][:120]}")
    if after_next:
        bad += left + [f"{who}: temp file left: {t}" for t in st["temp"]]
    return bad, left
