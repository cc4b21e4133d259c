"""The shape shared by master (lookup) tables: a fixed id and a name, seeded by migrations."""

from __future__ import annotations

from django.db import models


class MasterTable(models.Model):
    id = models.PositiveSmallIntegerField(primary_key=True)
    name = models.CharField(max_length=64, unique=True)
    description = models.CharField(max_length=255, blank=True)

    class Meta:
        abstract = True
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name
