"""REST: batches, the queue (requeue, discard), the archive, files (register), tables and
their shares."""

from __future__ import annotations

from typing import Any

from django.db.models import Count
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from batches import file_batches, preview, queue, selectors, tables
from batches.filters import ArchiveFilter, BatchFilter, FileFilter, QueueFilter
from batches.locations import LocationRefused
from batches.models import (
    ArchiveConsumpQueue,
    Batch,
    BatchConsumpQueue,
    File,
    Partition,
    TableShare,
)
from batches.serializers import (
    ArchiveRowSerializer,
    BatchSerializer,
    BulkDiscardInput,
    BulkQueueInput,
    BulkResultSerializer,
    DiscardInput,
    FileSerializer,
    PartitionSerializer,
    PreviewQuerySerializer,
    PreviewSerializer,
    QueueRowDetailSerializer,
    QueueRowSerializer,
    RegisteredSerializer,
    RegisterFileInput,
    TableSerializer,
    TableShareSerializer,
)
from batches.tasks import ask_preview
from bdre.access import Role, can, scope, teams
from bdre.api import ErrorSerializer, ScopedViewSet, acting_on
from bdre.errors import Code
from bdre.ids import ID_REGEX
from processes.models import Process, Server
from processes.replay_api import BatchReprocessAction, FileReprocessAction

QUEUE_ERRORS = {
    403: OpenApiResponse(description="the user's role in the owning team is too low"),
    404: OpenApiResponse(ErrorSerializer, description="unknown queue row (114)"),
    409: OpenApiResponse(ErrorSerializer, description="the row's state forbids it (110, 114)"),
}

BULK_ERRORS = {
    403: OpenApiResponse(description="a row named is of a team where the user is not developer"),
    404: OpenApiResponse(ErrorSerializer, description="no row named is one the user may see"),
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
            request, BatchConsumpQueue, int(pk), role=Role.DEVELOPER, unknown=Code.UNKNOWN_ROW
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
        row = queue.discard(row_id, data.validated_data["reason"], by=request.user.get_username())
        return Response(QueueRowSerializer(row).data)

    @extend_schema(responses={200: QueueRowDetailSerializer})
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        row = self.get_object()
        row.attempt_history = queue.attempt_history([row])[row.pk]
        return Response(QueueRowDetailSerializer(row).data)

    def _acting_on_many(self, request: Request, ids: list[int]) -> list[int]:
        """The ids the user may act on, in the order given. A row of another team is not
        told apart from an id of no row; one visible row without the developer role makes
        the whole request 403 (nothing is done), and no row the user may see a 404."""
        allowed = selectors.acting_on(request.user, ids)
        if not allowed:
            raise queue.unknown_row()
        return allowed

    def _results(self, ids: list[int], done: list[queue.RowResult]) -> Response:
        by_id = {r.id: r for r in done}
        results = []
        for pk in dict.fromkeys(ids):
            result = by_id.get(pk) or queue.RowResult(id=pk, error=queue.unknown_row())
            results.append(
                {
                    "id": pk,
                    "ok": result.error is None,
                    "row": result.row,
                    "error": result.error.as_dict() if result.error else None,
                }
            )
        return Response(BulkResultSerializer({"results": results}).data)

    @extend_schema(
        request=BulkQueueInput,
        responses={200: BulkResultSerializer, 400: ErrorSerializer, **BULK_ERRORS},
        description="Requeue many rows, each in its own transaction: the answer tells, row "
        "by row, the row requeued or the error that refused it (an id of no row, or of "
        'another team\'s row: 114, "no such queue row").',
    )
    @action(detail=False, methods=["post"], url_path="requeue", url_name="requeue-many")
    def requeue_many(self, request: Request) -> Response:
        data = BulkQueueInput(data=request.data)
        data.is_valid(raise_exception=True)
        ids = data.validated_data["ids"]
        return self._results(ids, queue.requeue_many(self._acting_on_many(request, ids)))

    @extend_schema(
        request=BulkDiscardInput,
        responses={200: BulkResultSerializer, 400: ErrorSerializer, **BULK_ERRORS},
        description="Discard many rows, each in its own transaction, with one reason; the "
        "answer as for the bulk requeue. Each row keeps its last error.",
    )
    @action(detail=False, methods=["post"], url_path="discard", url_name="discard-many")
    def discard_many(self, request: Request) -> Response:
        data = BulkDiscardInput(data=request.data)
        data.is_valid(raise_exception=True)
        ids = data.validated_data["ids"]
        done = queue.discard_many(
            self._acting_on_many(request, ids),
            data.validated_data["reason"],
            by=request.user.get_username(),
        )
        return self._results(ids, done)


class ArchiveViewSet(viewsets.ReadOnlyModelViewSet):
    """Queue rows whose work is done (processed or discarded), as they were archived."""

    lookup_value_regex = ID_REGEX  # anything else is a 404, never a 500
    serializer_class = ArchiveRowSerializer
    filterset_class = ArchiveFilter
    ordering_fields = ("id", "insert_ts", "end_ts", "archived_ts", "attempts")

    def get_queryset(self):
        return scope(self.request.user, ArchiveConsumpQueue.objects.select_related("batch_state"))


class BatchViewSet(BatchReprocessAction, viewsets.ReadOnlyModelViewSet):
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


class FileViewSet(
    FileReprocessAction,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
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
            200: OpenApiResponse(
                RegisteredSerializer, description="already registered by the team"
            ),
            400: OpenApiResponse(
                description="the path lies outside the team's storage roots (named in the "
                "answer), or the input is not valid"
            ),
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
        try:
            batch, created = file_batches.register_file_once(
                source_process_id=args["source_process_id"],
                path=args["path"],
                file_size=args["file_size"],
                file_hash=args["file_hash"],
                creation_ts=args["creation_ts"],
                server_id=args.get("server_id"),
                batch_marking=args.get("batch_marking") or None,
            )
        except LocationRefused as exc:
            return Response({"path": [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        rows = scope(request.user, BatchConsumpQueue.objects.filter(source_batch=batch))
        body = {
            "batch_id": batch.pk,
            "queued": QueueRowSerializer(rows.select_related("batch_state"), many=True).data,
        }
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class TableViewSet(viewsets.ReadOnlyModelViewSet):
    """Registered tables the user's teams may read: their own, and other teams' tables
    shared with them (``shared``: true, read-only). Steps resolve names the same way
    (``batches.tables``)."""

    lookup_value_regex = ID_REGEX  # anything else is a 404, never a 500
    serializer_class = TableSerializer
    filterset_fields = ("team", "dbname", "table_name")
    ordering_fields = ("id", "dbname", "table_name")

    def get_queryset(self):
        return selectors.tables(self.request.user).order_by("dbname", "table_name", "id")

    def get_serializer_context(self) -> dict:
        own = set(teams(self.request.user).values_list("pk", flat=True))
        return {**super().get_serializer_context(), "own_team_ids": own}

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "state",
                str,
                enum=["published", "all"],
                description="published (the default): what readers see, one a batch; all: "
                "every attempt, written, replaced and discarded ones too",
            )
        ],
        responses=PartitionSerializer(many=True),
    )
    @action(detail=True, methods=["get"])
    def partitions(self, request: Request, pk: str) -> Response:
        """The table's partitions, one record per attempt (docs/quality.md, "Write, audit,
        publish"), newest batch first: location, rows, bytes, the expectations checked,
        the step run that wrote it, when it was published or replaced."""
        table = self.get_object()
        wanted = request.query_params.get("state", "published")
        if wanted not in ("published", "all"):
            raise ValidationError({"state": "published or all"})
        if wanted == "all" and not can(request.user, table, Role.VIEWER):
            raise PermissionDenied(
                "every attempt of a table is for its team's members; a shared table's "
                "readers see its published partitions (state=published)"
            )
        rows = selectors.table_partitions(table, every_attempt=wanted == "all")
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(PartitionSerializer(page, many=True).data)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "partition",
                int,
                description="The partition (an id of tables/{id}/partitions/): any attempt of "
                "the team's own table, a published one of a shared table. Default: the newest "
                "published one.",
            ),
            OpenApiParameter(
                "rows",
                int,
                description=f"How many rows, 1 to {preview.MAX_ROWS} (default "
                f"{preview.DEFAULT_ROWS}).",
            ),
        ],
        responses={
            200: PreviewSerializer,
            404: OpenApiResponse(
                ErrorSerializer,
                description="no such table, or no such partition of it the user may see, or "
                "no partition published yet, or none of its previews asked for yet (POST "
                "asks); or the partition's files were removed (121)",
            ),
        },
    )
    @action(detail=True, methods=["get"])
    def preview(self, request: Request, pk: str) -> Response:
        """The newest preview of one of the table's partitions (docs/ui.md, "Tables"): the
        first rows as a Spark worker read them, with the columns' Spark types and each
        value as text; or, while it waits or is read, its state (POST asks for it)."""
        partition, rows = self._previewed(request, request.query_params)
        refused = preview.refusal(partition)
        if refused is not None:
            raise refused
        shown = preview.latest(partition, rows)
        if shown is None:
            raise NotFound(
                f"no preview of {rows} rows of this partition asked for yet: POST to this "
                "URL asks a Spark worker to read them"
            )
        return Response(PreviewSerializer(shown).data)

    @extend_schema(
        request=PreviewQuerySerializer,
        responses={
            200: OpenApiResponse(PreviewSerializer, description="read already"),
            202: OpenApiResponse(
                PreviewSerializer,
                description="asked for: a Spark worker reads it (state queued, then running, "
                "then done or failed); GET with the same partition and rows follows it",
            ),
            404: OpenApiResponse(
                ErrorSerializer,
                description="no such table or partition the user may see, or no partition "
                "published yet; or the partition's files were removed (121)",
            ),
        },
    )
    @preview.mapping.post
    def ask_preview(self, request: Request, pk: str) -> Response:
        """Ask a Spark worker of the Spark queue for the first rows of one of the table's
        partitions, through the steps' own session, stopped after BDRE_PREVIEW_SECONDS. A
        preview read already is answered at once; one that failed is asked again."""
        partition, rows = self._previewed(request, request.data)
        shown = ask_preview(partition, rows, request.user)
        waiting = shown.state in preview.WAITING
        return Response(
            PreviewSerializer(shown).data,
            status=status.HTTP_202_ACCEPTED if waiting else status.HTTP_200_OK,
        )

    def _previewed(self, request: Request, data: Any) -> tuple[Partition, int]:
        table = self.get_object()
        args = PreviewQuerySerializer(data=data)
        args.is_valid(raise_exception=True)
        wanted = args.validated_data.get("partition")
        partition = selectors.chosen_partition(request.user, table, wanted)
        if partition is None:
            raise NotFound(
                "no such partition of this table"
                if wanted is not None
                else "no partition of this table is published yet"
            )
        return partition, args.validated_data["rows"]


class TableShareViewSet(ScopedViewSet):
    """Shares of the tables of the user's teams: an admin of a table's team lets another
    team's steps read it (POST ``{"table": id, "team": id}``) and stops it (DELETE). A share
    is read-only: no step ever writes another team's table."""

    serializer_class = TableShareSerializer
    filterset_fields = ("table", "team")
    ordering_fields = ("id", "created_ts")
    http_method_names = ["get", "post", "delete", "head", "options"]
    write_role = Role.ADMIN
    delete_role = Role.ADMIN

    def base_queryset(self):
        return TableShare.objects.select_related("table").order_by("id")

    def owner_team(self, data: dict):
        return data["table"].team

    def perform_create(self, serializer: serializers.BaseSerializer[Any]) -> None:
        data = serializer.validated_data
        serializer.instance = tables.share(self.request.user, data["table"], data["team"])

    def perform_destroy(self, instance: TableShare) -> None:
        tables.unshare(self.request.user, instance)
