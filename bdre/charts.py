"""Small SVG charts drawn by the server (no script, no CDN): stacked bars and a line."""

from __future__ import annotations

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
