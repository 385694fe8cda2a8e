"""What a log says about the releases that wrote it (pure: text in, clues out).

Three kinds of clue, strongest first:
- a version the log states: `sglang==0.5.10`, sglang's check_env `sglang: 0.5.9`, a `sglang-0.5.9.dist-info` path,
  flashinfer's JIT workspace `~/.cache/flashinfer/0.6.3/120a/...`;
- traceback frames inside an installed package (`File ".../site-packages/sglang/srt/managers/scheduler.py", line
  2345, in event_loop` and the source line Python prints under it): only a release with that text at that line fits;
- the server arguments sglang echoes at start (`server_args=ServerArgs(model_path=...)` up to 0.5.x,
  `server_args={'model_path': ...}` later): every field it names is a flag the release must have.

fleet/logs/releasefit.py matches the clues against the releases of the upstream corpus.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fleet.logs.normalise import normalise

PACKAGES = {"sglang": "sglang", "flashinfer": "flashinfer-python"}  # import name -> distribution
_V = r"(\d+\.\d+\.\d+(?:\.post\d+|rc\d+|\.dev\d+)?)"
_STATED = (
    ("sglang", re.compile(rf"(?<![\w-])sglang(?:==|-(?=\d)|\s*:\s+|\s+version:?\s+v?){_V}(?![\w.])", re.I)),
    ("flashinfer-python", re.compile(
        rf"(?<![\w-])flashinfer(?:[-_]python)?(?:==|-(?=\d)|\s*:\s+|\s+version:?\s+v?){_V}(?![\w.])", re.I)),
    ("flashinfer-python", re.compile(rf"\.cache/flashinfer/{_V}/")),
)
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]*?/(?:site|dist)-packages/(?P<module>(?P<pkg>sglang|flashinfer)/[^"]+'
                    r'\.py))", line (?P<line>\d+), in (?P<function>[\w<>.]+)')
_ARGS = re.compile(r"\bserver_args=(?:ServerArgs\(|\{)")
_REPR_KEY = re.compile(r"([a-z_][a-z0-9_]*)=")
_DICT_KEY = re.compile(r"'([a-z_][a-z0-9_]*)':\s")
_MAX_FRAMES = 40  # distinct frames: a log of a thousand tracebacks says no more about its release than its first ones


@dataclass(frozen=True, slots=True)
class Frame:
    """One traceback frame in an installed sglang or flashinfer: where, and the source line Python printed."""

    package: str  # sglang | flashinfer-python
    module: str  # relative to site-packages, e.g. sglang/srt/managers/scheduler.py
    line: int
    function: str
    code: str | None  # the source line printed under the frame (stripped), when the log kept it


@dataclass(frozen=True, slots=True)
class ReleaseClues:
    stated: tuple[tuple[str, str], ...] = ()  # (distribution, version) the log names, in order, once each
    frames: tuple[Frame, ...] = ()
    server_args: tuple[str, ...] = ()  # the fields the echoed server arguments name, in order

    def stated_for(self, package: str) -> tuple[str, ...]:
        return tuple(v for p, v in self.stated if p == package)

    def frames_for(self, package: str) -> tuple[Frame, ...]:
        return tuple(f for f in self.frames if f.package == package)

    def __bool__(self) -> bool:
        return bool(self.stated or self.frames or self.server_args)


def clues(text: str) -> ReleaseClues:
    """The release clues of a whole log."""
    stated: dict[tuple[str, str], None] = {}
    frames: list[Frame] = []
    args: tuple[str, ...] = ()
    lines = [normalise(raw).text for raw in text.split("\n")]
    for i, line in enumerate(lines):
        for package, pattern in _STATED:
            for m in pattern.finditer(line):
                stated.setdefault((package, m.group(1)), None)
        frame = _FRAME.match(line)
        if frame is not None and len(frames) < _MAX_FRAMES:
            found = Frame(PACKAGES[frame["pkg"]], frame["module"], int(frame["line"]), frame["function"],
                          _code(lines, i))
            if found not in frames:  # the same frame in every rank's traceback says it once
                frames.append(found)
        if not args:
            echo = _ARGS.search(line)
            if echo is not None:
                args = server_arg_keys(line[echo.end() - 1:])
    return ReleaseClues(tuple(stated), tuple(frames), args)


def _code(lines: list[str], i: int) -> str | None:
    """The source line Python prints under frame `i`: the next non-blank line, indented, that is no frame."""
    for line in lines[i + 1:i + 3]:
        if not line.strip():
            continue
        code = line.strip()
        if line[:1].isspace() and not code.startswith('File "') and not set(code) <= set("^~ "):
            return code
        return None
    return None


def server_arg_keys(echo: str) -> tuple[str, ...]:
    """The top-level field names of an echoed `ServerArgs(a=1, b='x, y=2')` or `{'a': 1, ...}` (quoted text and
    nested brackets skipped; a line the journal cut short gives the fields up to the cut)."""
    echo = echo.removeprefix("ServerArgs")
    dict_form = echo.startswith("{")
    keys: list[str] = []
    depth = 0
    quote = ""
    i = 0
    key_at = 1  # where a top-level key may start
    while i < len(echo):
        c = echo[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "'\"" and not (dict_form and depth == 1 and i == key_at):
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth <= 0:
                break
        elif c == "," and depth == 1:
            key_at = i + 1
            while key_at < len(echo) and echo[key_at] == " ":
                key_at += 1
        if depth == 1 and i == key_at:
            m = (_DICT_KEY if dict_form else _REPR_KEY).match(echo, i)
            if m is not None:
                keys.append(m.group(1))
                i = m.end()
                continue
        i += 1
    return tuple(keys)
