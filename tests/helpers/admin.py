"""Django's admin as the admin tests (tests/<app>/test_admin.py) drive it."""

from __future__ import annotations

from django.urls import reverse

from processes.models import Process


def url(model, action: str, *args: object) -> str:
    """The admin page ``action`` ("changelist", "change", "add") of ``model``."""
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{action}", args=args)


def action(client, model, name: str, *pks: int):
    """Run the admin action ``name`` on the rows ``pks`` of ``model``'s changelist."""
    return client.post(
        url(model, "changelist"),
        {"action": name, "_selected_action": [str(pk) for pk in pks]},
        follow=True,
    )


def act(client, name: str, *jobs: Process):
    """Run the admin action ``name`` on ``jobs`` in the processes' changelist."""
    return action(client, Process, name, *(job.pk for job in jobs))


def texts(response) -> list[str]:
    """The messages the admin shows after ``response``."""
    return [str(m) for m in response.context["messages"]]
