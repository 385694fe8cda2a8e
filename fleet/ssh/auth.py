"""Which keys a connection offers, in OpenSSH's order, and a record of each one's fate for `-v` and errors.

OpenSSH (sshconnect2.c pubkey_prepare) offers agent keys that match a configured IdentityFile first, then the
agent's other keys (unless IdentitiesOnly), then the files no agent holds. With no IdentityFile it uses the
defaults of ssh_config(5) that exist. A key file with a passphrase is never prompted for: an agent holding
it is used, and otherwise the error names the file and says to `ssh-add` it. Nothing secret is recorded:
key files by path, agent keys by fingerprint and comment.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paramiko
from paramiko.auth_strategy import AuthSource, AuthStrategy, PrivateKey
from paramiko.ssh_exception import PasswordRequiredException, SSHException

from fleet.ssh import filestamp
from fleet.ssh.config import Endpoint


@dataclass
class Note:
    """One identity considered: what it is and what became of it."""

    what: str  # "agent key SHA256:… (comment)" or the file's path
    fate: str = "not tried"  # offered and accepted | refused by the server | passphrase-protected, … | …

    def ended(self, fate: str) -> None:
        self.fate = fate


class _Key(PrivateKey):
    def __init__(self, username: str, pkey: paramiko.PKey, note: Note):
        super().__init__(username=username)
        self.pkey, self.note = pkey, note

    def authenticate(self, transport: paramiko.Transport) -> list[str]:
        try:
            result: list[str] = super().authenticate(transport)
        except paramiko.AuthenticationException:
            self.note.ended("refused by the server")
            raise
        except Exception as exc:
            self.note.ended(f"failed ({str(exc).strip() or type(exc).__name__})")
            raise
        self.note.ended("accepted")
        return result

    def __repr__(self) -> str:
        return f"key({self.note.what})"


_keys: filestamp.PerContent[paramiko.PKey] = filestamp.PerContent(paramiko.PKey.from_path)


def _load_key(path: Path) -> paramiko.PKey:
    """The private key in path, parsed once per content: every host of a fleet offers the same file. Raises
    as paramiko.PKey.from_path does."""
    return _keys.get(path)[1]


def _public_base64(path: Path) -> str | None:
    """The public half of a key file without its passphrase: from FILE.pub, else the unencrypted file."""
    try:
        fields = Path(f"{path}.pub").read_text().split()
        if len(fields) >= 2:
            return fields[1]
    except OSError:
        pass
    try:
        return _load_key(path).get_base64()
    except (OSError, SSHException, ValueError, TypeError):  # TypeError: paramiko 4's "password-protected"
        return None


def _agent_label(key: paramiko.PKey) -> str:
    comment = getattr(key, "comment", "") or ""
    return f"agent key {key.fingerprint}" + (f" ({comment})" if comment else "")


@dataclass
class Strategy(AuthStrategy):
    """paramiko's auth_strategy for one hop; notes keeps what was offered, in order."""

    ep: Endpoint
    notes: list[Note] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(ssh_config=paramiko.SSHConfig())  # the endpoint carries what it needs
        self._agent: paramiko.Agent | None = None

    def authenticate(self, transport: paramiko.Transport) -> Any:
        """Agent keys sign through the agent's socket, so it stays open until authentication is over."""
        self._agent = paramiko.Agent()  # the agent at SSH_AUTH_SOCK; no keys without one
        try:
            return super().authenticate(transport)
        finally:
            self._agent.close()
            self._agent = None

    def get_sources(self) -> Iterator[AuthSource]:
        self.notes.clear()
        files = [Path(p) for p in self.ep.identity_files]
        if not self.ep.identities_named:
            files = [p for p in files if p.exists()]
        publics = {p: _public_base64(p) for p in files}
        held = list(self._agent.get_keys()) if self._agent is not None else []
        in_files = {b for b in publics.values() if b}
        agent_first = [k for k in held if k.get_base64() in in_files]
        agent_rest = [] if self.ep.identities_only else [k for k in held if k.get_base64() not in in_files]
        for key in agent_first + agent_rest:
            note = Note(_agent_label(key))
            self.notes.append(note)
            yield _Key(self.ep.user, key, note)
        agent_blobs = {k.get_base64() for k in held}
        for path in files:
            if publics[path] is not None and publics[path] in agent_blobs:
                continue  # offered through the agent above
            note = Note(str(path))
            self.notes.append(note)
            try:
                pkey = _load_key(path)
            except FileNotFoundError:
                note.ended("no such file")
                continue
            except (PasswordRequiredException, TypeError) as exc:
                # paramiko 4 says so with a TypeError for OpenSSH-format keys, older ones with its own exception
                if isinstance(exc, TypeError) and "password" not in str(exc):
                    raise
                note.ended("passphrase-protected and no ssh-agent holds it (run ssh-add on it)")
                continue
            except (OSError, SSHException, ValueError) as exc:
                note.ended(f"cannot be used ({str(exc).strip() or type(exc).__name__})")
                continue
            yield _Key(self.ep.user, pkey, note)

    def accepted(self) -> str | None:
        return next((n.what for n in self.notes if n.fate == "accepted"), None)

    def explain(self) -> str:
        """Why authentication failed, in one line."""
        if not self.notes:
            return ("no key to offer: no identity_file (inventory or ssh_config IdentityFile), no ssh-agent key "
                    "(SSH_AUTH_SOCK) and none of the default keys (~/.ssh/id_rsa, id_ecdsa, id_ed25519, …) exists")
        locked = [n for n in self.notes if n.fate.startswith("passphrase-protected")]
        if locked and all(n.fate != "refused by the server" for n in self.notes):
            return (f"key {locked[0].what} is passphrase-protected and no ssh-agent holds it; fleet never prompts "
                    f"for key passphrases: run `ssh-add {locked[0].what}` (SSH_AUTH_SOCK) and retry")
        listed = "; ".join(f"{n.what}: {n.fate}" for n in self.notes)
        if not any(n.fate == "refused by the server" or n.fate.startswith("failed") for n in self.notes):
            return f"no usable key for user {self.ep.user}: {listed}"
        return (f"authentication failed for user {self.ep.user}; offered: {listed}; check the right key is in "
                "that user's authorized_keys")
