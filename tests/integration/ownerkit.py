"""What the owner-rule sandbox tests share (test_putback_owner, test_owner_boot): a module of the server that the
`fleet` user is given, with a line that records the uid of every process that imports it; `inv recover` and what
it left on the host; and the host put back as it was before any deploy."""

from __future__ import annotations

import json
import shlex

from fleetcli import inv, sh

SITE = "/root/ml-env/lib/python3.11/site-packages/sglang/__init__.py"  # a module the server imports
UNDEPLOY = ("systemctl stop sglang 2>/dev/null; systemctl disable sglang 2>/dev/null; "
            "rm -rf /etc/systemd/system/sglang.service /etc/fleet/sglang.env /var/lib/fleet; "
            "systemctl daemon-reload; true")


class Plant:
    """SITE given to the `fleet` user with a line that writes RAN/<pid> = the uid it runs as."""

    def __init__(self, ran: str) -> None:
        self.ran = ran  # a folder the unit can write to and the test can read: not /tmp (PrivateTmp=yes)
        self.line = "\nimport os\nopen('" + ran + "/%d' % os.getpid(), 'w').write('%d\\n' % os.getuid())\n"

    def recorder(self) -> str:
        """Shell: RAN made empty, writable by every user."""
        return f"rm -rf {self.ran} && mkdir -m 1777 {self.ran}"

    def plant(self) -> str:
        """Shell: the recorder, and SITE kept aside, given the line and to `fleet`."""
        return (f"{self.recorder()} && cp -p {SITE} {SITE}.owner && printf %s {shlex.quote(self.line)} >> {SITE} && "
                f"chown fleet:fleet {SITE}")

    def undo(self) -> str:
        """Shell: SITE as it was, the recorder gone."""
        return f"! test -f {SITE}.owner || mv -f {SITE}.owner {SITE}; rm -rf {self.ran}; "

    def uids(self, inventory, host: str) -> list[str]:
        return sorted(set(sh(inventory, host, f"cat {self.ran}/* 2>/dev/null; true").split()))


def recovered(sandbox, inventory, host: str, plant: Plant) -> dict[str, object]:
    """`inv recover --host HOST --json`, and what it left: the uids the planted line saw, the unit's state, the
    stop mark."""
    out = inv(sandbox, "recover", "--host", host, "--json")
    return {"rc": out.returncode, "result": json.loads(out.stdout or "{}"), "err": out.stderr[-1500:],
            "uids": plant.uids(inventory, host),
            "active": sh(inventory, host, "systemctl is-active sglang; true").strip(),
            "mark": sh(inventory, host, "cat /var/lib/fleet/stopped.json 2>/dev/null; true")}
