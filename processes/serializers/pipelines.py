"""Whole documents: a pipeline (a job with its steps, links, properties and schedule), a
template, and a job made from a template."""

from __future__ import annotations

from rest_framework import serializers

from processes import registry, schedules
from processes.models import (
    ProcessTemplate,
)
from processes.serializers.fields import (
    PROPERTIES_FIELD,
    ApplicationNameField,
    NamesWithinTeam,
    ProcessNameField,
    ProcessTypeField,
)


class TemplateStepSerializer(serializers.Serializer):
    """A step of a template; a pipeline's step adds its upstream jobs. Parsed only: the
    registry checks the step (its name, kind, cut pattern, links and upstream jobs) and
    answers on the field at fault, ``"<step>: ..."``."""

    name = serializers.CharField()
    process_type = ProcessTypeField(help_text="A step type, by id or name.")
    description = serializers.CharField(required=False, allow_blank=True, default="")
    can_recover = serializers.BooleanField(required=False, default=True)
    batch_cut_pattern = serializers.CharField(required=False, allow_blank=True, default="")
    next = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        allow_null=True,
        default=None,
        help_text="The names of the steps after this one; absent or null: the next one listed.",
    )
    properties = PROPERTIES_FIELD


class PipelineStepSerializer(TemplateStepSerializer):
    upstream = serializers.ListField(
        child=ProcessNameField(),
        required=False,
        default=list,
        help_text="The upstream jobs whose batches the step consumes, by name or id.",
    )


class PipelineScheduleSerializer(serializers.Serializer):
    cron = serializers.CharField(required=False, allow_blank=True, default="")
    every_seconds = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1
    )
    timezone = serializers.CharField(required=False, default="UTC")
    enabled = serializers.BooleanField(required=False, default=True)
    on_upstream = serializers.BooleanField(required=False, default=False)


class PipelineSerializer(NamesWithinTeam):
    """A whole job in one document: its steps, their links and upstream jobs, properties
    and schedule. ``GET /processes/{id}/export/`` writes the same document. Parsed only:
    ``registry.register_pipeline`` checks it as a whole."""

    format = serializers.ChoiceField(
        choices=["bdre.pipeline/1"], required=False, default="bdre.pipeline/1"
    )
    name = serializers.CharField()
    application = ApplicationNameField(help_text="The application's name (or id).")
    process_type = ProcessTypeField(help_text="A job type, by id or name.")
    description = serializers.CharField(required=False, allow_blank=True, default="")
    max_retries = serializers.IntegerField(required=False, default=3)
    lease_seconds = serializers.IntegerField(required=False, default=3600)
    properties = PROPERTIES_FIELD
    steps = PipelineStepSerializer(many=True)
    schedule = PipelineScheduleSerializer(required=False, allow_null=True, default=None)

    def spec(self) -> registry.JobSpec:
        data = self.validated_data
        schedule = data.get("schedule")
        return registry.JobSpec(
            name=data["name"],
            bus_domain=data["application"],
            process_type_id=data["process_type"].pk,
            description=data["description"],
            properties=data["properties"],
            max_retries=data["max_retries"],
            lease_seconds=data["lease_seconds"],
            schedule=schedules.Schedule(**schedule) if schedule else None,
            steps=[
                registry.StepSpec(
                    name=s["name"],
                    process_type_id=s["process_type"].pk,
                    description=s["description"],
                    can_recover=s["can_recover"],
                    upstream=[u.pk for u in s["upstream"]],
                    batch_cut_pattern=s["batch_cut_pattern"],
                    next=s["next"],
                    properties=s["properties"],
                )
                for s in data["steps"]
            ],
        )


class TemplateSerializer(NamesWithinTeam):
    """A job template with its step templates, written and read as a whole; checked as a
    whole by ``registry.save_template``."""

    id = serializers.IntegerField(read_only=True)
    name = serializers.CharField()
    application = ApplicationNameField(help_text="The application's name (or id).")
    process_type = ProcessTypeField(help_text="A job type, by id or name.")
    description = serializers.CharField(required=False, allow_blank=True, default="")
    properties = PROPERTIES_FIELD
    steps = TemplateStepSerializer(many=True)
    add_ts = serializers.DateTimeField(read_only=True)

    def to_representation(self, template: ProcessTemplate) -> dict:
        def props(row: ProcessTemplate) -> dict[str, dict[str, str]]:
            grouped: dict[str, dict[str, str]] = {}
            for p in row.properties.all():
                grouped.setdefault(p.config_group, {})[p.key] = p.value
            return grouped

        return {
            "id": template.pk,
            "name": template.name,
            "application": template.bus_domain.name,
            "process_type": template.process_type.name,
            "description": template.description,
            "properties": props(template),
            "steps": [
                {
                    "name": step.name,
                    "process_type": step.process_type.name,
                    "description": step.description,
                    "can_recover": step.can_recover,
                    "batch_cut_pattern": step.batch_cut_pattern,
                    "next": after,
                    "properties": props(step),
                }
                for step, after in registry.template_steps(template)
            ],
            "add_ts": serializers.DateTimeField().to_representation(template.add_ts),
        }

    def spec(self) -> registry.TemplateSpec:
        data = self.validated_data
        return registry.TemplateSpec(
            name=data["name"],
            bus_domain=data["application"],
            process_type_id=data["process_type"].pk,
            description=data["description"],
            properties=data["properties"],
            steps=[
                registry.TemplateStepSpec(
                    name=s["name"],
                    process_type_id=s["process_type"].pk,
                    description=s["description"],
                    can_recover=s["can_recover"],
                    batch_cut_pattern=s["batch_cut_pattern"],
                    next=s["next"],
                    properties=s["properties"],
                )
                for s in data["steps"]
            ],
        )


class InstantiateSerializer(NamesWithinTeam):
    name = serializers.CharField(
        help_text="The new job's name (at most 100 characters); step s of the template "
        "becomes <name>_<s>.",
    )
    application = ApplicationNameField(
        required=False, help_text="Default: the template's application (a name or an id)."
    )
    upstream = serializers.DictField(
        child=serializers.ListField(child=ProcessNameField()),
        required=False,
        default=dict,
        help_text="Per template step name, the upstream jobs (names or ids).",
    )
    properties = PROPERTIES_FIELD
    schedule = PipelineScheduleSerializer(required=False, allow_null=True, default=None)


class SqlProblemSerializer(serializers.Serializer):
    step = serializers.CharField(help_text="The step whose statement it is.")
    property = serializers.CharField(help_text="The property holding the statement (sql.query).")
    message = serializers.CharField(help_text="What is wrong, with the closest names known.")


class ValidationSerializer(serializers.Serializer):
    valid = serializers.BooleanField(help_text="No problem found.")
    problems = SqlProblemSerializer(many=True)
    checked = serializers.ListField(
        child=serializers.CharField(),
        help_text="Per step that runs SQL: what was checked, or what could not be (a table "
        "nothing was written to yet has no known columns).",
    )
