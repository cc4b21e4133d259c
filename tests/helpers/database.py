"""What the database holds and refuses."""

from __future__ import annotations

from django.db import IntegrityError, transaction


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
