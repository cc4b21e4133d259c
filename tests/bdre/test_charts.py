"""The duration bars: well-formed SVG whose labels never overlap and whose axis reads as
round durations."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

import pytest

from bdre import charts

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("count", [1, 7, 30, 120])
@pytest.mark.parametrize("first_id", [1, 98_765, 12_345_678_901])
def test_labels_under_the_bars_never_overlap_and_the_newest_is_kept(count, first_id):
    bars = [
        charts.Bar(label=str(first_id + i), seconds=i * 7.5, colour="#3a9a5b", tip=f"run {i}")
        for i in range(count)
    ]
    svg = ET.fromstring(charts.duration_bars("Duration & <trend>", bars))

    assert svg.findtext(f"{SVG}title") == "Duration & <trend>"
    assert len(svg.findall(f"{SVG}rect")) == count
    labels = [t for t in svg.findall(f"{SVG}text") if t.get("y") == str(charts.HEIGHT - 6)]
    assert labels[-1].text == str(first_id + count - 1)
    xs = [float(t.get("x")) for t in labels]
    width = len(str(first_id + count - 1)) * charts.CHAR_WIDTH
    assert all(b - a >= width for a, b in itertools.pairwise(xs))
    assert all(x - width / 2 >= 0 and x + width / 2 <= charts.WIDTH for x in xs)


@pytest.mark.parametrize(
    ("longest", "ticks"),
    [(0.0, ["0s", "0.5s", "1s"]), (138, ["0s", "1.5m", "3m"]), (5000, ["0s", "1h", "2h"])],
)
def test_the_axis_is_zero_half_and_a_round_top(longest, ticks):
    svg = ET.fromstring(charts.duration_bars("t", [charts.Bar("1", longest, "#3a9a5b", "run 1")]))
    axis = [t.text for t in svg.findall(f"{SVG}text") if t.get("text-anchor") == "end"]
    assert axis == ticks
