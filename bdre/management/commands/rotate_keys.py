"""Re-encrypt every encrypted value with the first key of FIELD_ENCRYPTION_KEY, so that the
keys after it can be removed from the list."""

from __future__ import annotations

from typing import Any

from cryptography.fernet import InvalidToken
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, models, transaction
from django.db.models import ForeignObjectRel

from bdre.fields import encrypted_fields, rotate


def _column(field: models.Field[Any, Any] | ForeignObjectRel) -> str:
    """The column of a concrete field (primary keys and encrypted fields all are)."""
    assert isinstance(field, models.Field) and field.column is not None
    return field.column


class Command(BaseCommand):
    help = (
        "Re-encrypts every encrypted value with the first key of FIELD_ENCRYPTION_KEY, in one "
        "transaction, and reports how many. Values that no key of the list can read are "
        "listed by row and left as they are; the others are rotated all the same, and the "
        "command then exits with an error so that the old keys are not removed blindly."
    )

    def handle(self, *args: object, **options: object) -> None:
        rotated = 0
        unreadable: list[str] = []
        quote = connection.ops.quote_name
        with transaction.atomic():
            for model, names in encrypted_fields():
                table = quote(model._meta.db_table)
                pk = quote(_column(model._meta.pk))
                columns = [_column(model._meta.get_field(name)) for name in names]
                # Raw SQL: the ciphertext as stored, not the field's decrypted value, and
                # written back as is (the field's save would encrypt it again).
                select = ", ".join(quote(c) for c in columns)
                # Locked: a save between the read and the write would be overwritten.
                lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
                with connection.cursor() as cursor:
                    cursor.execute(f"SELECT {pk}, {select} FROM {table} ORDER BY {pk}{lock}")
                    rows = cursor.fetchall()
                for row_id, *values in rows:
                    for name, column, stored in zip(names, columns, values, strict=True):
                        if not stored:
                            continue
                        try:
                            new = rotate(stored)
                        except InvalidToken:
                            unreadable.append(f"{model._meta.label} {row_id} {name}")
                            continue
                        with connection.cursor() as cursor:
                            cursor.execute(
                                f"UPDATE {table} SET {quote(column)} = %s WHERE {pk} = %s",
                                [new, row_id],
                            )
                        rotated += 1
        self.stdout.write(f"re-encrypted {rotated} secret{'' if rotated == 1 else 's'}")
        if unreadable:
            raise CommandError(
                f"{len(unreadable)} secret(s) cannot be read with any key and were left as "
                "they are; enter them again (or add the key they were written with) before "
                "removing old keys: " + "; ".join(unreadable)
            )
