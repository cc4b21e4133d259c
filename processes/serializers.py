from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied

from batches.locations import grants_storage
from bdre.access import scope, teams
from bdre.api import ScopedRelatedField, TeamField
from bdre.ids import is_id
from processes import registry, runs, scan_gate, schedules
from processes.models import (
    BusDomain,
    InstanceExec,
    Process,
    ProcessLog,
    ProcessTemplate,
    ProcessType,
    Property,
    Server,
)
from processes.workflow import steps_in_order


class RunSerializer(serializers.ModelSerializer):
    exec_state_name = serializers.CharField(source="exec_state.name", read_only=True)
    # A plain string: empty on step runs and on runs from before triggers were recorded.
    trigger = serializers.CharField(
        read_only=True,
        help_text="What started a job run: schedule, upstream, manual, retry, backfill, rewind, "
        "reprocess or replay (docs/operations.md); empty on step runs.",
    )
    # Set on the runs of a list page and of a detail by processes.runs.attach_totals.
    duration_seconds = serializers.FloatField(
        read_only=True, allow_null=True, help_text="Seconds from start to end (or to now)."
    )
    batches_in = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="A job run's input batches (the batches it claimed); null on step runs.",
    )
    rows_in = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="The counters' rows_in: a job run's summed over its step runs; null if none.",
    )
    rows_out = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="The counters' rows_out: a job run's summed over its step runs; null if none.",
    )

    class Meta:
        model = InstanceExec
        fields: tuple[str, ...] = (
            "id",
            "process",
            "parent",
            "exec_state",
            "exec_state_name",
            "start_ts",
            "end_ts",
            "heartbeat_at",
            "lease_expires_at",
            "target_batch",
            "trigger",
            "duration_seconds",
            "batches_in",
            "rows_in",
            "rows_out",
            "worker",
            "spark_application_id",
            "spark_ui_url",
            "spark_conf",
            "error",
            "counters",
        )
        read_only_fields = fields


class InitJobInput(serializers.Serializer):
    max_batch = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    force = serializers.BooleanField(
        default=False,
        help_text="Run a paused job anyway (without it: 409, code 116). Its schedule stays paused.",
    )


class RunNowInput(InitJobInput):
    """Run now takes what init-job takes; its own name in the OpenAPI schema."""


class HaltJobInput(serializers.Serializer):
    batch_marking = serializers.CharField(required=False, allow_blank=True, max_length=512)
    instance_exec_id = serializers.IntegerField(
        required=False, help_text="The caller's run: fenced with 115 if it was reaped."
    )


class TermInput(serializers.Serializer):
    error = serializers.CharField(required=False, allow_blank=True)
    instance_exec_id = serializers.IntegerField(
        required=False, help_text="The caller's run: fenced with 115 if it was reaped."
    )


class InitStepInput(serializers.Serializer):
    instance_exec_id = serializers.IntegerField(
        required=False, help_text="The caller's job run: fenced with 115 if it was reaped."
    )


class StepInput(serializers.Serializer):
    instance_exec_id = serializers.IntegerField(
        required=False, help_text="The caller's step run: fenced with 115 if it was reaped."
    )


class FileInfoSerializer(serializers.Serializer):
    batch_id = serializers.IntegerField()
    path = serializers.CharField()
    file_size = serializers.IntegerField()
    file_hash = serializers.CharField()
    server_id = serializers.IntegerField(allow_null=True)


class StepBatchesSerializer(serializers.Serializer):
    sub_process_id = serializers.IntegerField()
    min_batch_id = serializers.IntegerField()
    max_batch_id = serializers.IntegerField()
    min_batch_marking = serializers.CharField(allow_null=True)
    max_batch_marking = serializers.CharField(allow_null=True)
    batch_ids = serializers.ListField(child=serializers.IntegerField())
    files = FileInfoSerializer(many=True)


class InitJobResultSerializer(serializers.Serializer):
    instance_exec_id = serializers.IntegerField()
    target_batch_id = serializers.IntegerField()
    last_recoverable_sp_id = serializers.IntegerField(allow_null=True)
    target_batch_marking = serializers.CharField()
    is_rerun = serializers.BooleanField()
    skipped_step_ids = serializers.ListField(child=serializers.IntegerField())
    steps = serializers.DictField(
        child=StepBatchesSerializer(), help_text="Per step id: what it has to work on."
    )


class InitStepResultSerializer(serializers.Serializer):
    sub_instance_exec_id = serializers.IntegerField()


class HeartbeatResultSerializer(serializers.Serializer):
    lease_expires_at = serializers.DateTimeField()


class FilesBetweenInput(serializers.Serializer):
    min_batch_id = serializers.IntegerField()
    max_batch_id = serializers.IntegerField()


class ScheduleSerializer(serializers.Serializer):
    """A job's schedule: a cron expression or an interval (in seconds), its time zone,
    whether it is enabled, and whether the job also runs as soon as an upstream job queued a
    batch for it. ``next_run`` is when Beat will run it next."""

    cron = serializers.CharField(required=False, allow_blank=True, default="")
    every_seconds = serializers.IntegerField(required=False, allow_null=True, default=None)
    timezone = serializers.CharField(required=False, default="UTC")
    enabled = serializers.BooleanField(required=False, default=True)
    on_upstream = serializers.BooleanField(required=False, default=False)
    next_run = serializers.DateTimeField(read_only=True, allow_null=True)
    paused = serializers.BooleanField(
        read_only=True,
        help_text="the job is paused (POST .../pause/): no trigger starts it, timed schedule "
        "or not; enabled: false in a PUT pauses it too",
    )


class RunStartedSerializer(serializers.Serializer):
    run = serializers.IntegerField(help_text="the new run's id")
    url = serializers.URLField(help_text="the run in the API (also the Location header)")
    page = serializers.URLField(help_text="the run's page")
    target_batch_id = serializers.IntegerField(help_text="the batch the run writes")
    is_rerun = serializers.BooleanField(help_text="a run of a failed run's batches again")


class CheckedStepSerializer(serializers.Serializer):
    step = serializers.CharField()
    checked_at = serializers.DateTimeField()
    location = serializers.CharField()
    after = serializers.CharField(help_text="the marker the listing started after")
    listed = serializers.IntegerField(help_text="keys listed")
    list_calls = serializers.IntegerField()
    new = serializers.IntegerField(help_text="new files found (the check stops at the first)")
    not_ready = serializers.IntegerField(help_text="keys passed over this time")
    reconciled = serializers.BooleanField(help_text="also listed below the marker")


class LastCheckedSerializer(serializers.Serializer):
    """The last check of a job whose first steps scan (docs/operations.md, "Quiet scans")."""

    checked_at = serializers.DateTimeField()
    outcome = serializers.CharField(help_text="nothing_new, started or ran_meanwhile")
    detail = serializers.CharField()
    run = serializers.IntegerField(
        allow_null=True, help_text="the run it started, or the one that started meanwhile"
    )
    quiet_checks = serializers.IntegerField(help_text="checks that started no run, in all")
    steps = CheckedStepSerializer(many=True)


class NothingNewSerializer(serializers.Serializer):
    started = serializers.BooleanField(help_text="false: no run was started")
    outcome = serializers.CharField(help_text="nothing_new, or ran_meanwhile")
    detail = serializers.CharField()
    run = serializers.IntegerField(
        allow_null=True, help_text="with ran_meanwhile, the run another trigger started"
    )
    last_checked = LastCheckedSerializer()


class TerminatedSerializer(serializers.Serializer):
    terminated_run = serializers.IntegerField()


# --- registry resources -------------------------------------------------------------------


class ProcessTypeField(serializers.Field):
    """A process type by id (``23``) or by name (``"spark-shred"``); shown by name."""

    default_error_messages = {"unknown": "Unknown process type {value!r}."}

    def to_internal_value(self, data: object) -> ProcessType:
        if isinstance(data, bool) or not isinstance(data, int | str):
            self.fail("unknown", value=data)
        found = (
            ProcessType.objects.filter(pk=int(data)).first()
            if isinstance(data, int) or is_id(str(data))
            else ProcessType.objects.filter(name=data).first()
        )
        if found is None:
            self.fail("unknown", value=data)
        return found

    def to_representation(self, value: ProcessType) -> str:
        return value.name


extend_schema_field({"oneOf": [{"type": "integer"}, {"type": "string"}]})(ProcessTypeField)


def _named(field: serializers.Field, rows, data: object, what: str):
    """The row ``data`` names among ``rows``: by id (an integer) or by name.

    Names are per team (docs/security.md, "Names are per team"), and a name resolves within
    the team the request is about: the document's ``team`` (:class:`NamesWithinTeam`), or
    the command line's ``--team``, put in the context as ``team``. Only when the request
    names no team is a name looked for among the rows the requesting user may see (every
    row for the command line); a name that several of them carry is answered with their
    teams, asking for the id or the team, and names only teams the user is in. So a user who
    joins a second team keeps registering in his first by naming it, whatever names the
    second uses."""
    if isinstance(data, bool) or not isinstance(data, int | str) or str(data) == "":
        field.fail("unknown", value=data)
    request = field.context.get("request")
    if request is not None:
        rows = scope(request.user, rows)
    if field.context.get("team") is not None:
        rows = rows.filter(**{rows.model.team_lookup: field.context["team"]})
    key = {"pk": int(data)} if isinstance(data, int) else {"name": data}
    found = list(rows.filter(**key)[:10])
    if not found:
        field.fail("unknown", value=data)
    if len(found) > 1:
        lookup = f"{rows.model.team_lookup}__name"
        teams_of = sorted(set(rows.filter(**key).values_list(lookup, flat=True)))
        whose = "Several of your teams have" if request is not None else "Several teams have"
        raise serializers.ValidationError(
            f"{whose} {what} named {data} ({', '.join(teams_of)}): give its id"
            + (' or the team ("team").' if request is not None else " or the team.")
        )
    return found[0]


class TeamNameField(serializers.Field):
    """One of the requesting user's teams (any team for the command line), by id or name.
    Another team reads as unknown, like a team of no name: the answer tells nothing."""

    default_error_messages = {"unknown": "Unknown team {value!r}."}

    def to_internal_value(self, data: object) -> Group:
        if isinstance(data, bool) or not isinstance(data, int | str) or str(data) == "":
            self.fail("unknown", value=data)
        request = self.context.get("request")
        rows = teams(request.user) if request is not None else Group.objects.all()
        by_id = isinstance(data, int) or is_id(str(data))
        found = rows.filter(**({"pk": int(data)} if by_id else {"name": data})).first()
        if found is None:
            self.fail("unknown", value=data)
        return found

    def to_representation(self, value: Group) -> str:
        return value.name


extend_schema_field({"oneOf": [{"type": "integer"}, {"type": "string"}]})(TeamNameField)


class NamesWithinTeam(serializers.Serializer):
    """A document whose names (its application, upstream jobs) resolve within the team it
    names in ``team``, read before any of them (:func:`_named`)."""

    team = TeamNameField(
        required=False,
        write_only=True,
        help_text="The team (name or id) whose application and upstream jobs the document "
        "names. Needed only when several of your teams use a name the document uses.",
    )

    def to_internal_value(self, data: Any) -> Any:
        named = data.get("team") if hasattr(data, "get") else None
        if named is not None:
            try:
                team = self.fields["team"].run_validation(named)
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({"team": exc.detail}) from exc
            if self.context.get("team") not in (None, team):
                raise serializers.ValidationError(
                    {"team": f"The document names team {team.name}, not the one given."}
                )
            self._context = {**self.context, "team": team}
        return super().to_internal_value(data)


class ProcessNameField(serializers.Field):
    """A live job by name (portable between installations) or by id, among the jobs the
    requesting user may see."""

    default_error_messages = {"unknown": "Unknown job {value!r}."}

    def to_internal_value(self, data: object) -> Process:
        rows = Process.objects.filter(deleted=False).select_related("bus_domain__team")
        return _named(self, rows, data, "a job")

    def to_representation(self, value: Process) -> str:
        return value.name


class ApplicationNameField(serializers.Field):
    """An application by name (portable between installations) or by id, among the
    applications the requesting user may see."""

    default_error_messages = {"unknown": "Object with name={value} does not exist."}

    def to_internal_value(self, data: object) -> BusDomain:
        return _named(self, BusDomain.objects.select_related("team"), data, "an application")

    def to_representation(self, value: BusDomain) -> str:
        return value.name


extend_schema_field({"oneOf": [{"type": "integer"}, {"type": "string"}]})(ProcessNameField)
extend_schema_field({"oneOf": [{"type": "integer"}, {"type": "string"}]})(ApplicationNameField)

PROPERTIES_FIELD = serializers.DictField(
    child=serializers.DictField(child=serializers.CharField(allow_blank=True, max_length=10000)),
    required=False,
    default=dict,
    help_text='Properties by config group: {"group": {"key": "value"}}.',
)


class ApplicationSerializer(serializers.ModelSerializer):
    """Written by ``processes.registry.save_application`` (names per team, moves)."""

    team = TeamField()
    team_name = serializers.CharField(source="team.name", read_only=True)

    class Meta:
        model = BusDomain
        fields = ("id", "name", "description", "owner", "team", "team_name", "add_ts")
        read_only_fields = ("add_ts",)
        # Not DRF's validator of the (team, name) constraint: the registry says it in words.
        validators: list = []


class PropertySerializer(serializers.ModelSerializer):
    """Written by ``processes.registry.save_property``, checked as a job's properties are."""

    process = ScopedRelatedField(queryset=Process.objects.filter(deleted=False))

    class Meta:
        model = Property
        fields = ("id", "process", "config_group", "key", "value", "description")
        # The lengths of a group and a key are the registry's to say (check_properties).
        extra_kwargs = {"config_group": {"max_length": None}, "key": {"max_length": None}}


class BriefStepSerializer(serializers.ModelSerializer):
    process_type_name = serializers.CharField(source="process_type.name", read_only=True)

    class Meta:
        model = Process
        fields = ("id", "name", "process_type", "process_type_name", "next_processes")


class ProcessSerializer(serializers.ModelSerializer):
    """A job or a step. Writes go through ``processes.registry`` (create, update, delete),
    which checks the rules of the registry and answers each broken one on its field."""

    bus_domain = ScopedRelatedField(queryset=BusDomain.objects.all())
    # The serializer's metaclass moves declared fields off the class: this does not replace
    # Field.parent (the stub sees a class attribute of another type).
    parent = ScopedRelatedField(  # type: ignore[assignment]
        queryset=Process.objects.filter(deleted=False), required=False, allow_null=True
    )
    enqueuing_processes = ScopedRelatedField(
        queryset=Process.objects.filter(deleted=False), many=True, required=False
    )
    next_processes = ScopedRelatedField(
        queryset=Process.objects.filter(deleted=False), many=True, required=False
    )
    process_type_name = serializers.CharField(source="process_type.name", read_only=True)
    application_name = serializers.CharField(source="bus_domain.name", read_only=True)
    is_job = serializers.BooleanField(read_only=True)

    class Meta:
        model = Process
        fields: tuple[str, ...] = (
            "id",
            "name",
            "description",
            "bus_domain",
            "application_name",
            "process_type",
            "process_type_name",
            "parent",
            "is_job",
            "can_recover",
            "batch_cut_pattern",
            "enqueuing_processes",
            "next_processes",
            "max_retries",
            "lease_seconds",
            "process_template",
            "add_ts",
        )
        read_only_fields = ("add_ts", "process_template")

    def changes(self) -> registry.ProcessChanges:
        """The validated input over the current values (a PATCH changes only what it names)."""
        data = self.validated_data
        current = self.instance

        def value(name: str, default: Any) -> Any:
            if name in data:
                return data[name]
            return getattr(current, name) if current is not None else default

        return registry.ProcessChanges(
            name=value("name", ""),
            bus_domain=value("bus_domain", None),
            process_type=value("process_type", None),
            parent=value("parent", None),
            description=value("description", ""),
            can_recover=value("can_recover", True),
            batch_cut_pattern=value("batch_cut_pattern", ""),
            max_retries=value("max_retries", 3),
            lease_seconds=value("lease_seconds", 3600),
            enqueuing=data.get("enqueuing_processes"),
            next=data.get("next_processes"),
        )


class ProcessDetailSerializer(ProcessSerializer):
    steps = serializers.SerializerMethodField()
    properties = PropertySerializer(many=True, read_only=True)
    schedule = serializers.SerializerMethodField()
    last_checked = serializers.SerializerMethodField()

    class Meta(ProcessSerializer.Meta):
        fields = (*ProcessSerializer.Meta.fields, "steps", "properties", "schedule", "last_checked")

    @extend_schema_field(BriefStepSerializer(many=True))
    def get_steps(self, process: Process) -> list[dict]:
        if not process.is_job:
            return []
        # many=True makes a ListSerializer, whose data is a list; the stubs miss that.
        return BriefStepSerializer(steps_in_order(process), many=True).data  # type: ignore[return-value]

    @extend_schema_field(ScheduleSerializer(allow_null=True))
    def get_schedule(self, process: Process) -> dict | None:
        if not process.is_job:
            return None
        return ScheduleSerializer(schedules.schedule_of(process.pk)).data

    @extend_schema_field(LastCheckedSerializer(allow_null=True))
    def get_last_checked(self, process: Process) -> dict | None:
        checked = scan_gate.last_checked(process)
        return LastCheckedSerializer(checked).data if checked is not None else None


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


class ServerSerializer(serializers.ModelSerializer):
    """Credentials are write-only: they are stored encrypted and never returned; the
    ``has_*`` flags say whether one is set. Written by ``processes.registry.save_server``."""

    team = TeamField()
    login_password = serializers.CharField(
        write_only=True, required=False, allow_blank=True, style={"input_type": "password"}
    )
    ssh_private_key = serializers.CharField(write_only=True, required=False, allow_blank=True)
    has_password = serializers.SerializerMethodField()
    has_ssh_private_key = serializers.SerializerMethodField()
    granted_teams = serializers.PrimaryKeyRelatedField(
        queryset=Group.objects.all(), many=True, required=False
    )

    class Meta:
        model = Server
        fields: tuple[str, ...] = (
            "id",
            "team",
            "server_type",
            "name",
            "root",
            "granted_teams",
            "metainfo",
            "login_user",
            "login_password",
            "ssh_private_key",
            "has_password",
            "has_ssh_private_key",
            "server_ip",
        )
        # The name is checked per team by processes.registry.save_server, in our words.
        validators: list = []

    def to_internal_value(self, data):
        # A root is storage granted to teams: a server that grants one (or is to) is the
        # installation superusers' to create and change, whole: its endpoint, credentials
        # and team decide where the granted teams' steps read and write (docs/security.md,
        # "Storage is granted, not typed"). Refused before any field is read, so no answer
        # tells whether a team id exists.
        request = self.context.get("request")
        user = getattr(request, "user", None)
        if user is not None and not user.is_superuser and hasattr(data, "get"):
            granting = self.instance is not None and grants_storage(self.instance)
            asks = bool(data.get("root")) or bool(data.get("granted_teams"))
            if granting or asks:
                raise PermissionDenied(
                    "Only an installation superuser creates or changes a server that grants "
                    "a storage root (root, granted_teams)."
                )
        return super().to_internal_value(data)

    def get_has_password(self, server: Server) -> bool:
        return bool(server.login_password)

    def get_has_ssh_private_key(self, server: Server) -> bool:
        return bool(server.ssh_private_key)


class RunDetailSerializer(RunSerializer):
    steps = serializers.SerializerMethodField()
    process_name = serializers.CharField(source="process.name", read_only=True)

    class Meta(RunSerializer.Meta):
        fields = (*RunSerializer.Meta.fields, "process_name", "plan", "steps")
        read_only_fields = fields

    @extend_schema_field(RunSerializer(many=True))
    def get_steps(self, run: InstanceExec) -> list[dict]:
        children = list(run.step_runs.select_related("exec_state").order_by("id"))
        runs.attach_totals(children)
        # many=True makes a ListSerializer, whose data is a list; the stubs miss that.
        return RunSerializer(children, many=True).data  # type: ignore[return-value]


class LogSerializer(serializers.ModelSerializer):
    class Meta:
        model = ProcessLog
        fields = (
            "id",
            "process",
            "instance_exec",
            "log_category",
            "message_id",
            "message",
            "add_ts",
        )
        read_only_fields = fields


class StepLogQuery(serializers.Serializer):
    q = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="Only the lines with this text (case-insensitive).",
    )
    tail = serializers.IntegerField(
        required=False, min_value=1, max_value=100_000, help_text="Only the last N lines."
    )


class StepLogSerializer(serializers.Serializer):
    step_run = serializers.IntegerField(source="step_run.pk")
    step = serializers.CharField(source="step_run.process.name")
    state = serializers.CharField(source="step_run.exec_state.name")
    lines = serializers.ListField(child=serializers.CharField())
    total_lines = serializers.IntegerField(help_text="Lines in the file.")
    matched = serializers.IntegerField(help_text="Lines matching q (all without q).")
    size = serializers.IntegerField(help_text="The file's size in bytes.")
    cut = serializers.BooleanField(help_text="The middle was cut by BDRE_STEP_LOG_MAX_BYTES.")


class RunLogSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    steps = StepLogSerializer(many=True)
