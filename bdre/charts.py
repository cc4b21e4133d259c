"""Small SVG charts drawn by the server (no script, no CDN): stacked bars, a line, and
durations as bars."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM, PAD_TOP = 560, 150, 34, 22, 10


def _frame(title: str, peak: int, labels: list[str]) -> list[str]:
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" class="chart" font-size="10" '
        'font-family="system-ui, sans-serif">',
        f"<title>{escape(title)}</title>",
    ]
    for fraction in (0, 0.5, 1) if peak >= 4 else (0, 1):
        y = PAD_TOP + plot_h * (1 - fraction)
        out.append(
            f'<line x1="{PAD_LEFT}" x2="{WIDTH}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e7eb"/>'
            f'<text x="{PAD_LEFT - 4}" y="{y + 3:.1f}" text-anchor="end" fill="#6b7785">'
            f"{round(peak * fraction)}</text>"
        )
    step = (WIDTH - PAD_LEFT) / max(len(labels), 1)
    for i, label in enumerate(labels):
        if i % 4 == 0:
            x = PAD_LEFT + step * (i + 0.5)
            out.append(
                f'<text x="{x:.1f}" y="{HEIGHT - 6}" text-anchor="middle" fill="#6b7785">'
                f"{escape(label)}</text>"
            )
    return out


def stacked_bars(title: str, labels: list[str], series: list[tuple[str, str, list[int]]]) -> str:
    """Bars per label, one colour per series stacked: ``[(name, colour, values), ...]``."""
    totals = [sum(values[i] for _, _, values in series) for i in range(len(labels))]
    peak = max([*totals, 1])
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    step = (WIDTH - PAD_LEFT) / max(len(labels), 1)
    out = _frame(title, peak, labels)
    for i, label in enumerate(labels):
        base: float = HEIGHT - PAD_BOTTOM
        for name, colour, values in series:
            h = plot_h * values[i] / peak
            if values[i]:
                out.append(
                    f'<rect x="{PAD_LEFT + step * i + 2:.1f}" y="{base - h:.1f}" '
                    f'width="{max(step - 4, 1):.1f}" height="{h:.1f}" fill="{colour}">'
                    f"<title>{escape(label)}: {values[i]} {escape(name)}</title></rect>"
                )
            base -= h
    out.append("</svg>")
    return "\n".join(out)


def line(title: str, labels: list[str], values: list[int], colour: str = "#1d5fbf") -> str:
    peak = max([*values, 1])
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    step = (WIDTH - PAD_LEFT) / max(len(labels), 1)
    out = _frame(title, peak, labels)
    points = [
        (PAD_LEFT + step * (i + 0.5), PAD_TOP + plot_h * (1 - v / peak))
        for i, v in enumerate(values)
    ]
    if points:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for (x, y), label, v in zip(points, labels, values, strict=True):
            out.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colour}">'
                f"<title>{escape(label)}: {v}</title></circle>"
            )
    out.append("</svg>")
    return "\n".join(out)


@dataclass(frozen=True)
class Bar:
    """One bar of :func:`duration_bars`."""

    label: str  # under the bar, when there is room for it
    seconds: float
    colour: str
    tip: str  # the bar's title: what a pointer or a screen reader gets
    href: str = ""


def seconds_text(seconds: float) -> str:
    """A duration in at most five characters (an axis has room for no more): 0s, 2.5s, 40s,
    2.5m, 15m, 1.5h."""
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size or unit == "s":
            value = seconds / size
            return (
                f"{value:.1f}{unit}"
                if value < 10 and value != round(value)
                else f"{value:.0f}{unit}"
            )
    raise AssertionError("unreachable")


# Axis tops whose half is a round duration too: 0.5s to 1h, then whole hours.
NICE_SECONDS = (1, 2, 5, 10, 20, 30, 60, 120, 180, 240, 300, 600, 900, 1200, 1800, 2400, 3600, 7200)


def _nice_ceiling(seconds: float) -> float:
    """The smallest of :data:`NICE_SECONDS` at or above ``seconds``, past them whole hours."""
    return next((n for n in NICE_SECONDS if n >= seconds), 3600 * math.ceil(seconds / 3600))


CHAR_WIDTH = 6.5  # a generous width of one character at font-size 10


def duration_bars(title: str, bars: list[Bar]) -> str:
    """A bar per run, its height the run's duration, oldest left. Labels under the bars are
    thinned (the newest always kept) so that no two overlap, whatever their number."""
    pad_left = 40
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    peak = _nice_ceiling(max([b.seconds for b in bars] + [1.0]))
    step = (WIDTH - pad_left) / max(len(bars), 1)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" class="chart" font-size="10" '
        'font-family="system-ui, sans-serif">',
        f"<title>{escape(title)}</title>",
    ]
    for fraction in (0, 0.5, 1):
        y = PAD_TOP + plot_h * (1 - fraction)
        out.append(
            f'<line x1="{pad_left}" x2="{WIDTH}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e7eb"/>'
            f'<text x="{pad_left - 4}" y="{y + 3:.1f}" text-anchor="end" fill="#6b7785">'
            f"{seconds_text(peak * fraction)}</text>"
        )
    half = max([len(b.label) for b in bars] + [1]) * CHAR_WIDTH / 2
    # The newest label is pulled left to stay inside the drawing, nearer its neighbour.
    pulled = max(0.0, half - step / 2)
    every = max(1, math.ceil((2 * half + 6 + pulled) / step))
    for i, bar in enumerate(bars):
        h = max(plot_h * max(bar.seconds, 0) / peak, 1.5)  # a run of no time still shows
        x = pad_left + step * i
        rect = (
            f'<rect x="{x + 1:.1f}" y="{HEIGHT - PAD_BOTTOM - h:.1f}" '
            f'width="{max(step - 2, 1):.1f}" height="{h:.1f}" fill="{bar.colour}">'
            f"<title>{escape(bar.tip)}</title></rect>"
        )
        out.append(f'<a href="{escape(bar.href)}">{rect}</a>' if bar.href else rect)
        if (len(bars) - 1 - i) % every == 0:
            out.append(
                f'<text x="{min(x + step / 2, WIDTH - half - 0.1):.1f}" y="{HEIGHT - 6}" '
                f'text-anchor="middle" '
                f'fill="#6b7785">{escape(bar.label)}</text>'
            )
    out.append("</svg>")
    return "\n".join(out)
