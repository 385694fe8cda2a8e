"""A secret named, never written: `{env: NAME}` (fleet's own environment) or `{file: PATH}` (a local file),
resolved on the machine fleet runs on, before any host is contacted. The value never reaches the output."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, model_validator

from fleet.errors import InputError


class SecretRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env: str | None = None
    file: str | None = None

    @model_validator(mode="after")
    def _one(self) -> SecretRef:
        if (self.env is None) == (self.file is None):
            raise ValueError("give exactly one of env or file")
        return self

    def where(self, key: str) -> str:
        return f"{key}.env: ${self.env}" if self.env else f"{key}.file: {self.file}"


def resolve(ref: SecretRef, owner: str, key: str, what: str = "secret", blank: str = "") -> str:
    """The value, stripped of surrounding whitespace; InputError naming `owner` and `key` when it is unset,
    unreadable, not UTF-8, blank (`blank` says why that matters), or holds control characters."""
    where = f"{owner}: {ref.where(key)}"
    if ref.env:
        value = os.environ.get(ref.env, "").strip()
        if not value:
            raise InputError(f"{where} is not set or blank{blank}")
    else:
        try:
            value = Path(str(ref.file)).expanduser().read_bytes().decode("utf-8").strip()
        except OSError as exc:
            raise InputError(f"{owner}: {key}.file: {exc.strerror}: {ref.file}") from None
        except RuntimeError:  # Path('~nosuchuser/x').expanduser()
            raise InputError(f"{where}: no such user here to take ~ from") from None
        except UnicodeDecodeError:
            raise InputError(f"{where}: not UTF-8 text") from None
        if not value:
            raise InputError(f"{where}: the file holds no {what}{blank}")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise InputError(f"{where}: the {what} has control characters")
    return value


MASK = "<secret>"  # what fleet shows in place of a secret's value
# Words that make a variable's name say it holds a secret (HF_TOKEN, AWS_SECRET_ACCESS_KEY, OPENAI_API_KEY,
# PGPASSWORD, ...): a word of the name, or the end of one for the longer words.
SECRET_WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASS", "PASSWD", "CREDENTIAL", "CREDENTIALS", "AUTH",
                "APIKEY")
_ENDINGS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "CREDENTIALS")


def is_secret_name(name: str, extra: Iterable[str] = ()) -> bool:
    """Whether a variable named `name` holds a secret by its name (SECRET_WORDS) or by `extra` (a playbook's own
    list, exact names)."""
    if name in extra:
        return True
    words = [w for w in re.split(r"[^A-Za-z0-9]+", name.upper()) if w]
    return any(w in SECRET_WORDS or w.endswith(_ENDINGS) for w in words)


# A URL's userinfo (https://user:token@host/...): up to the last '@' of the run, so an unencoded '@' or '/' in
# a password is masked too (a path with '@' in it is masked a little too far, never too short)
_USERINFO = re.compile(r"""(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<info>[^\s'"<>()]*)@""")


def without_userinfo(text: str) -> str:
    """`text` with each URL's password masked (`https://user:***@host/simple`), a lone user or token given
    as userinfo (`https://TOKEN@host`) masked whole: an index URL can be written anywhere fleet says it."""
    def mask(m: re.Match[str]) -> str:
        user, colon, _secret = m["info"].partition(":")
        return f"{m['scheme']}{user}:***@" if colon and "/" not in user else f"{m['scheme']}***@"
    return _USERINFO.sub(mask, text)
