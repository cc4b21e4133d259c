"""The one way BDRE parses a team's SQL with sqlglot: a statement nested too deeply is one
error with one message, wherever it comes in (the properties API and forms, an import, the
lineage API, a step's run), never a ``RecursionError`` and a 500.

sqlglot reads nested expressions recursively, about twenty Python frames a level: around 45
levels of parentheses exhaust Python's stack from a plain shell, fewer from inside a request
or a worker, whose stack is already deeper. So the depth is counted first, on the tokens
(iteratively, strings and comments not counted), and a statement past
:data:`MAX_NESTING` levels is refused before it is parsed: the answer is the same whatever
the caller's stack, and the trees that are parsed are shallow enough for the recursive walks
that follow (the guard, lineage's qualification). ``RecursionError`` is still caught, for a
form of nesting the count does not know."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType

# Far beyond a hand-written query (a few levels), well below where the parser runs out of
# stack inside a request (about 40).
MAX_NESTING = 32

TOO_DEEP = (
    f"the statement is nested too deeply to be read (at most {MAX_NESTING} levels of "
    "parentheses, CASE or NOT): flatten it, for example by moving nested subqueries into WITH "
    "clauses, dropping redundant parentheses, or splitting deeply nested function calls and NOTs"
)


class StatementTooDeep(ValueError):
    """A statement nested too deeply to be parsed; its message says how to flatten it."""

    def __init__(self) -> None:
        super().__init__(TOO_DEEP)


OPENING = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.CASE}
CLOSING = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.END}
# Prefix operators nest too: ``NOT NOT NOT ... x`` takes no parenthesis.
PREFIX = {TokenType.NOT, TokenType.DASH, TokenType.PLUS, TokenType.TILDE}
ARROWS = {TokenType.ARROW}


def nesting(sql: str, dialect: str) -> int:
    """The deepest nesting in ``sql``, counted on its tokens: parentheses, brackets and
    ``CASE ... END`` each open a level, and so does each prefix operator of a run of them and
    each lambda arrow (``x -> y -> ...``) until the level it is in closes."""
    depth = deepest = run = 0
    arrows = [0]  # the lambda arrows open at each level of parentheses
    for token in Dialect.get_or_raise(dialect).tokenize(sql):
        kind = token.token_type
        run = run + 1 if kind in PREFIX else 0
        if kind in OPENING:
            depth += 1
            arrows.append(0)
        elif kind in CLOSING:
            depth = max(depth - 1, 0)
            if len(arrows) > 1:
                arrows.pop()
        elif kind in ARROWS:
            arrows[-1] += 1
        deepest = max(deepest, depth + run + sum(arrows))
    return deepest


def parse(sql: str, dialect: str) -> list[exp.Expr]:
    """``sqlglot.parse(sql, read=dialect)`` without the empty statements; a statement nested
    too deeply raises :class:`StatementTooDeep`, one sqlglot cannot read its ``SqlglotError``."""
    if nesting(sql, dialect) > MAX_NESTING:
        raise StatementTooDeep()
    try:
        return [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except RecursionError:
        raise StatementTooDeep() from None


def struct_fields(ddl: str) -> list[tuple[str, str]]:
    """The top-level ``(name, type)`` fields of a Spark ``struct<a:int,b:array<string>>``
    string (a registered table's recorded schema), split on the top-level commas only;
    names without their backquotes, a nested type kept whole. Not a struct: none."""
    body = ddl.strip()
    if not (body.startswith("struct<") and body.endswith(">")):
        return []
    body = body[len("struct<") : -1]
    fields, depth, start = [], 0, 0
    for i, char in enumerate(body + ","):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            name, _, kind = body[start:i].partition(":")
            if name.strip():
                fields.append((name.strip().strip("`"), kind.strip()))
            start = i + 1
    return fields
