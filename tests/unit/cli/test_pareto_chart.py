"""fleet.cli.pareto_chart: the front drawn where its values put it, every line within the terminal's width, and
the picture a well-formed SVG naming the front's configurations."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from fleet.cli import pareto_chart
from fleet.deploy.pareto import Served, front

POINTS = [Served("slo-base", 2.0, per_gpu=100.0, per_user=80.0), Served("slo-triton", 8.0, per_gpu=400.0,
                                                                         per_user=20.0),
          Served("slo-base", 4.0, per_gpu=150.0, per_user=10.0)]  # dominated by slo-triton


@pytest.mark.parametrize("width", [30, 60, 120])
def test_every_line_fits_and_the_front_is_where_its_values_put_it(width):
    lines = pareto_chart.chart(POINTS, front(POINTS), width)
    assert all(len(line) <= width for line in lines), lines
    body = [line.split("|", 1)[1] for line in lines[1:11]]
    assert "*" in body[0] and lines[1].startswith("    400 |")  # the most per GPU: the top row, labelled
    right = [row for row in body if row.rstrip().endswith("*") and len(row.rstrip()) == width - 9]
    assert len(right) == 1 and body.index(right[0]) > 0  # the fastest per user: at the far right, lower
    assert body[0].index("*") < len(right[0].rstrip()) - 1
    assert sum(row.count("*") for row in body) == 2 and sum(row.count(".") for row in body) == 1
    assert lines[-1].rstrip().endswith("80 tok/s per user")


def test_no_points_no_chart():
    assert pareto_chart.chart([], [], 80) == []


def test_the_picture_is_svg_naming_the_front():
    text = pareto_chart.svg(POINTS, front(POINTS), "sbx0 <ttft_p99=2s>")
    root = ET.fromstring(text)
    labels = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "sbx0 <ttft_p99=2s>" in labels and "slo-triton" in labels and "slo-base" in labels
    assert len(list(root.iter("{http://www.w3.org/2000/svg}circle"))) == 3 + 2
