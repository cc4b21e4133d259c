"""A job's schedule follows the job: deleting the job (or marking it deleted) deletes it."""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from processes import schedules
from processes.models import Process


@receiver(post_save, sender=Process, dispatch_uid="bdre-schedule-follows-save")
def _deleted_job_loses_its_schedule(sender, instance: Process, **kwargs: object) -> None:
    if instance.deleted and instance.parent_id is None:
        schedules.remove(instance.pk)


@receiver(post_delete, sender=Process, dispatch_uid="bdre-schedule-follows-delete")
def _removed_job_loses_its_schedule(sender, instance: Process, **kwargs: object) -> None:
    if instance.parent_id is None:
        schedules.remove(instance.pk)
