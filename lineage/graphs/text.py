"""How wide a line of text is drawn, measured on the server so that boxes fit their text.

The browser picks the font (``system-ui`` and the fallbacks of ``svg.FONT_FAMILY``), so
the widths are the widest of DejaVu Sans, Liberation Sans (metrics of Arial and Helvetica)
and Chromium's ``system-ui`` on Debian, measured in Chromium per printable ASCII character
in thousandths of an em; other characters count as a wide latin letter, and East Asian
wide ones as a full em. A measure too wide leaves some blank space in a box; one too
narrow would let text spill out of it, so every guess errs wide."""

from __future__ import annotations

import unicodedata

ELLIPSIS = "…"

# printable ASCII (space to ~), thousandths of an em, regular then semi-bold (600)
_REGULAR = (
    318, 401, 460, 838, 637, 951, 780, 275, 391, 391, 500, 838, 318, 361, 318, 337, 637, 637,
    637, 637, 637, 637, 637, 637, 637, 637, 337, 337, 838, 838, 838, 557, 1016, 685, 687, 723,
    771, 667, 611, 778, 752, 295, 500, 667, 558, 863, 749, 788, 667, 788, 723, 667, 611, 732,
    685, 989, 686, 667, 686, 391, 337, 391, 838, 557, 500, 613, 635, 550, 635, 616, 353, 635,
    634, 278, 278, 580, 278, 975, 634, 612, 635, 635, 412, 521, 393, 634, 592, 818, 592, 592,
    525, 637, 337, 637, 838,
)  # fmt: skip
_BOLD = (
    349, 457, 521, 838, 696, 1002, 873, 307, 458, 458, 523, 838, 380, 416, 380, 366, 696, 696,
    696, 696, 696, 696, 696, 696, 696, 696, 400, 400, 838, 838, 838, 611, 1000, 774, 763, 734,
    831, 684, 684, 821, 837, 373, 557, 775, 638, 996, 837, 851, 733, 851, 771, 721, 683, 813,
    774, 1104, 771, 725, 726, 458, 366, 458, 838, 557, 500, 675, 716, 593, 716, 679, 436, 716,
    712, 343, 343, 666, 343, 1042, 712, 688, 716, 716, 494, 596, 479, 712, 652, 924, 646, 652,
    583, 712, 366, 712, 838,
)  # fmt: skip
_OTHER = 800  # accented and other letters: as wide as a wide capital
_WIDE = 1000  # CJK and other full-width characters
_ELLIPSIS = 1000


def _em(char: str, table: tuple[int, ...]) -> int:
    code = ord(char)
    if 32 <= code < 127:
        return table[code - 32]
    if char == ELLIPSIS:
        return _ELLIPSIS
    if unicodedata.combining(char) or unicodedata.category(char) in ("Cf", "Mn", "Me"):
        return 0
    return _WIDE if unicodedata.east_asian_width(char) in ("W", "F") else _OTHER


def width(text: str, size: float, bold: bool = False) -> float:
    """The width in pixels of ``text`` at a font size of ``size`` pixels."""
    table = _BOLD if bold else _REGULAR
    return sum(_em(c, table) for c in text) * size / 1000


def fit(text: str, room: float, size: float, bold: bool = False) -> str:
    """``text``, or as much of it as fits in ``room`` pixels followed by an ellipsis."""
    if width(text, size, bold) <= room:
        return text
    table = _BOLD if bold else _REGULAR
    budget = room * 1000 / size - _ELLIPSIS
    used, kept = 0, 0
    for char in text:
        used += _em(char, table)
        if used > budget:
            break
        kept += 1
    return text[:kept].rstrip() + ELLIPSIS
