"""A command's inputs, checked before any host is contacted: the playbook (with the rule classes and patch
sets it may name) and its secrets, resolved locally; values never reach the output."""

from __future__ import annotations

import os
from pathlib import Path

from fleet import logrules, patchsets, playbook
from fleet.errors import InputError
from fleet.render import API_KEY


def load_playbook(name: str) -> tuple[playbook.Playbook, Path]:
    path = playbook.resolve(name)
    classes = {c.value for c in logrules.LogClass}
    return playbook.load(path, known_classes=classes, known_patches=set(patchsets.available())), path


def secrets_for(book: playbook.Playbook) -> dict[str, str]:
    """Resolve secret references locally; values never reach the output."""
    ref = book.serve.api_key
    if ref is None:
        return {}
    if ref.env:
        value = os.environ.get(ref.env, "").strip()
        where = f"serve.api_key.env: ${ref.env}"
        if not value:
            raise InputError(f"playbook {book.name}: {where} is not set or blank (an empty key turns auth off)")
    else:
        where = f"serve.api_key.file: {ref.file}"
        try:
            value = Path(str(ref.file)).expanduser().read_bytes().decode("utf-8").strip()
        except OSError as exc:
            raise InputError(f"playbook {book.name}: serve.api_key.file: {exc.strerror}: {ref.file}") from None
        except UnicodeDecodeError:
            raise InputError(f"playbook {book.name}: {where}: not UTF-8 text") from None
        if not value:
            raise InputError(f"playbook {book.name}: {where}: the file holds no key (an empty key turns auth off)")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in value):
        raise InputError(f"playbook {book.name}: {where}: the key has spaces or control characters")
    return {API_KEY: value}
