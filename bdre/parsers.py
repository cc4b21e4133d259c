"""The API's body parsers: DRF's, with the limits every body is held to before any view
reads it.

- JSON nested deeper than ``MAX_DEPTH`` levels is refused: BDRE's deepest document (a
  pipeline: steps, a step, its properties, a group) is five levels, and Python's JSON
  decoder and every recursive walk after it fail on a few thousand.
- Text holding the NUL character (``\\u0000``), in a key or a value, is refused: PostgreSQL
  cannot store it in a text column (nor in JSON), and it is never meant.

Both answer 400 ``{"detail": "..."}`` naming where the body is at fault."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.utils.datastructures import MultiValueDict
from rest_framework import parsers
from rest_framework.exceptions import ParseError

MAX_DEPTH = 32

TOO_DEEP = (
    f"The JSON body is nested deeper than {MAX_DEPTH} levels; no BDRE document is: flatten it."
)


def _nul_error(where: str, what: str) -> ParseError:
    place = f" at {where}" if where else ""
    return ParseError(
        f"The {what}{place} holds a NUL character (\\u0000), which cannot be stored: remove it."
    )


def _children(value: Any, where: str) -> Iterator[tuple[str, Any, str]]:
    """(key, child, path of the child) of a JSON object, array or form."""
    if isinstance(value, MultiValueDict):
        for key, values in value.lists():
            for item in values:
                yield key, item, f"{where}.{key}" if where else key
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key), item, f"{where}.{key}" if where else str(key)
    else:
        for index, item in enumerate(value):
            yield "", item, f"{where}[{index}]"


def check_body(data: Any) -> None:
    """Raise ParseError when ``data`` is nested too deeply or holds a NUL character.

    Iterative, so that the check itself cannot overflow the stack."""
    pending: list[tuple[Any, int, str]] = [(data, 0, "")]
    while pending:
        value, depth, where = pending.pop()
        if isinstance(value, str):
            if "\x00" in value:
                raise _nul_error(where, "value")
            continue
        if not isinstance(value, dict | list | tuple):
            continue  # numbers, booleans, null, uploaded files
        if depth >= MAX_DEPTH:
            raise ParseError(TOO_DEEP)
        for key, child, path in _children(value, where):
            if "\x00" in key:
                # The path would hold the NUL too: name the object the key is in.
                raise _nul_error(where, "key of an object")
            pending.append((child, depth + 1, path))


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError(TOO_DEEP) from exc
        check_body(data)
        return data


class FormParser(parsers.FormParser):
    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        check_body(data)
        return data


class MultiPartParser(parsers.MultiPartParser):
    def parse(self, stream, media_type=None, parser_context=None):
        parsed = super().parse(stream, media_type, parser_context)
        check_body(parsed.data)
        return parsed
