"""REST: processes and runs, with the lifecycle actions of DESIGN.md section 7."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from batches import queue as batch_queue
from batches.serializers import FileSerializer
from bdre.access import Role, scope
from bdre.api import ErrorSerializer, acting_on
from bdre.errors import Code
from processes import lifecycle, orchestrator, schedules
from processes.models import InstanceExec, Process
from processes.serializers import (
    FilesBetweenInput,
    HaltJobInput,
    HeartbeatResultSerializer,
    InitJobInput,
    InitJobResultSerializer,
    InitStepInput,
    InitStepResultSerializer,
    ProcessSerializer,
    RunQueuedSerializer,
    RunSerializer,
    ScheduleSerializer,
    StepInput,
    TerminatedSerializer,
    TermInput,
)

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


class ProcessViewSet(viewsets.ReadOnlyModelViewSet):
    lookup_value_regex = r"\d+"  # ids only: anything else is a 404, never a 500
    serializer_class = ProcessSerializer
    filterset_fields = ("bus_domain", "parent", "process_type")
    ordering_fields = ("id", "name", "add_ts")

    def get_queryset(self):
        return scope(self.request.user, Process.objects.filter(deleted=False)).prefetch_related(
            "enqueuing_processes", "next_processes"
        )

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
        responses={200: FileSerializer(many=True), **ERRORS},
        description="BDRE's GetFiles: the files of the step's batches from min to max batch id.",
    )
    @action(detail=True, methods=["get"])
    def files(self, request: Request, pk: str) -> Response:
        acting_on(request, Process, int(pk), role=Role.VIEWER, unknown=Code.INVALID_SUB_PROCESS)
        query = FilesBetweenInput(data=request.query_params)
        query.is_valid(raise_exception=True)
        files = batch_queue.files_between(sub_process_id=int(pk), **query.validated_data)
        return Response(FileSerializer(files, many=True).data)

    @extend_schema(request=InitJobInput, responses={201: InitJobResultSerializer, **ERRORS})
    @action(detail=True, methods=["post"], url_path="init-job")
    def init_job(self, request: Request, pk: str) -> Response:
        job_id = self._job(request, pk)
        data = _body(InitJobInput, request)
        result = lifecycle.init_job(job_id, data.get("max_batch"), worker=f"api:{request.user}")
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
        request=InitJobInput,
        responses={202: RunQueuedSerializer, **ERRORS},
        description="Run now: queue a whole run of the job on the workers.",
    )
    @action(detail=True, methods=["post"])
    def run(self, request: Request, pk: str) -> Response:
        job = self._job(request, pk)
        orchestrator.enqueue_run(job, _body(InitJobInput, request).get("max_batch"))
        return Response({"queued": job}, status=status.HTTP_202_ACCEPTED)

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
        methods=["GET"], responses={200: ScheduleSerializer, **ERRORS}, description="The schedule."
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

    @extend_schema(request=None, responses={200: ScheduleSerializer, **ERRORS})
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, pk: str) -> Response:
        return Response(ScheduleSerializer(schedules.pause(self._job(request, pk))).data)

    @extend_schema(request=None, responses={200: ScheduleSerializer, **ERRORS})
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str) -> Response:
        return Response(ScheduleSerializer(schedules.resume(self._job(request, pk))).data)


class RunViewSet(viewsets.ReadOnlyModelViewSet):
    lookup_value_regex = r"\d+"  # ids only: anything else is a 404, never a 500
    serializer_class = RunSerializer
    filterset_fields = ("process", "parent", "exec_state", "target_batch")
    ordering_fields = ("id", "start_ts", "end_ts")

    def get_queryset(self):
        return scope(self.request.user, InstanceExec.objects.select_related("exec_state"))

    @extend_schema(request=None, responses={200: HeartbeatResultSerializer, **ERRORS})
    @action(detail=True, methods=["post"])
    def heartbeat(self, request: Request, pk: str) -> Response:
        acting_on(
            request, InstanceExec, int(pk), role=Role.DEVELOPER, unknown=Code.PROCESS_NOT_RUNNING
        )
        return Response({"lease_expires_at": lifecycle.heartbeat(int(pk))})
