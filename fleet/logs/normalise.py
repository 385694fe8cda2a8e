"""Normalising a log line: strip colour codes and transport/logger prefixes, so that a line from the
journal, a Ray or vLLM worker, or a tensor-parallel rank classifies exactly as its bare text would."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_TS = r"\d\d:\d\d:\d\d(?:[.,]\d+)?"
_LEVEL = r"(?:TRACE|DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|CRITICAL|FATAL)"

# Transport prefixes are on every line of a record (journald, worker tags): they say nothing about where
# a record starts. Logger headers are only on a record's first line, so they do.
_TRANSPORT = (
    # journalctl -o short / short-iso / short-precise: "Feb 23 10:00:00 host python3[1234]: "
    re.compile(rf"(?:[A-Z][a-z]{{2}} [ \d]\d {_TS}|\d{{4}}-\d\d-\d\dT{_TS}(?:Z|[+-]\d\d:?\d\d)?) "
               r"\S+ [^\s:\[]+(?:\[\d+\])?: "),
    # Ray / vLLM workers: "(Worker_PP0 pid=38385) ", "(pid=12) ", "(RayWorkerWrapper pid=9, ip=10.0.0.2) ",
    # "(VllmWorker rank=0 pid=2210) "
    re.compile(r"\((?:[\w.\-]+(?:=\w+)? )*pid=\d+(?:, ip=[\w.:\-]+)?\) ?"),
    # docker compose: "sglang-1  | "
    re.compile(r"[a-z0-9][\w.\-]*-\d+\s+\| "),
)
_HEADERS = (
    # sglang: "[2026-02-23 10:00:00 TP3] ", "[2026-02-23 10:00:00 DP0 TP3] ", "[19:01:01 TP0] ",
    # "[06-09 17:46:28] ", and a rank tag after the bracket: "[2026-02-23 10:00:00] TP3 "
    re.compile(rf"\[(?:\d{{4}}-\d\d-\d\d[ T]|\d\d-\d\d )?{_TS}(?: [A-Z][A-Z_]*\d+)*\]"
               r"(?: [A-Z]{2}\d+:?)* ?"),
    # python logging as flashinfer sets it up:
    # "2025-11-11 06:41:27,319 - WARNING - autotuner.py:485 - flashinfer.jit: "
    re.compile(rf"\d{{4}}-\d\d-\d\d[ T]{_TS} - {_LEVEL} - [\w.\-]+:\d+ - (?:[\w.]+: )?"),
    # vLLM: "ERROR 05-29 16:44:33 [multiproc_executor.py:874] " and older "INFO 05-13 08:48:35 utils.py:132] "
    re.compile(rf"{_LEVEL} \d\d-\d\d {_TS} \[?[\w.\-]+:\d+\] ?"),
    # glog (Triton server, TensorRT-LLM): "E0425 10:43:31.433641 841 backend_model.cc:691] "
    re.compile(rf"[IWEF]\d{{4}} {_TS} +\d+ [\w.\-]+:\d+\] ?"),
    # PyTorch c10: "[rank1]:[W924 19:01:01.260102563 CudaIPCTypes.cpp:16] "
    re.compile(r"\[rank\d+\]:\[[IWEF][^\]]*\] ?"),
    # NCCL: "node155:3052669:3052713 [1] " (the "NCCL INFO" that follows is kept: rules read it)
    re.compile(r"[\w.\-]+:\d+:\d+ \[\d+\] (?=NCCL )"),
    # uvicorn / logging.basicConfig: "INFO:     ", "WARNING:root:"
    re.compile(rf"{_LEVEL}:(?:[\w.]+:|\s+)"),
    # generic: "2026-02-23T10:00:00.123Z ", "2026-02-23 10:00:00,123 ERROR ", "2026-02-23 10:00:00 | INFO | "
    re.compile(rf"\d{{4}}-\d\d-\d\d[ T]{_TS}(?:Z|[+-]\d\d:?\d\d)?(?: \|)? (?:{_LEVEL}\b:? ?(?:\| )?)?"),
)
# One anchored alternation per kind: a single match() per pass instead of one per prefix shape.
_PREFIX = re.compile("|".join(f"(?P<t{i}>{p.pattern})" for i, p in enumerate(_TRANSPORT))
                     + "|" + "|".join(f"(?P<h{i}>{p.pattern})" for i, p in enumerate(_HEADERS)))
# Unprefixed lines that still begin a record of their own (systemd about the unit, NCCL's banner).
_RECORD_START = re.compile(r"[\w@.\-]+\.(?:service|scope|socket): |NCCL version |\[Gloo\] |terminate called ")
_MAX_PASSES = 6


@dataclass(frozen=True, slots=True)
class Line:
    text: str  # the bare line: prefixes and colour gone, indentation after the prefixes kept
    header: bool  # it began with a logger header (or a record-starting shape): a new record starts here


def normalise(raw: str) -> Line:
    """Strip ANSI codes and any stack of journald/worker/logger prefixes from one line."""
    text = _ANSI.sub("", raw).rstrip("\r\n").replace("\r", " ").rstrip()
    header = False
    for _ in range(_MAX_PASSES):
        m = _PREFIX.match(text)
        if m is None or not m.end():
            break
        text = text[m.end():]
        header = header or (m.lastgroup or "").startswith("h")
    return Line(text, header or bool(_RECORD_START.match(text)))
