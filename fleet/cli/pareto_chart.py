"""`inv tune --slo`'s Pareto front as text that fits the terminal, and as an SVG picture.

Up: output tokens a second per GPU; right: tokens a second one user sees. `*` marks a point on the front, `.` one
it dominates (ASCII only, so any terminal shows it); both axes are linear from 0 to the largest value.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from fleet.deploy.pareto import Served

LABEL = 7  # the y axis's numbers, right-aligned


def _scale(value: float, top: float, cells: int) -> int:
    return min(cells - 1, max(0, round(value / top * (cells - 1)))) if top > 0 else 0


def chart(points: Sequence[Served], front: Sequence[Served], width: int, height: int = 10) -> list[str]:
    """The scatter as lines no longer than `width` (at least 30); nothing when no point said what it served."""
    if not points:
        return []
    cells = max(30, width) - LABEL - 2
    top_y = max(p.per_gpu for p in points)
    top_x = max(p.per_user for p in points)
    grid = [[" "] * cells for _ in range(height)]
    on_front = {(p.per_gpu, p.per_user) for p in front}
    for p in sorted(points, key=lambda p: (p.per_gpu, p.per_user) in on_front):  # the front drawn last, on top
        row = height - 1 - _scale(p.per_gpu, top_y, height)
        grid[row][_scale(p.per_user, top_x, cells)] = "*" if (p.per_gpu, p.per_user) in on_front else "."
    lines = [f"{'tok/s/GPU':>{LABEL}}"]
    for i, cells_row in enumerate(grid):
        label = f"{top_y:.4g}" if i == 0 else "0" if i == height - 1 else ""
        lines.append(f"{label:>{LABEL}} |{''.join(cells_row).rstrip()}")
    lines.append(f"{'':>{LABEL}} +{'-' * cells}")
    right = f"{top_x:.4g} tok/s per user"
    lines.append(f"{'':>{LABEL}}  0{right:>{cells - 1}}")
    return lines


def svg(points: Sequence[Served], front: Sequence[Served], title: str) -> str:
    """The same scatter as a picture: the front joined by a line, each front point named."""
    w, h, pad = 640, 400, 56
    top_y = max((p.per_gpu for p in points), default=1.0) or 1.0
    top_x = max((p.per_user for p in points), default=1.0) or 1.0

    def xy(p: Served) -> tuple[float, float]:
        return pad + p.per_user / top_x * (w - 2 * pad), h - pad - p.per_gpu / top_y * (h - 2 * pad)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
             f'font-size="11">', f'<text x="{pad}" y="20" font-size="13">{escape(title)}</text>',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
             f'<text x="{w - pad}" y="{h - pad + 30}" text-anchor="end">tokens/s per user (max {top_x:.4g})</text>',
             f'<text x="8" y="{pad - 10}">output tokens/s per GPU (max {top_y:.4g})</text>']
    for p in points:
        x, y = xy(p)
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="#999"><title>{escape(p.trial)} at '
                     f'{p.rate:.3g} req/s</title></circle>')
    if front:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in map(xy, front))
        parts.append(f'<polyline points="{path}" fill="none" stroke="#c33" stroke-width="2"/>')
        for p in front:
            x, y = xy(p)
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#c33"/>')
            parts.append(f'<text x="{x + 6:.1f}" y="{y - 6:.1f}">{escape(p.trial)}</text>')
    return "\n".join([*parts, "</svg>"]) + "\n"
