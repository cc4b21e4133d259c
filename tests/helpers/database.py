"""What the database holds and refuses."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import IntegrityError, connection, transaction


def rejected(create) -> bool:
    """Whether the database refuses what ``create`` writes (an IntegrityError)."""
    try:
        with transaction.atomic():
            create()
    except IntegrityError:
        return True
    return False


def rows(model) -> dict[int, str]:
    """A master table's rows, id -> name."""
    return dict(model.objects.values_list("id", "name"))


@contextmanager
def rolled_back() -> Iterator[None]:
    """One case of a test that runs many, in a savepoint of its own rolled back after it, so
    that what it writes is gone before the next. Its foreign keys are checked first, as
    Django's TestCase checks a test's at its end: they are deferred to a commit that a
    rolled-back write never reaches, and a row left pointing at nothing would pass unseen."""
    with transaction.atomic():
        try:
            yield
            if not connection.needs_rollback:
                connection.check_constraints()
        finally:
            transaction.set_rollback(True)
