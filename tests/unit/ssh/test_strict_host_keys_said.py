"""ssh_config's StrictHostKeyChecking, which fleet does not follow, said where it refuses an unknown key (issue 46,
finding 10, a newcomer's form, h-new22): a lab's ~/.ssh/config says `StrictHostKeyChecking accept-new` (or `no`), so
`ssh sbx0` logs in and records the key without a word, while fleet refused it as `first contact?`: the operator's ssh
worked and fleet's did not, with nothing saying why they differ."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.ssh import config as sshconfig


@pytest.mark.parametrize(("value", "said"), [("accept-new", True), ("no", True), ("off", True), ("yes", False),
                                              ("ask", False), (None, False)])
def test_an_endpoint_knows_its_strict_host_key_checking_and_says_it_where_ssh_would_not_ask(tmp_path: Path, value,
                                                                                           said):
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host sbx0\n  HostName 10.0.0.1\n" + (f"  StrictHostKeyChecking {value}\n" if value else ""))
    ep = sshconfig.endpoint(sshconfig.load(str(cfg), "sbx0"), "sbx0")
    clause = sshconfig.strict_said(ep)
    if said:
        assert clause == (f" (ssh_config's StrictHostKeyChecking {value}, which `ssh` follows, is not fleet's: it "
                          "records a new key only with --accept-new-host-keys)"), clause
    else:
        assert clause == ""
