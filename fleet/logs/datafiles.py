"""The files that say how a server's log is read (playbooks/rules/*.yaml, playbooks/sites/classes.yaml,
playbooks/phases/startup.yaml), checked as a deploy's log watcher loads them: every problem, one line each.
`inv check` reports them and a deploy refuses them before any host is contacted: `inv check` said 0 errors
over a broken rule, and the deploy stopped the server, failed its start on the rule file, and its put-back too."""

from __future__ import annotations

from fleet.errors import InputError
from fleet.logs import bysite, phases, rules


def problems() -> list[str]:
    """Every problem of the log-reading files, one line each naming file and line ([]: they load)."""
    found: list[str] = []
    try:
        rules.default_rules()  # loaded once a process (what the watcher then uses): a deploy starts no slower
    except rules.RuleFileError as exc:
        found += exc.problems
    for load in (bysite.default_classes, lambda: phases.load(phases.PHASES_FILE),
                 lambda: phases.load_counts(phases.PHASES_FILE)):
        try:
            load()
        except InputError as exc:
            found += [line for line in str(exc).splitlines() if line not in found]
    return found


def refuse_broken() -> None:
    """InputError naming the first problem (and how many more) where a log-reading file does not load."""
    found = problems()
    if found:
        more = len(found) - 1
        raise InputError(f"{found[0]}" + (f" (and {more} more: inv check)" if more else "")
                         + "; nothing was contacted")
