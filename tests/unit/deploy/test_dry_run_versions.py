"""`deploy --dry-run` says the versions the deploy moves the host between (issue 46, finding 1; newcomer h-new20):
sbx1 served llama-pinned-0.5.23 (sglang 0.5.23 in its pins' venv); `inv deploy -p llama-replicas --dry-run` said
only that the unit file differs, and the deploy then said `versions: sglang 0.5.23 -> 0.5.9, flashinfer-python
0.7.2 -> 0.6.3, torch 2.14.1+cu130 -> 2.9.1+cu130`: a downgrade the dry run kept quiet about."""

from __future__ import annotations

from fleet.deploy import ladder
from fleet.host.releases import Release


def serving(versions: dict[str, str]) -> Release:
    return Release(id="r-old", host="sbx1", playbook="llama-pinned-0.5.23", playbook_sha256="0" * 64,
                   created="then", status="ok", config={"rung": "plain"}, facts={"versions": versions})


NOW = {"sglang": "0.5.23", "flashinfer-python": "0.7.2", "torch": "2.14.1+cu130", "driver": "570.172.08"}
THEN = {"sglang": "0.5.9", "flashinfer-python": "0.6.3", "torch": "2.9.1+cu130", "driver": "570.172.08"}


def test_a_downgrade_is_said_as_the_deploy_says_it():
    assert ladder.versions_moved(serving(NOW), THEN) == (
        "versions: sglang 0.5.23 -> 0.5.9, flashinfer-python 0.7.2 -> 0.6.3, torch 2.14.1+cu130 -> 2.9.1+cu130 "
        "(what serves now -> what the deploy would serve)\n")


def test_the_same_versions_or_no_record_say_nothing():
    assert ladder.versions_moved(serving(NOW), NOW) == ""
    assert ladder.versions_moved(serving({}), THEN) == ""
    assert ladder.versions_moved(None, THEN) == ""
