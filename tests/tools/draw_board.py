"""Draw `inv status`'s board from recorded rows, as the CLI draws it, on the terminal this runs in.

    python tests/tools/draw_board.py ROWS.json [--hosts N] [--wide] [--detail HOST]

ROWS.json is `inv status --json` output (tests/fixtures/status/). --hosts N repeats its rows under the names
gpu-node-00.. to make a fleet of N. The board tests run this inside tmux at a given size and read the screen
back (capture-pane), so what they check is what a person at that terminal sees."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fleet.cli import console  # noqa: E402 - after the path is set
from fleet.cli.status_view import render, render_detail  # noqa: E402
from fleet.multihost.status import HostStatus  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rows")
    ap.add_argument("--hosts", type=int)
    ap.add_argument("--wide", action="store_true")
    ap.add_argument("--detail")
    args = ap.parse_args()
    rows = [HostStatus.from_json(h) for h in json.loads(Path(args.rows).read_text())["hosts"]]
    if args.hosts:
        rows = [dataclasses.replace(rows[i % len(rows)], host=f"gpu-node-{i:02d}",
                                    error=(rows[i % len(rows)].error or "").replace(rows[i % len(rows)].host,
                                                                                   f"gpu-node-{i:02d}") or None)
                for i in range(args.hosts)]
    if args.detail:
        render_detail(next(r for r in rows if r.host == args.detail), console)
    else:
        render(rows, console, wide=args.wide)
    print("@@drawn@@")


if __name__ == "__main__":
    main()
