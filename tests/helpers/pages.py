"""The pages as a browser sees them, without one: a logged-in client, and the job's edit form
as the page fills it."""

from __future__ import annotations

import re
from typing import Any

from django.test import Client

from processes.models import Process


def client_as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def edit_page(client: Client, job: Process) -> Any:
    answer = client.get(f"/jobs/{job.pk}/edit/")
    assert answer.status_code == 200
    return answer


def as_shown(client: Client, job: Process) -> dict[str, Any]:
    """The edit form as the page fills it: what a browser posts when nothing is changed."""
    context = edit_page(client, job).context
    data: dict[str, Any] = {
        "step-TOTAL_FORMS": len(context["steps"].forms),
        "step-INITIAL_FORMS": len(context["steps"].forms),
        "new-TOTAL_FORMS": 1,
        "new-INITIAL_FORMS": 0,
        "save": "1",
    }
    data.update({k: v for k, v in context["form"].initial.items()})
    for i, form in enumerate(context["steps"].forms):
        for name in ("step", "description", "properties", "after"):
            data[f"step-{i}-{name}"] = form.initial.get(name, "")
        # A browser posts the options selected: the jobs the user may see among them.
        choices = set(form.fields["upstream"].queryset.values_list("pk", flat=True))
        data[f"step-{i}-upstream"] = [
            pk for pk in form.initial.get("upstream", []) if pk in choices
        ]
    return data


def step_index(data: dict[str, Any], job: Process, name: str) -> int:
    pk = job.steps.get(name=name).pk
    return next(int(k.split("-")[1]) for k, v in data.items() if k.endswith("-step") and v == pk)


def section(html: str, step: str) -> str:
    """The part of the page that edits ``step`` (its fieldset)."""
    match = re.search(rf'<fieldset class="step" data-step="{step}">(.*?)</fieldset>', html, re.S)
    assert match, f"no fieldset for {step}"
    return match.group(1)
