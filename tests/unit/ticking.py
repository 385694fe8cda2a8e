"""A Progress for tests of long steps: it keeps every message, and `ticked` is set at the first Live one (where the
step stands, said while it goes on)."""

from __future__ import annotations

import threading

from fleet.progress import Live


class Said(list[object]):
    def __init__(self) -> None:
        super().__init__()
        self.ticked = threading.Event()

    def __call__(self, message: object) -> None:
        self.append(message)
        if isinstance(message, Live):
            self.ticked.set()
