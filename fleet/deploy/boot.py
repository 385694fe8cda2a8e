"""What comes back after a power cut or a reboot: the unit of the host's current release, enabled (started at boot
by its [Install] section's WantedBy=), and no other unit a fleet run wrote. Settled at the end of every run that
may write a unit (fleet.deploy.hostrun), once what serves is settled: a deploy that served, a rollback, the
put-back of a known-good release after a failed attempt (same unit: the good files, enabled); a first deploy that
served nothing leaves its unit disabled, so a reboot never starts an attempt that failed. The playbook router's unit
(fleet.multihost.router) is settled the same way by every router run, from its own releases under
/var/lib/fleet/router (`Serving(unit, ROUTER_ROOT)`): a rebooted router's host routes to the replicas again.

`plan` decides (pure); `settle` reads the host and does it."""

from __future__ import annotations

from dataclasses import dataclass

from fleet.deploy.restore import unit_of
from fleet.host.releases import ROOT, ReleaseStore
from fleet.host.session import HostSession

ENABLED = "enabled"
# What `systemctl is-enabled` says of a unit that a boot starts: enabled, or only for this boot (gone at the next).
STARTS_AT_BOOT = frozenset({ENABLED, "enabled-runtime"})


@dataclass(frozen=True)
class Serving:
    """A unit a run settles for boot, and the release store whose current release says what a boot starts."""

    unit: str  # the unit whose files the run may write
    root: str = ROOT  # the host's own releases; the router's are under ROUTER_ROOT


@dataclass(frozen=True)
class BootPlan:
    """The units to enable and to disable, and what to say of what is left as it is (a unit masked by hand)."""

    enable: str | None = None
    disable: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def changes(self) -> bool:
        return self.enable is not None or bool(self.disable)


def plan(serving: str | None, written: str, states: dict[str, str]) -> BootPlan:
    """`serving`: the current release's unit (None: no current release, the host serves nothing fleet deployed);
    `written`: the unit whose files the run may have written; `states`: `systemctl is-enabled` of both. Pure."""
    notes: list[str] = []
    enable = None
    if serving is not None:
        state = states.get(serving, "")
        if state.startswith("masked"):  # someone masked it on purpose: never undone by fleet
            notes.append(f"{serving} is {state}: left as it is, so it will not start after a reboot "
                         f"(`systemctl unmask {serving}` and the next deploy enables it)")
        elif state != ENABLED:  # enabled-runtime is forgotten at the next boot
            enable = serving
    disable = tuple(u for u in dict.fromkeys([written]) if u != serving and states.get(u, "") in STARTS_AT_BOOT)
    return BootPlan(enable, disable, tuple(notes))


def settle(s: HostSession, written: str, root: str = ROOT) -> list[str]:
    """The host made to start the unit of the current release under `root` at boot, and no other unit `written`
    by fleet; what changed or was left, said in a line each. Raises what the session raises (the caller says it)."""
    current = ReleaseStore.on(s, root).current()
    serving = unit_of(current) if current is not None else None
    units = list(dict.fromkeys([u for u in (serving, written) if u]))
    states = s.unit_file_states(units)
    todo = plan(serving, written, states)
    said = list(todo.notes)
    for unit in todo.disable:
        s.disable_unit(unit)
        said.append(f"disabled {unit} ({'no release serves from it' if serving else 'nothing fleet deployed serves'}"
                    "): a reboot does not start it")
    if todo.enable:
        s.enable_unit(todo.enable)
        said.append(f"enabled {todo.enable} (it was {states.get(todo.enable) or 'not enabled'}): release "
                    f"{current.id if current else '?'} comes back after a reboot")
    return said
