"""REST: batches, the queue (requeue, discard), the archive and files (register)."""

from __future__ import annotations

from django.db.models import Count
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from batches import queue
from batches.filters import ArchiveFilter, BatchFilter, FileFilter, QueueFilter
from batches.models import ArchiveConsumpQueue, Batch, BatchConsumpQueue, File
from batches.serializers import (
    ArchiveRowSerializer,
    BatchSerializer,
    DiscardInput,
    FileSerializer,
    QueueRowSerializer,
    RegisteredSerializer,
    RegisterFileInput,
)
from bdre.access import Role, scope
from bdre.api import ErrorSerializer, acting_on
from bdre.errors import Code
from bdre.ids import ID_REGEX
from processes.models import Process, Server

QUEUE_ERRORS = {
    403: OpenApiResponse(description="the user's role in the owning team is too low"),
    404: OpenApiResponse(ErrorSerializer, description="unknown queue row (114)"),
    409: OpenApiResponse(ErrorSerializer, description="the row's state forbids it (110, 114)"),
}


class QueueViewSet(viewsets.ReadOnlyModelViewSet):
    lookup_value_regex = ID_REGEX  # anything else is a 404, never a 500
    serializer_class = QueueRowSerializer
    filterset_class = QueueFilter
    ordering_fields = ("id", "insert_ts", "start_ts", "end_ts", "attempts")

    def get_queryset(self):
        return scope(self.request.user, BatchConsumpQueue.objects.select_related("batch_state"))

    def _row(self, request: Request, pk: str) -> int:
        acting_on(
            request, BatchConsumpQueue, int(pk), role=Role.DEVELOPER, unknown=Code.BATCH_NOT_QUEUED
        )
        return int(pk)

    @extend_schema(request=None, responses={200: QueueRowSerializer, **QUEUE_ERRORS})
    @action(detail=True, methods=["post"])
    def requeue(self, request: Request, pk: str) -> Response:
        row = queue.requeue(self._row(request, pk))
        return Response(QueueRowSerializer(row).data)

    @extend_schema(request=DiscardInput, responses={200: QueueRowSerializer, **QUEUE_ERRORS})
    @action(detail=True, methods=["post"])
    def discard(self, request: Request, pk: str) -> Response:
        row_id = self._row(request, pk)
        data = DiscardInput(data=request.data)
        data.is_valid(raise_exception=True)
        row = queue.discard(row_id, data.validated_data["reason"])
        return Response(QueueRowSerializer(row).data)


class ArchiveViewSet(viewsets.ReadOnlyModelViewSet):
    """Queue rows whose work is done (processed or discarded), as they were archived."""

    lookup_value_regex = ID_REGEX  # anything else is a 404, never a 500
    serializer_class = ArchiveRowSerializer
    filterset_class = ArchiveFilter
    ordering_fields = ("id", "insert_ts", "end_ts", "archived_ts", "attempts")

    def get_queryset(self):
        return scope(self.request.user, ArchiveConsumpQueue.objects.select_related("batch_state"))


class BatchViewSet(viewsets.ReadOnlyModelViewSet):
    """Batches: what a run produced or a file registration created, with its file count."""

    lookup_value_regex = ID_REGEX  # anything else is a 404, never a 500
    serializer_class = BatchSerializer
    filterset_class = BatchFilter
    ordering_fields = ("id", "created_ts")

    def get_queryset(self):
        batches = Batch.objects.select_related("source_instance_exec")
        # GROUP BY drops Meta.ordering: order again so that pages are stable.
        visible = scope(self.request.user, batches)
        return visible.annotate(file_count=Count("files")).order_by("-id")


class FileViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    lookup_value_regex = ID_REGEX  # anything else is a 404, never a 500
    serializer_class = FileSerializer
    filterset_class = FileFilter
    ordering_fields = ("id", "creation_ts", "file_size")

    def get_queryset(self):
        return scope(self.request.user, File.objects.all())

    @extend_schema(
        request=RegisterFileInput,
        responses={
            201: RegisteredSerializer,
            200: OpenApiResponse(RegisteredSerializer, description="already registered"),
            409: OpenApiResponse(description="already registered by another application"),
            403: QUEUE_ERRORS[403],
            404: OpenApiResponse(ErrorSerializer, description="unknown process (102)"),
        },
    )
    @action(detail=False, methods=["post"])
    def register(self, request: Request) -> Response:
        data = RegisterFileInput(data=request.data)
        data.is_valid(raise_exception=True)
        args = data.validated_data
        acting_on(
            request,
            Process,
            args["source_process_id"],
            role=Role.DEVELOPER,
            unknown=Code.INVALID_PARENT_PROCESS,
        )
        if (
            args.get("server_id") is not None
            and not scope(request.user, Server.objects.filter(pk=args["server_id"])).exists()
        ):
            return Response({"server_id": ["Unknown server."]}, status=status.HTTP_400_BAD_REQUEST)
        batch, created = queue.register_file_once(
            source_process_id=args["source_process_id"],
            path=args["path"],
            file_size=args["file_size"],
            file_hash=args["file_hash"],
            creation_ts=args["creation_ts"],
            server_id=args.get("server_id"),
            batch_marking=args.get("batch_marking") or None,
        )
        if not created and not scope(request.user, Batch.objects.filter(pk=batch.pk)).exists():
            # Registered by an application the caller cannot see: say so, show nothing of it.
            return Response(
                {"path": ["This file is already registered by another application."]},
                status=status.HTTP_409_CONFLICT,
            )
        rows = scope(request.user, BatchConsumpQueue.objects.filter(source_batch=batch))
        body = {
            "batch_id": batch.pk,
            "queued": QueueRowSerializer(rows.select_related("batch_state"), many=True).data,
        }
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)
