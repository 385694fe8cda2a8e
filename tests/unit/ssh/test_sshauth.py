"""fleet.ssh.auth without a server: which key files a connection would offer, in which order, and the one line
it says when none can be used (real keys made by ssh-keygen; no agent)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fleet.ssh.auth import Strategy
from fleet.ssh.config import DEFAULT_IDENTITIES, Endpoint


def keygen(path: Path, passphrase: str = "") -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-f", str(path)], check=True)
    return path


def endpoint(files: list[str], named: bool) -> Endpoint:
    return Endpoint(alias="h", hostname="h", port=22, user="ops", identity_files=tuple(files),
                    identities_named=named)


def test_the_defaults_that_exist_are_offered_in_openssh_order(tmp_path):
    files = [str(tmp_path / Path(p).name) for p in DEFAULT_IDENTITIES]
    keygen(Path(files[3]))  # id_ed25519
    keygen(Path(files[0]))  # id_rsa's name, an ed25519 key: the name decides the order, not the type
    strategy = Strategy(endpoint(files, named=False))
    offered = [s.note.what for s in strategy.get_sources()]
    assert offered == [files[0], files[3]]


def test_a_passphrase_key_without_its_pub_file_and_no_agent_is_named_in_one_line(tmp_path):
    locked = keygen(tmp_path / "id_ed25519", passphrase="not this one")
    Path(f"{locked}.pub").unlink()  # nothing to match an agent key against without the passphrase
    strategy = Strategy(endpoint([str(locked)], named=True))
    assert list(strategy.get_sources()) == []
    assert strategy.notes[0].fate.startswith("passphrase-protected and no ssh-agent holds it")
    message = strategy.explain()
    assert message.startswith(f"key {locked} is passphrase-protected and no ssh-agent holds it")
    assert "not this one" not in message and "\n" not in message


def test_a_named_key_that_does_not_exist_says_so(tmp_path):
    strategy = Strategy(endpoint([str(tmp_path / "nope")], named=True))
    assert list(strategy.get_sources()) == []
    assert strategy.explain() == f"no usable key for user ops: {tmp_path / 'nope'}: no such file"
