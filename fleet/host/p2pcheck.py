"""The optional P2P data check (`inv probe --p2p-check`): fleet/host/programs/p2p_check.py run by the venv's
python copies a buffer between each ordered pair of GPUs and compares it; this parses its JSON line (pure).
On fewer than two GPUs there is nothing to check, and it says so."""

from __future__ import annotations

import json
import shlex

from pydantic import BaseModel, Field, ValidationError

from fleet.host import programs as hostside

DEFAULT_MIB = 64
LIMIT_S = 120  # a copy that hangs (a broken P2P path can) is killed on the host by timeout(1)


class PairCheck(BaseModel):
    src: int
    dst: int
    peer_access: bool  # what torch.cuda.can_device_access_peer said
    mib: int
    mismatched: int  # 4-byte words that came back different


class P2PCheck(BaseModel):
    verdict: str  # "nothing to check" | "ok" | "mismatch" | "failed"
    gpus: int = 0
    pairs: list[PairCheck] = Field(default_factory=list)
    error: str | None = None

    @property
    def bad_pairs(self) -> list[PairCheck]:
        return [p for p in self.pairs if p.mismatched]


def command(venv: str, mib: int = DEFAULT_MIB) -> str:
    python = f"{venv.rstrip('/')}/bin/python"
    return f"timeout {LIMIT_S} " + hostside.as_owner(venv, python, "-c", hostside.text("p2p_check.py"), str(int(mib)))


def parse(output: str, rc: int) -> P2PCheck:
    line = next((ln for ln in reversed(output.strip().splitlines()) if ln.startswith("{")), "")
    try:
        raw = json.loads(line)
        gpus, pairs, error = int(raw["gpus"]), [PairCheck.model_validate(p) for p in raw["pairs"][:4096]], raw["error"]
    except (ValueError, KeyError, TypeError, ValidationError):
        why = "timed out" if rc == 124 else f"rc={rc}: {shlex.quote(output.strip()[-200:])}"
        return P2PCheck(verdict="failed", error=f"no answer from the check ({why})")
    if error:
        return P2PCheck(verdict="failed", gpus=gpus, pairs=pairs, error=str(error)[:300])
    if gpus < 2:
        return P2PCheck(verdict="nothing to check", gpus=gpus)
    return P2PCheck(verdict="mismatch" if any(p.mismatched for p in pairs) else "ok", gpus=gpus, pairs=pairs)
