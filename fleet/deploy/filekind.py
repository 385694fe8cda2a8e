"""Which other of fleet's files a file given as a playbook is (`inv check -p`, `inv deploy -p`): an inventory
given to `-p` was six schema errors, `model: required key is missing` first, where one line says what it is and
where it goes (as `-i` says of a playbook: `not an inventory file`)."""

from __future__ import annotations

from fleet.playbook import Playbook

_OTHER_KINDS = (  # the keys that tell another of fleet's files, and where it goes instead
    ({"defaults", "groups", "hosts", "wheelhouse"}, "an inventory file", "give it with -i/--inventory"),
    ({"applies_to", "variants", "post"}, "a patch set", "a playbook's rung names it in patches:, and inv "
                                         "check checks it there"),
    ({"rules"}, "a rule file", "inv check reads playbooks/rules/*.yaml on every run"),
    ({"areas", "classes", "phases", "counts", "outcomes"}, "one of fleet's own data files", "inv check reads "
                                                            "playbooks/sites, phases and outcomes on every run"),
    ({"inventory", "offline"}, "a site's fleet-site.yaml", "fleet reads it from the site's root"),
)
_ANY_OTHER = frozenset().union(*(marks for marks, _, _ in _OTHER_KINDS))


def other_kind(data: object) -> str | None:
    """What another of fleet's files given as a playbook is (None: a playbook, or nothing fleet knows): an inventory
    given to `-p` was six schema errors, `model: required key is missing` first."""
    if not isinstance(data, dict):
        return None
    keys = {str(k) for k in data} - {"name", "description"}
    if keys & set(Playbook.model_fields):
        return None
    for marks, what, instead in _OTHER_KINDS:
        if keys <= _ANY_OTHER and keys & marks:
            shown = ", ".join(f"{k}:" for k in list(data)[:4])
            return f"{what} (its keys are {shown}): {instead}"
    return None
