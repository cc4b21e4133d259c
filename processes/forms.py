"""Forms of the registration pages: a job with its steps (a formset), links, upstream jobs,
properties and schedule; a job made from a template; a job saved as a template; a schedule.
They only parse: the registry (``processes.registry``) validates and writes, and its errors
are put back on the fields at fault (:func:`place_errors`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.forms import formset_factory

from bdre.access import AnyUser, Role, scope, teams
from processes import registry, schedules, step_kinds
from processes.models import (
    BusDomain,
    Process,
    ProcessTemplate,
    ProcessType,
)
from processes.registry import validate

PROPERTIES_HELP = "One per line: group.key = value (an indented line goes on with the value)"


def parse_properties(text: str) -> dict[str, dict[str, str]]:
    """``group.key = value`` lines into ``{group: {key: value}}``; blank lines are skipped,
    and an indented line continues the value above it (a SQL statement over lines)."""
    found: dict[str, dict[str, str]] = {}
    last: tuple[str, str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if last is not None and line[:1] in (" ", "\t"):
            group, key = last
            found[group][key] += "\n" + line.strip()
            continue
        name, sep, value = line.partition("=")
        group, dot, key = name.strip().partition(".")
        if not sep or not dot or not group or not key.strip():
            raise ValidationError(f"Line {number}: write group.key = value")
        last = (group, key.strip())
        found.setdefault(group, {})[key.strip()] = value.strip()
    return found


def format_properties(properties: registry.Properties) -> str:
    """The text :func:`parse_properties` reads back: a value's further lines indented."""
    lines = []
    for group, values in sorted(properties.items()):
        for key, value in sorted(values.items()):
            first, *rest = str(value).splitlines() or [""]
            lines.append(f"{group}.{key} = {first}")
            lines += [f"  {more}" for more in rest]
    return "\n".join(lines)


def developer_applications(user: AnyUser) -> QuerySet[BusDomain]:
    return (
        BusDomain.objects.filter(team__in=teams(user, Role.DEVELOPER))
        .select_related("team")
        .order_by("name", "team__name")
    )


def in_team(row: BusDomain | Process | ProcessTemplate) -> str:
    """A choice's label: names are per team, so a user of two teams may see one name twice."""
    team = row.team if isinstance(row, BusDomain) else row.bus_domain.team
    return f"{row.name} ({team})"


class TeamChoiceField(forms.ModelChoiceField):
    """A choice of an application, job or template, labelled with its team (:func:`in_team`)."""

    def label_from_instance(self, obj: BusDomain | Process | ProcessTemplate) -> str:
        return in_team(obj)


class TeamMultipleChoiceField(forms.ModelMultipleChoiceField):
    """Choices of jobs, each labelled with its team (:func:`in_team`)."""

    def label_from_instance(self, obj: Process) -> str:
        return in_team(obj)


def kind_reference() -> list[dict[str, Any]]:
    """Every step type with the properties its kind reads (key, default, help), for the
    registration pages: listed, and shown beside a step once its kind is chosen."""
    return [
        {
            "id": kind.pk,
            "name": kind.name,
            "kind": kind.job_kind,
            "properties": [
                {"key": key, "default": default, "help": meaning}
                for key, default, meaning in step_kinds.documented(kind.job_kind)
            ],
        }
        for kind in ProcessType.objects.filter(parent_process_type__isnull=False).order_by("pk")
    ]


class StepKindField(forms.ModelChoiceField):
    """A choice of a step's type, labelled with its kind."""

    def label_from_instance(self, obj: ProcessType) -> str:
        return f"{obj.name} ({obj.job_kind})"


def _model_choices(form: forms.BaseForm, name: str) -> forms.ModelChoiceField[Any]:
    """The form's field ``name``, declared on its class as a model choice field."""
    field = form.fields[name]
    if not isinstance(field, forms.ModelChoiceField):
        raise TypeError(f"{name} is not a model choice field")
    return field


class ScheduleFields(forms.Form):
    every_seconds = forms.IntegerField(
        required=False, min_value=1, label="every (seconds)", help_text="or a cron expression"
    )
    cron = forms.CharField(
        required=False, max_length=100, help_text="minute hour day-of-month month day-of-week"
    )
    timezone = forms.CharField(initial="UTC", max_length=64)
    on_upstream = forms.BooleanField(
        required=False, label="run when an upstream job queued a batch"
    )

    def schedule(self) -> schedules.Schedule:
        data = self.cleaned_data
        return schedules.Schedule(
            cron=data.get("cron") or "",
            every_seconds=data.get("every_seconds"),
            timezone=data.get("timezone") or "UTC",
            on_upstream=bool(data.get("on_upstream")),
        )


class JobForm(ScheduleFields):
    application = TeamChoiceField(queryset=BusDomain.objects.none())
    name = forms.CharField()
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    job_type = forms.ModelChoiceField(
        queryset=ProcessType.objects.filter(parent_process_type__isnull=True).order_by("pk"),
        label="type",
    )
    max_retries = forms.IntegerField(initial=3)
    lease_seconds = forms.IntegerField(initial=3600)
    properties = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}), help_text=PROPERTIES_HELP
    )

    field_order = [
        "application",
        "name",
        "description",
        "job_type",
        "max_retries",
        "lease_seconds",
        "properties",
        "every_seconds",
        "cron",
        "timezone",
        "on_upstream",
    ]

    def __init__(self, *args: Any, user: AnyUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _model_choices(self, "application").queryset = developer_applications(user)

    def clean_properties(self) -> dict:
        return parse_properties(self.cleaned_data.get("properties", ""))


def _step_sql(data: dict[str, Any]) -> validate.StepSql:
    """A new step's statement, as ``registry.validate`` checks it."""
    return validate.StepSql(data["name"], data["kind"].job_kind or "", data.get("properties") or {})


class StepForm(forms.Form):
    name = forms.CharField()
    kind = StepKindField(
        queryset=ProcessType.objects.filter(parent_process_type__isnull=False).order_by("pk"),
        label="kind",
    )
    after = forms.CharField(
        required=False,
        label="next steps",
        help_text="names, comma separated; blank: the next step in the list",
    )
    upstream = TeamMultipleChoiceField(
        queryset=Process.objects.none(), required=False, label="upstream jobs"
    )
    batch_cut_pattern = forms.CharField(required=False)
    properties = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 3}), help_text=PROPERTIES_HELP
    )

    def __init__(self, *args: Any, user: AnyUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _model_choices(self, "upstream").queryset = (
            scope(user, Process.objects.live().jobs())
            .select_related("bus_domain__team")
            .order_by("name")
        )

    def clean_properties(self) -> dict:
        return parse_properties(self.cleaned_data.get("properties", ""))

    def step_sql(self) -> validate.StepSql:
        return _step_sql(self.cleaned_data)

    def spec(self) -> registry.StepSpec:
        data = self.cleaned_data
        after = [n.strip() for n in (data.get("after") or "").split(",") if n.strip()]
        return registry.StepSpec(
            name=data["name"],
            process_type_id=data["kind"].pk,
            upstream=[u.pk for u in data.get("upstream") or []],
            batch_cut_pattern=data.get("batch_cut_pattern") or "",
            next=after or None,
            properties=data.get("properties") or {},
        )


class BaseStepFormSet(forms.BaseFormSet):
    """Steps of a job; build with ``form_kwargs={"user": ...}``."""

    def filled(self) -> list[StepForm]:
        return [f for f in self.forms if f.has_changed() and f.is_valid()]


# Two rows to fill, none required: "at least one step" is the registry's to say.
# formset_factory makes a subclass of ``formset``; its stub types it as the plain BaseFormSet.
StepFormSet = cast(
    "type[BaseStepFormSet]", formset_factory(StepForm, formset=BaseStepFormSet, extra=2)
)


class JobEditForm(forms.Form):
    """The fields of a registered job that its page edits (``registry.edit_job``)."""

    name = forms.CharField()
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    max_retries = forms.IntegerField()
    lease_seconds = forms.IntegerField()
    properties = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 4}), help_text=PROPERTIES_HELP
    )

    def clean_properties(self) -> dict:
        return parse_properties(self.cleaned_data.get("properties", ""))


class StepEditForm(forms.Form):
    """A step of the job being edited, known by its id (a hidden field, checked to be one of
    the job's steps); its name is shown, not changed (the errors name the step by it)."""

    step = forms.TypedChoiceField(coerce=int, widget=forms.HiddenInput)
    name = forms.CharField(disabled=True, required=False)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    properties = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 5}), help_text=PROPERTIES_HELP
    )
    after = forms.CharField(
        required=False,
        label="next steps",
        help_text="names, comma separated; blank: none (a last step)",
    )
    upstream = TeamMultipleChoiceField(
        queryset=Process.objects.none(), required=False, label="upstream jobs"
    )
    remove = forms.BooleanField(required=False, label="remove this step")

    def __init__(self, *args: Any, steps: list[Process], user: AnyUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        step_field = self.fields["step"]
        assert isinstance(step_field, forms.TypedChoiceField)  # declared above
        step_field.choices = [(s.pk, s.name) for s in steps]
        _model_choices(self, "upstream").queryset = (
            scope(user, Process.objects.live().jobs())
            .select_related("bus_domain__team")
            .order_by("name")
        )
        # tall enough for the statement it holds (a SQL query over many lines)
        text = str(self["properties"].value() or "")
        self.fields["properties"].widget.attrs["rows"] = min(max(text.count("\n") + 2, 3), 24)

    def clean_properties(self) -> dict:
        return parse_properties(self.cleaned_data.get("properties", ""))

    def step_sql(self, steps: list[Process]) -> validate.StepSql:
        step = next(s for s in steps if s.pk == self.cleaned_data["step"])
        properties = self.cleaned_data.get("properties") or {}
        return validate.StepSql(step.name, step.process_type.job_kind or "", properties)

    def edit(self) -> registry.StepEdit:
        data = self.cleaned_data
        return registry.StepEdit(
            step_id=data["step"],
            description=data.get("description") or "",
            properties=data.get("properties") or {},
            remove=bool(data.get("remove")),
            next=[n.strip() for n in (data.get("after") or "").split(",") if n.strip()],
            upstream=[u.pk for u in data.get("upstream") or []] + self.unseen_upstream(),
        )

    def unseen_upstream(self) -> list[int]:
        """The step's upstream jobs that the user may not see, so not among the choices:
        kept, as the user cannot have meant to take them away."""
        seen = _model_choices(self, "upstream").queryset
        assert seen is not None
        linked = [int(pk) for pk in self.initial.get("upstream") or []]
        visible = set(seen.filter(pk__in=linked).values_list("pk", flat=True))
        return [pk for pk in linked if pk not in visible]


class NewStepForm(forms.Form):
    name = forms.CharField()
    kind = StepKindField(
        queryset=ProcessType.objects.filter(parent_process_type__isnull=False).order_by("pk"),
        label="kind",
    )
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    after = forms.CharField(
        required=False,
        label="after the steps",
        help_text="names, comma separated; blank: after the last step",
    )
    properties = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 3}), help_text=PROPERTIES_HELP
    )

    def clean_properties(self) -> dict:
        return parse_properties(self.cleaned_data.get("properties", ""))

    def step_sql(self) -> validate.StepSql:
        return _step_sql(self.cleaned_data)

    def new_step(self) -> registry.NewStep:
        data = self.cleaned_data
        return registry.NewStep(
            name=data["name"],
            process_type_id=data["kind"].pk,
            description=data.get("description") or "",
            properties=data.get("properties") or {},
            after=[n.strip() for n in (data.get("after") or "").split(",") if n.strip()],
        )


class BaseNewStepFormSet(forms.BaseFormSet):
    """Steps to add to a job; the rows left empty are ignored."""

    def filled(self) -> list[NewStepForm]:
        return [f for f in self.forms if f.has_changed() and f.is_valid()]


StepEditFormSet = formset_factory(StepEditForm, extra=0)
# One empty row to add a step; "add another step" posts the page back with one more.
NewStepFormSet = cast(
    "type[BaseNewStepFormSet]",
    formset_factory(NewStepForm, formset=BaseNewStepFormSet, extra=1),
)


STEP_FIELDS = {
    "process_type": "kind",
    "batch_cut_pattern": "batch_cut_pattern",
    "enqueuing_processes": "upstream",
    "next_processes": "after",
    "properties": "properties",
    "name": "name",
    "description": "description",
}
JOB_FIELDS = {"name": "name", "process_type": "job_type", "max_retries": "max_retries"}


def place_errors(error: ValidationError, job_form: forms.Form, steps: Sequence[forms.Form]) -> None:
    """Put the registry's errors on the fields at fault: a message ``"<step>: ..."`` on that
    step's field, the others on the job form (or, unknown, at its top)."""
    by_name = {f.cleaned_data.get("name"): f for f in steps if hasattr(f, "cleaned_data")}
    details = error.message_dict if hasattr(error, "error_dict") else {"__all__": error.messages}
    for key, messages in details.items():
        for message in messages:
            step_name, sep, rest = message.partition(": ")
            field = STEP_FIELDS.get(key)
            if sep and step_name in by_name and field in by_name[step_name].fields:
                by_name[step_name].add_error(field, rest)
            elif JOB_FIELDS.get(key, key) in job_form.fields:
                job_form.add_error(JOB_FIELDS.get(key, key), message)
            else:
                job_form.add_error(None, message if key == "__all__" else f"{key}: {message}")


class FromTemplateForm(ScheduleFields):
    template = TeamChoiceField(queryset=ProcessTemplate.objects.none())
    application = TeamChoiceField(queryset=BusDomain.objects.none())
    name = forms.CharField()
    properties = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Overrides, one per line: group.key = value, or step.group.key = value",
    )

    field_order = ["template", "application", "name", "properties"]

    def __init__(self, *args: Any, user: AnyUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _model_choices(self, "template").queryset = (
            scope(user, ProcessTemplate.objects.filter(parent__isnull=True, deleted=False))
            .select_related("bus_domain__team")
            .order_by("name")
        )
        _model_choices(self, "application").queryset = developer_applications(user)

    def clean_properties(self) -> dict:
        """``step.group.key`` lines become the registry's ``"step.group"`` groups."""
        found: dict[str, dict[str, str]] = {}
        for group, values in parse_properties(self.cleaned_data.get("properties", "")).items():
            for key, value in values.items():
                owner, dot, real_key = key.rpartition(".")
                target = f"{group}.{owner}" if dot else group
                found.setdefault(target, {})[real_key if dot else key] = value
        return found


class SaveTemplateForm(forms.Form):
    name = forms.CharField()
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
