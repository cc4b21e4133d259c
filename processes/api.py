"""REST: applications, processes (with the lifecycle actions of DESIGN.md section 7, whole
pipelines, export and import), templates, properties and servers. Runs and their logs:
``processes.run_api``."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from batches import file_batches
from batches.locations import grants_storage
from batches.serializers import FileSerializer
from bdre.access import Role
from bdre.api import ErrorSerializer, ScopedViewSet, acting_on, require_role
from bdre.errors import BdreError, Code
from processes import (
    lifecycle,
    orchestrator,
    registry,
    scan_gate,
    schedules,
    tasks,
)
from processes.filters import ProcessFilter, PropertyFilter, TemplateFilter
from processes.models import (
    BusDomain,
    Process,
    ProcessTemplate,
    Property,
    Server,
)
from processes.registry import validate
from processes.replay_api import CatchUpAction, ProcessReplayActions
from processes.serializers.pipelines import (
    InstantiateSerializer,
    PipelineSerializer,
    TemplateSerializer,
    ValidationSerializer,
)
from processes.serializers.registry import (
    ApplicationSerializer,
    ProcessDetailSerializer,
    ProcessSerializer,
    PropertySerializer,
    ServerSerializer,
)
from processes.serializers.runs import (
    FilesBetweenInput,
    HaltJobInput,
    InitJobInput,
    InitJobResultSerializer,
    InitStepInput,
    InitStepResultSerializer,
    NothingNewSerializer,
    RunNowInput,
    RunStartedSerializer,
    ScheduleSerializer,
    StepInput,
    TerminatedSerializer,
    TermInput,
)

# 404 is a row's path only (bdre/openapi.py adds it): a body's unknown ids are 400s.
REGISTRY_ERRORS = {
    400: OpenApiResponse(description="invalid input: the body names each field at fault"),
    403: OpenApiResponse(description="the user's role in the owning team is too low"),
    409: OpenApiResponse(description="the current state forbids it (a running job)"),
}

ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="invalid input (101, 113, 114)"),
    403: OpenApiResponse(description="the user's role in the owning team is too low"),
    404: OpenApiResponse(ErrorSerializer, description="unknown process (102, 103)"),
    409: OpenApiResponse(ErrorSerializer, description="state conflict (104-112, 115)"),
}


def _body(serializer_class, request: Request) -> dict:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class ApplicationViewSet(ScopedViewSet):
    """Applications (BDRE's bus domains). Creating or changing one needs the developer role
    in its team; deleting it, the admin role (and no process left in it)."""

    serializer_class = ApplicationSerializer
    filterset_fields = ("team", "name")
    ordering_fields = ("id", "name", "add_ts")

    def base_queryset(self):
        return BusDomain.objects.select_related("team")

    def owner_team(self, data: dict):
        return data.get("team")

    def write(self, serializer: serializers.BaseSerializer[Any], data: dict[str, Any]) -> None:
        pk = serializer.instance.pk if serializer.instance is not None else None
        serializer.instance = registry.save_application(registry.ApplicationSpec.of(data), pk)


def started_answer(request: Request, started: orchestrator.Started | scan_gate.Quiet) -> Response:
    """A run started now (run now, a retry): 201 naming it; 200 when its scans found
    nothing new and no run started."""
    if isinstance(started, scan_gate.Quiet):
        quiet = {
            "started": False,
            "outcome": started.outcome,
            "detail": started.detail,
            "run": started.run_id,
            "last_checked": started.last_checked,
        }
        return Response(NothingNewSerializer(quiet).data)
    run_id = started.instance_exec_id
    url = request.build_absolute_uri(reverse("run-detail", args=[run_id]))
    body = {
        "run": run_id,
        "url": url,
        "page": request.build_absolute_uri(reverse("ui-run", args=[run_id])),
        "target_batch_id": started.target_batch_id,
        "is_rerun": started.is_rerun,
    }
    return Response(body, status=status.HTTP_201_CREATED, headers={"Location": url})


@extend_schema_view(
    create=extend_schema(responses={201: ProcessSerializer, **REGISTRY_ERRORS}),
    update=extend_schema(responses={200: ProcessSerializer, **REGISTRY_ERRORS}),
    partial_update=extend_schema(responses={200: ProcessSerializer, **REGISTRY_ERRORS}),
    destroy=extend_schema(
        # No body: no 400. 409 while it runs or other jobs consume it.
        responses={204: None, **{s: REGISTRY_ERRORS[s] for s in (403, 409)}},
        description="Mark a job and its steps deleted (runs, batches and lineage stay), or "
        "one step, whose predecessors are linked to its successors. Needs the admin role.",
    ),
)
class ProcessViewSet(ProcessReplayActions, CatchUpAction, ScopedViewSet):
    filterset_class = ProcessFilter
    ordering_fields = ("id", "name", "add_ts")

    def base_queryset(self):
        return (
            Process.objects.filter(deleted=False)
            .select_related("bus_domain", "process_type")
            .prefetch_related("enqueuing_processes", "next_processes")
        )

    def get_serializer_class(self):
        return ProcessDetailSerializer if self.action == "retrieve" else ProcessSerializer

    def owner_team(self, data: dict):
        return data["bus_domain"].team if data.get("bus_domain") else None

    def perform_create(self, serializer: serializers.BaseSerializer[Any]) -> None:
        assert isinstance(serializer, ProcessSerializer)  # get_serializer_class's, for writes
        require_role(self.request.user, self.owner_team(serializer.validated_data), Role.DEVELOPER)
        serializer.instance = registry.create_process(serializer.changes())

    def perform_update(self, serializer: serializers.BaseSerializer[Any]) -> None:
        assert isinstance(serializer, ProcessSerializer)  # get_serializer_class's, for writes
        assert serializer.instance is not None  # an update is of the object looked up
        changes = serializer.changes()
        require_role(self.request.user, changes.bus_domain.team, Role.DEVELOPER)
        serializer.instance = registry.update_process(serializer.instance.pk, changes)

    def perform_destroy(self, instance: Process) -> None:
        registry.delete_process(instance.pk)

    def _register(self, request: Request) -> Response:
        document = PipelineSerializer(data=request.data, context={"request": request})
        document.is_valid(raise_exception=True)
        spec = document.spec()
        require_role(request.user, spec.bus_domain.team, Role.DEVELOPER)
        job = registry.register_pipeline(spec)
        return Response(ProcessDetailSerializer(job).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=PipelineSerializer,
        responses={201: ProcessDetailSerializer, **REGISTRY_ERRORS},
        description="Register a whole job in one request: its steps, their links and "
        "upstream jobs, properties and schedule. All or nothing.",
    )
    @action(detail=False, methods=["post"])
    def pipeline(self, request: Request) -> Response:
        return self._register(request)

    @extend_schema(
        request=PipelineSerializer,
        responses={200: ValidationSerializer, 400: REGISTRY_ERRORS[400], 403: REGISTRY_ERRORS[403]},
        description="Check the SQL of a job's steps against the schemas of the tables its "
        "team may read, without registering anything: every unknown table, column or struct "
        "field at once, with the closest names (the same document as /processes/pipeline/).",
    )
    @action(detail=False, methods=["post"], url_path="validate")
    def validate_sql(self, request: Request) -> Response:
        document = PipelineSerializer(data=request.data, context={"request": request})
        document.is_valid(raise_exception=True)
        spec = document.spec()
        require_role(request.user, spec.bus_domain.team, Role.DEVELOPER)
        return Response(ValidationSerializer(validate.validate_spec(spec)).data)

    @extend_schema(
        request=PipelineSerializer,
        responses={201: ProcessDetailSerializer, **REGISTRY_ERRORS},
        description="Import a job exported by GET /processes/{id}/export/ (from this or "
        "another installation): the same document as /processes/pipeline/.",
    )
    @action(detail=False, methods=["post"], url_path="import")
    def import_job(self, request: Request) -> Response:
        return self._register(request)

    @extend_schema(
        responses={200: PipelineSerializer, 404: ERRORS[404]},
        description="The job as a portable document (names, not ids) for import.",
    )
    @action(detail=True, methods=["get"])
    def export(self, request: Request, pk: str) -> Response:
        job = self.get_object()
        if not job.is_job:
            raise BdreError(Code.INVALID_PARENT_PROCESS, f"{pk} is a step: export its job")
        return Response(registry.export_job(job))

    def _job(self, request: Request, pk: str) -> int:
        acting_on(
            request, Process, int(pk), role=Role.DEVELOPER, unknown=Code.INVALID_PARENT_PROCESS
        )
        return int(pk)

    def _step(self, request: Request, pk: str) -> int:
        acting_on(request, Process, int(pk), role=Role.DEVELOPER, unknown=Code.INVALID_SUB_PROCESS)
        return int(pk)

    @extend_schema(
        parameters=[FilesBetweenInput],
        responses={200: FileSerializer(many=True), 400: ERRORS[400], 404: ERRORS[404]},
        description="BDRE's GetFiles: the files of the step's batches from min to max batch id.",
    )
    # All the files between two batches, as BDRE's GetFiles: not in pages, and the process
    # list's filters do not apply.
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def files(self, request: Request, pk: str) -> Response:
        acting_on(request, Process, int(pk), role=Role.VIEWER, unknown=Code.INVALID_SUB_PROCESS)
        query = FilesBetweenInput(data=request.query_params)
        query.is_valid(raise_exception=True)
        files = file_batches.files_between(sub_process_id=int(pk), **query.validated_data)
        return Response(FileSerializer(files, many=True).data)

    @extend_schema(request=InitJobInput, responses={201: InitJobResultSerializer, **ERRORS})
    @action(detail=True, methods=["post"], url_path="init-job")
    def init_job(self, request: Request, pk: str) -> Response:
        job_id = self._job(request, pk)
        data = _body(InitJobInput, request)
        result = lifecycle.init_job(
            job_id, data.get("max_batch"), worker=f"api:{request.user}", force=data["force"]
        )
        return Response(result.as_dict(), status=status.HTTP_201_CREATED)

    @extend_schema(request=HaltJobInput, responses={204: None, **ERRORS})
    @action(detail=True, methods=["post"], url_path="halt-job")
    def halt_job(self, request: Request, pk: str) -> Response:
        job_id = self._job(request, pk)
        data = _body(HaltJobInput, request)
        lifecycle.halt_job(
            job_id, data.get("batch_marking") or None, instance_exec_id=data.get("instance_exec_id")
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=TermInput, responses={204: None, **ERRORS})
    @action(detail=True, methods=["post"], url_path="term-job")
    def term_job(self, request: Request, pk: str) -> Response:
        job_id = self._job(request, pk)
        data = _body(TermInput, request)
        lifecycle.term_job(
            job_id, data.get("error") or None, instance_exec_id=data.get("instance_exec_id")
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=InitStepInput, responses={201: InitStepResultSerializer, **ERRORS})
    @action(detail=True, methods=["post"], url_path="init-step")
    def init_step(self, request: Request, pk: str) -> Response:
        step_id = self._step(request, pk)
        data = _body(InitStepInput, request)
        run_id = lifecycle.init_step(
            step_id, worker=f"api:{request.user}", instance_exec_id=data.get("instance_exec_id")
        )
        return Response({"sub_instance_exec_id": run_id}, status=status.HTTP_201_CREATED)

    @extend_schema(request=StepInput, responses={204: None, **ERRORS})
    @action(detail=True, methods=["post"], url_path="halt-step")
    def halt_step(self, request: Request, pk: str) -> Response:
        step_id = self._step(request, pk)
        data = _body(StepInput, request)
        lifecycle.halt_step(step_id, instance_exec_id=data.get("instance_exec_id"))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=TermInput, responses={204: None, **ERRORS})
    @action(detail=True, methods=["post"], url_path="term-step")
    def term_step(self, request: Request, pk: str) -> Response:
        step_id = self._step(request, pk)
        data = _body(TermInput, request)
        lifecycle.term_step(
            step_id, data.get("error") or None, instance_exec_id=data.get("instance_exec_id")
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=RunNowInput,
        responses={201: RunStartedSerializer, 200: NothingNewSerializer, **ERRORS},
        description=(
            "Run now: start a run of the job (its batches claimed now) and send its steps to "
            "the workers. The answer names the new run; 409 when a run is going (104) or "
            "there is nothing new to consume (112, 109). A job whose first steps scan is "
            "checked first: 200 and no run when its locations hold nothing new. A paused "
            'job is 409 (116) unless the body says {"force": true}.'
        ),
    )
    @action(detail=True, methods=["post"])
    def run(self, request: Request, pk: str) -> Response:
        job = self._job(request, pk)
        body = _body(RunNowInput, request)
        return started_answer(
            request, tasks.start_run(job, body.get("max_batch"), force=body["force"])
        )

    @extend_schema(
        request=TermInput,
        responses={200: TerminatedSerializer, **ERRORS},
        description="Terminate the job's running run; its worker cancels its Spark work.",
    )
    @action(detail=True, methods=["post"])
    def terminate(self, request: Request, pk: str) -> Response:
        job = self._job(request, pk)
        reason = _body(TermInput, request).get("error") or f"terminated by {request.user}"
        return Response({"terminated_run": orchestrator.terminate(job, reason)})

    @extend_schema(
        methods=["GET"],
        responses={200: ScheduleSerializer, 404: ERRORS[404]},
        description="The schedule.",
    )
    @extend_schema(
        methods=["PUT"],
        request=ScheduleSerializer,
        responses={200: ScheduleSerializer, **ERRORS},
        description="Set the job's schedule (no cron and no interval: no timed schedule).",
    )
    @action(detail=True, methods=["get", "put"])
    def schedule(self, request: Request, pk: str) -> Response:
        if request.method == "GET":
            job = self.get_object().pk
            return Response(ScheduleSerializer(schedules.schedule_of(job)).data)
        job = self._job(request, pk)
        body = _body(ScheduleSerializer, request)
        shown = schedules.set_schedule(job, schedules.Schedule(**body))
        return Response(ScheduleSerializer(shown).data)

    @extend_schema(
        request=None,
        responses={200: ScheduleSerializer, 403: ERRORS[403], 404: ERRORS[404]},
        summary="Pause a job: no schedule, upstream or replay trigger starts it",
        description=(
            "Whether or not the job has a timed schedule: Beat skips it, its upstream jobs "
            "do not start it, a run sent before the pause and the next rebuild of a backfill "
            "do not start, and run now answers 116 unless forced."
        ),
    )
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, pk: str) -> Response:
        return Response(ScheduleSerializer(schedules.pause(self._job(request, pk))).data)

    @extend_schema(
        request=None,
        responses={200: ScheduleSerializer, 403: ERRORS[403], 404: ERRORS[404]},
        summary="Resume a paused job",
    )
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str) -> Response:
        return Response(ScheduleSerializer(tasks.resume(self._job(request, pk))).data)


class PropertyViewSet(ScopedViewSet):
    """Properties of processes by config group; a developer of the team edits them."""

    serializer_class = PropertySerializer
    filterset_class = PropertyFilter
    ordering_fields = ("id", "config_group", "key")
    delete_role = Role.DEVELOPER

    def base_queryset(self):
        return Property.objects.filter(process__deleted=False)

    def owner_team(self, data: dict):
        return data["process"].bus_domain.team if data.get("process") else None

    def write(self, serializer: serializers.BaseSerializer[Any], data: dict[str, Any]) -> None:
        pk = serializer.instance.pk if serializer.instance is not None else None
        serializer.instance = registry.save_property(registry.PropertySpec.of(data), pk)


@extend_schema_view(
    create=extend_schema(request=TemplateSerializer, responses={201: TemplateSerializer}),
    update=extend_schema(request=TemplateSerializer, responses={200: TemplateSerializer}),
)
class TemplateViewSet(ScopedViewSet):
    """Job templates with their step templates, written and read as whole documents; a job
    is made from one with ``instantiate``."""

    serializer_class = TemplateSerializer
    filterset_class = TemplateFilter
    ordering_fields = ("id", "name", "add_ts")
    delete_role = Role.DEVELOPER
    http_method_names = ["get", "post", "put", "delete", "head", "options"]

    def base_queryset(self):
        return ProcessTemplate.objects.filter(parent=None, deleted=False).select_related(
            "bus_domain", "process_type"
        )

    def owner_team(self, data: dict):
        return data["application"].team if data.get("application") else None

    def perform_create(self, serializer: serializers.BaseSerializer[Any]) -> None:
        assert isinstance(serializer, TemplateSerializer)  # the serializer_class
        require_role(self.request.user, self.owner_team(serializer.validated_data), Role.DEVELOPER)
        serializer.instance = registry.save_template(serializer.spec())

    def perform_update(self, serializer: serializers.BaseSerializer[Any]) -> None:
        assert isinstance(serializer, TemplateSerializer)  # the serializer_class
        assert serializer.instance is not None  # an update is of the object looked up
        require_role(self.request.user, self.owner_team(serializer.validated_data), Role.DEVELOPER)
        serializer.instance = registry.save_template(serializer.spec(), serializer.instance.pk)

    def perform_destroy(self, instance: ProcessTemplate) -> None:
        registry.delete_template(instance.pk)

    @extend_schema(
        request=InstantiateSerializer,
        responses={201: ProcessDetailSerializer, **REGISTRY_ERRORS},
        description="Create a job from the template: step s becomes <name>_<s>; upstream "
        "jobs per step; properties override the template's (\"group\" for the job's own, "
        '"step.group" for a step\'s).',
    )
    @action(detail=True, methods=["post"])
    def instantiate(self, request: Request, pk: str) -> Response:
        template = self.get_object()
        body = InstantiateSerializer(data=request.data, context={"request": request})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        application = data.get("application") or template.bus_domain
        require_role(request.user, application.team, Role.DEVELOPER)
        schedule = data.get("schedule")
        job = registry.instantiate(
            template,
            name=data["name"],
            bus_domain=application,
            upstream={step: [u.pk for u in jobs] for step, jobs in data["upstream"].items()},
            properties=data["properties"],
            schedule=schedules.Schedule(**schedule) if schedule else None,
        )
        return Response(ProcessDetailSerializer(job).data, status=status.HTTP_201_CREATED)


class ServerReadSerializer(ServerSerializer):
    secrets_readable = serializers.BooleanField(
        read_only=True,
        help_text="False: a stored secret cannot be decrypted with any key of "
        "FIELD_ENCRYPTION_KEY (unreadable, re-enter it).",
    )

    class Meta(ServerSerializer.Meta):
        fields = (*ServerSerializer.Meta.fields, "secrets_readable")


class ServerViewSet(ScopedViewSet):
    """Servers holding files. Members of the team read them; admins write them. Passwords
    and keys are write-only."""

    serializer_class = ServerReadSerializer
    filterset_fields = ("team", "server_type", "name")
    ordering_fields = ("id", "name")
    write_role = Role.ADMIN

    def base_queryset(self):
        return Server.objects.all()

    def owner_team(self, data: dict):
        return data.get("team")

    def write(self, serializer: serializers.BaseSerializer[Any], data: dict[str, Any]) -> None:
        # Secrets and grants left out of the input are kept: they are never read back, so
        # what is stored is not ``data``'s to repeat.
        given = serializer.validated_data
        spec = registry.ServerSpec(
            team=data["team"],
            name=data["name"],
            server_type=data["server_type"],
            root=data.get("root") or "",
            metainfo=data.get("metainfo") or "",
            login_user=data.get("login_user") or "",
            server_ip=data.get("server_ip") or "",
            login_password=given.get("login_password"),
            ssh_private_key=given.get("ssh_private_key"),
            granted_teams=given.get("granted_teams"),
        )
        pk = serializer.instance.pk if serializer.instance is not None else None
        serializer.instance = registry.save_server(spec, pk)

    def perform_destroy(self, instance: Server) -> None:
        # Its grant is the installation's: the teams granted it lose their storage with it.
        if grants_storage(instance) and not self.request.user.is_superuser:
            raise PermissionDenied(
                "Only an installation superuser deletes a server that grants a storage root."
            )
        instance.delete()
