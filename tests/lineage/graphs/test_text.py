"""How wide text is drawn, and cutting it to fit."""

from __future__ import annotations

from lineage.graphs import text


def test_wide_letters_measure_wider_than_narrow_ones_and_bold_wider_still():
    assert text.width("WWWW", 12) > text.width("iiii", 12)
    assert text.width("orders", 12, bold=True) > text.width("orders", 12)
    assert text.width("orders", 24) == 2 * text.width("orders", 12)
    assert text.width("日本", 10) == 20  # full-width characters take a whole em
    assert text.width("", 12) == 0


def test_text_that_fits_is_kept_whole_and_longer_text_ends_in_an_ellipsis():
    assert text.fit("orders", 200, 12) == "orders"
    cut = text.fit("customer_orders_with_line_items_and_addresses", 120, 12)
    assert cut.endswith(text.ELLIPSIS) and len(cut) < 30
    assert text.width(cut, 12) <= 120
    assert "customer_orders_with_line_items_and_addresses".startswith(cut[:-1])
    assert text.fit("ab  cdefghijklmnop", text.width("ab  c", 12), 12) == "ab" + text.ELLIPSIS
