"""What counts as an id in a path, a query or a reference: ASCII digits that fit in a
64-bit integer (``"²".isdigit()`` is true, and a 40-digit number overflows the database)."""

from __future__ import annotations

import re

ID_REGEX = r"[0-9]{1,18}"
_ID = re.compile(ID_REGEX)


def is_id(text: str) -> bool:
    return _ID.fullmatch(text) is not None
