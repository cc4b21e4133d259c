"""REST: runs of jobs and steps, with their counters, log lines and step logs (downloads
too), and a run's heartbeat."""

from __future__ import annotations

import json

from django.db.models import Q
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import renderers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from bdre.access import Role, scope
from bdre.api import acting_on
from bdre.errors import Code
from bdre.ids import ID_REGEX
from processes import (
    lifecycle,
    logfiles,
    runs,
    tasks,
)
from processes.api import ERRORS, started_answer
from processes.filters import LogFilter, RunFilter
from processes.models import (
    InstanceExec,
    ProcessLog,
)
from processes.serializers.runs import (
    HeartbeatResultSerializer,
    LogSerializer,
    NothingNewSerializer,
    RunDetailSerializer,
    RunLogSerializer,
    RunSerializer,
    RunStartedSerializer,
    StepLogQuery,
)


class PlainTextRenderer(renderers.BaseRenderer):
    """A step log as text; an error answer as its JSON text."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data.encode() if isinstance(data, str) else json.dumps(data).encode()


class RunViewSet(viewsets.ReadOnlyModelViewSet):
    """Runs of jobs and of their steps, with counters; a job run's detail lists its step
    runs."""

    lookup_value_regex = ID_REGEX  # anything else is a 404, never a 500
    filterset_class = RunFilter
    ordering_fields = ("id", "start_ts", "end_ts")

    def get_queryset(self):
        return scope(
            self.request.user,
            InstanceExec.objects.select_related("exec_state", "process").with_resolution(),
        )

    def get_serializer_class(self):
        return RunDetailSerializer if self.action == "retrieve" else RunSerializer

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        if self.action == "list" and page is not None:
            runs.attach_totals(page)  # a page's worth of runs, in three queries
        return page

    def get_object(self) -> InstanceExec:
        run = super().get_object()
        if self.action == "retrieve":
            runs.attach_totals([run])
        return run

    @extend_schema(
        responses={200: LogSerializer(many=True)},
        description="The log lines of the run and of its step runs, oldest first.",
    )
    @action(detail=True, methods=["get"], filterset_class=None, ordering_fields=["id"])
    def logs(self, request: Request, pk: str) -> Response:
        run = self.get_object()
        rows = ProcessLog.objects.filter(
            Q(instance_exec=run) | Q(instance_exec__parent=run)
        ).order_by("id")
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(LogSerializer(page, many=True).data)

    @extend_schema(
        parameters=[StepLogQuery],
        responses={200: RunLogSerializer},
        description="The step log of a step run, or of each step run of a job run (the lines "
        "matching q, case-insensitive; the last tail lines).",
    )
    @action(detail=True, methods=["get"], filterset_class=None, pagination_class=None)
    def log(self, request: Request, pk: str) -> Response:
        run = self.get_object()
        query = StepLogQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        logs = logfiles.read_all(run, **query.validated_data)
        return Response(RunLogSerializer({"run": run.pk, "steps": logs}).data)

    @extend_schema(
        parameters=[StepLogQuery],
        responses={
            (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="the log file"),
        },
        description="The same step logs as one text file to download.",
    )
    @action(
        detail=True,
        methods=["get"],
        url_path="log/download",
        filterset_class=None,
        pagination_class=None,
        renderer_classes=[renderers.JSONRenderer, PlainTextRenderer],
    )
    def log_download(self, request: Request, pk: str) -> HttpResponse:
        run = self.get_object()
        query = StepLogQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        text = logfiles.as_text(logfiles.read_all(run, **query.validated_data))
        response = HttpResponse(text, content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="run-{run.pk}.log"'
        return response

    def handle_exception(self, exc: Exception) -> Response:
        if self.action == "log_download":  # errors are JSON whatever the download asked for
            self.request.accepted_renderer = renderers.JSONRenderer()
            self.request.accepted_media_type = "application/json"
        return super().handle_exception(exc)

    @extend_schema(
        request=None,
        responses={201: RunStartedSerializer, 200: NothingNewSerializer, **ERRORS},
        summary="Retry a failed job run now",
        description=(
            "Its batch's dead letters put back, then a run of its job started (trigger "
            "`retry`), which rebuilds that batch; the answer names the new run, as Run now's "
            "does. 409 (118) for a run that did not fail or that a later run resolved "
            "(`resolved_by`), 409 (104) while the job runs (the rows put back wait for its "
            "next run), 409 (116) when it is paused."
        ),
    )
    @action(detail=True, methods=["post"])
    def retry(self, request: Request, pk: str) -> Response:
        acting_on(request, InstanceExec, int(pk), role=Role.DEVELOPER, unknown=Code.UNKNOWN_ROW)
        return started_answer(request, tasks.retry_run(int(pk)))

    @extend_schema(
        request=None,
        responses={200: HeartbeatResultSerializer, **{s: ERRORS[s] for s in (403, 404, 409)}},
    )
    @action(detail=True, methods=["post"])
    def heartbeat(self, request: Request, pk: str) -> Response:
        acting_on(request, InstanceExec, int(pk), role=Role.DEVELOPER, unknown=Code.UNKNOWN_ROW)
        return Response({"lease_expires_at": lifecycle.heartbeat(int(pk))})


class LogViewSet(viewsets.ReadOnlyModelViewSet):
    lookup_value_regex = ID_REGEX  # anything else is a 404, never a 500
    serializer_class = LogSerializer
    filterset_class = LogFilter
    ordering_fields = ("id", "add_ts")

    def get_queryset(self):
        return scope(self.request.user, ProcessLog.objects.all())
