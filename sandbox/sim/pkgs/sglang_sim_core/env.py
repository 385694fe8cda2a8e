"""Simulator settings, all from the environment (the unit's environment on a sandbox host)."""

from __future__ import annotations

import os
import time
from pathlib import Path

DEFAULT_RUN_DIR = "/run/fleet-sim"
DEFAULT_PROFILE_DIR = "/usr/share/fleet-sandbox/profile"


def _float_env(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        return default
    return value if value >= 0 else default


def time_scale() -> float:
    """SGLANG_SIM_TIME_SCALE: multiplies every modelled phase duration (1.0 = realistic minutes)."""
    return _float_env("SGLANG_SIM_TIME_SCALE", 1.0)


def token_time_scale() -> float:
    """SGLANG_SIM_TOKEN_TIME_SCALE: multiplies every per-token delay (1.0 = the modelled tok/s)."""
    return _float_env("SGLANG_SIM_TOKEN_TIME_SCALE", 1.0)


def run_dir() -> Path:
    return Path(os.environ.get("FLEET_SIM_RUN") or DEFAULT_RUN_DIR)


def profile_dir() -> Path:
    return Path(os.environ.get("FLEET_SANDBOX_PROFILE") or DEFAULT_PROFILE_DIR)


def sleep(seconds: float) -> None:
    """Sleep a modelled duration, scaled by SGLANG_SIM_TIME_SCALE."""
    scaled = seconds * time_scale()
    if scaled > 0:
        time.sleep(scaled)


def profile_switches() -> dict[str, object]:
    """Top-level scalar keys of the profile's profile.yaml (sandbox-only switches such as p2p_broken).

    A tiny reader for `key: value` lines; nested structures are ignored (stdlib only, no YAML).
    """
    path = profile_dir() / "profile.yaml"
    try:
        text = path.read_text()
    except OSError:
        return {}
    out: dict[str, object] = {}
    for raw in text.splitlines():
        if not raw or raw[0] in " \t#-" or ":" not in raw:
            continue
        key, _, value = raw.partition(":")
        value = value.split(" #", 1)[0].strip()
        if value[:1] in "\"'" and value[-1:] == value[:1] and len(value) >= 2:
            out[key.strip()] = value[1:-1]
            continue
        low = value.lower()
        if low in ("true", "yes", "on"):
            out[key.strip()] = True
        elif low in ("false", "no", "off"):
            out[key.strip()] = False
        else:
            try:
                out[key.strip()] = int(value)
            except ValueError:
                try:
                    out[key.strip()] = float(value)
                except ValueError:
                    out[key.strip()] = value
    return out


def stream_slice() -> float:
    """SGLANG_SIM_STREAM_SLICE_MS: a stream sends at most one chunk per this many ms of wall time."""
    return _float_env("SGLANG_SIM_STREAM_SLICE_MS", 40.0) / 1000.0


def regression(released: dict[str, object] | None = None) -> dict[str, object]:
    """The regression this server plays (engine.Regression's fields): the release's own (its
    sim_release.json `regression`), each field overridden by its knob: SGLANG_SIM_SLOWER
    (`FRACTION[@PERCENTILE]`, 0.10@99 = 10% slower from p99 up), SGLANG_SIM_JITTER (sigma),
    SGLANG_SIM_ANSWERS (`differ`). A knob that does not parse is ignored, as the other knobs are."""
    out = dict(released or {})
    raw = os.environ.get("SGLANG_SIM_SLOWER", "").strip()
    if raw:
        fraction, _, at = raw.partition("@")
        try:
            slower, percentile = float(fraction), float(at or 0) / 100
        except ValueError:
            pass
        else:
            if -1 < slower and 0 <= percentile < 1:
                out.update(slower=slower, percentile=percentile)
    jitter = _float_env("SGLANG_SIM_JITTER", -1.0)
    if jitter >= 0:
        out["jitter"] = jitter
    answers = os.environ.get("SGLANG_SIM_ANSWERS", "").strip()
    if answers in ("differ", "same"):
        out["differ"] = answers == "differ"
    return out
