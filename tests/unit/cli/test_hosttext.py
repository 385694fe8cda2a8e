"""Text a host sent, drawn on an operator's terminal whose locale is strict UTF-8 (en_US.UTF-8: Python's stdout
then refuses lone surrogates)."""

from __future__ import annotations

import io
import json

from rich.console import Console
from rich.text import Text

from fleet.cli.hosttext import escape, visible

# A file name with a byte that is not UTF-8 (\xff), as a host program reports it: Python reads it as the lone
# surrogate \udcff, json.dumps writes "\udcff", fleet's json.loads gives it back.
FROM_HOST = json.loads(json.dumps("/venv/lib/site-packages/" + b"\xff\x1b[2J".decode("utf-8", "surrogateescape")
                                  + " is writable by others than its owner"))


def test_a_non_utf8_file_name_a_host_sent_draws_on_a_strict_utf8_terminal():
    """Fails before: `inv patch` on a host whose venv holds such a file died drawing its error, UnicodeEncodeError
    'surrogates not allowed' (reproduced on sandbox dev3 under PYTHONIOENCODING=utf-8:strict)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    Console(file=out, width=200, color_system=None).print(Text.from_markup(f"error: {escape(FROM_HOST)}"))
    drawn = out.buffer.getvalue().decode()  # type: ignore[attr-defined]
    assert "/site-packages/\\udcff\\x1b[2J is writable" in drawn, drawn


def test_a_surrogate_is_shown_as_its_escape_as_a_control_is():
    assert visible("a\udcffb\ud800") == "a\\udcffb\\ud800"
