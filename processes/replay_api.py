"""The API of backfill, rewind and reprocess (``processes.replay``): each answers its plan
with ``"preview": true`` (what will be put back, which partitions replaced) and, without it,
puts the batches back and starts the runs (202). Mixed into the process, batch and file
view sets, which own the routes."""

from __future__ import annotations

from collections.abc import Callable

from django.db import models
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from batches.ingest import markers
from batches.models import Batch, File
from bdre.access import Role
from bdre.api import ErrorSerializer, acting_on
from bdre.errors import Code
from processes import operations, replay, tasks
from processes.models import Process


class ReplayInput(serializers.Serializer):
    preview = serializers.BooleanField(
        default=False, help_text="Only answer the plan; put nothing back, start nothing."
    )
    name = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="The operation's name (GET /api/v1/operations/); else one from what was asked.",
    )


class BackfillInput(ReplayInput):
    since = serializers.DateField(help_text="The first day (the day a batch was first built).")
    until = serializers.DateField(help_text="The last day, inclusive.")
    label_of_input = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=64,
        help_text="Only the batches made of input whose marking carries this label (EOD).",
    )

    def validate(self, attrs: dict) -> dict:
        if attrs["since"] > attrs["until"]:
            raise serializers.ValidationError({"until": "must not be before since"})
        return attrs


class RewindInput(ReplayInput):
    batch = serializers.IntegerField(
        required=False,
        min_value=0,
        help_text="The first of the step's input batches to consume again.",
    )
    from_day = serializers.DateField(
        required=False,
        help_text="Or: from the first of its input batches made on this day or later.",
    )

    def validate(self, attrs: dict) -> dict:
        if ("batch" in attrs) == ("from_day" in attrs):
            raise serializers.ValidationError("give a batch or a from_day, not both")
        return attrs


class CatchUpInput(ReplayInput):
    since = serializers.DateField(
        help_text="The first day: the upstream batches made on this day or later are queued."
    )


class CatchUpSerializer(serializers.Serializer):
    step_id = serializers.IntegerField()
    step = serializers.CharField()
    upstream_id = serializers.IntegerField(help_text="the upstream job that delivered it")
    upstream = serializers.CharField()
    batch_id = serializers.IntegerField(help_text="the batch queued for the step")
    marking = serializers.CharField()
    created = serializers.CharField(help_text="the day the batch was made")


class RebuildSerializer(serializers.Serializer):
    job_id = serializers.IntegerField()
    job = serializers.CharField()
    target_batch_id = serializers.IntegerField(help_text="the batch built again")
    marking = serializers.CharField()
    level = serializers.IntegerField(help_text="0: asked for; n: n hops downstream")
    inputs = serializers.ListField(
        child=serializers.IntegerField(), help_text="the batches it is rebuilt from"
    )
    partitions = serializers.ListField(
        child=serializers.CharField(), help_text="db.table/batch_id=N, replaced"
    )


class ReplayPlanSerializer(serializers.Serializer):
    trigger = serializers.CharField(help_text="backfill, rewind or reprocess")
    batches = serializers.ListField(
        child=serializers.IntegerField(), help_text="the batches put back first"
    )
    rebuilds = RebuildSerializer(many=True)
    partitions = serializers.ListField(child=serializers.CharField())
    paused = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="paused jobs among them: their batches wait until they are resumed",
    )


class ReplayStartedSerializer(serializers.Serializer):
    plan = ReplayPlanSerializer()
    operation = serializers.IntegerField(help_text="the operation, to follow its progress")
    operation_url = serializers.URLField()
    operation_page = serializers.URLField()
    rows_put_back = serializers.IntegerField(help_text="queue rows back in the live queue")
    runs = serializers.ListField(child=serializers.DictField(), help_text="runs started now")
    waiting = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="jobs running now: their next run rebuilds first",
    )
    paused = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="paused jobs: their batches are put back and wait until they are resumed",
    )


class MarkerInput(ReplayInput):
    key = serializers.CharField(
        required=False, max_length=1024, allow_blank=True, help_text="The new marker."
    )
    since = serializers.DateTimeField(
        required=False, help_text="Or: list again from the first file registered since then."
    )

    def validate(self, attrs: dict) -> dict:
        if ("key" in attrs) == ("since" in attrs):
            raise serializers.ValidationError("give a key or a time (since), not both")
        return attrs


class MarkerResetSerializer(serializers.Serializer):
    step_id = serializers.IntegerField()
    location = serializers.CharField()
    marker = serializers.CharField(help_text="where it stands")
    new_marker = serializers.CharField(help_text="where it goes (empty: the start)")
    registered_after = serializers.IntegerField(
        help_text="files after the new marker registered already: listed, not registered again"
    )


ERRORS = {
    400: OpenApiResponse(description="invalid input: the body names each field at fault"),
    403: OpenApiResponse(description="the user's role in the owning team is too low"),
    404: OpenApiResponse(ErrorSerializer, description="not found, or another team's"),
    409: OpenApiResponse(
        ErrorSerializer,
        description="nothing to rebuild (112), being rebuilt already or a batch waiting in "
        "the queue (114), or a batch downstream of another team's job (112)",
    ),
}


def _answer(
    request: Request,
    model: type[models.Model],
    pk: str,
    unknown: Code,
    body: type[ReplayInput],
    plan: Callable[[int, dict], replay.ReplayPlan],
) -> Response:
    acting_on(request, model, int(pk), role=Role.DEVELOPER, unknown=unknown)
    data = body(data=request.data)
    data.is_valid(raise_exception=True)
    args = data.validated_data
    planned = plan(int(pk), args)
    if args["preview"]:
        return Response(planned.as_dict())
    asked: dict[str, object] = {
        k: str(v) for k, v in args.items() if k not in ("preview", "name") and v not in ("", None)
    }
    started = tasks.start_replay(
        planned,
        asked=asked or {"batches": planned.first},
        name=args.get("name", ""),
        by=request.user,
    )
    runs = [
        {
            "run": run,
            "url": request.build_absolute_uri(reverse("run-detail", args=[run])),
            "page": request.build_absolute_uri(reverse("ui-run", args=[run])),
        }
        for run in started.runs
    ]
    return Response(
        {
            "plan": planned.as_dict(),
            **_operation_links(request, started.operation.pk),
            "rows_put_back": started.rows_put_back,
            "runs": runs,
            "waiting": started.waiting,
            "paused": started.paused,
        },
        status=status.HTTP_202_ACCEPTED,
    )


def _operation_links(request: Request, pk: int) -> dict[str, object]:
    return {
        "operation": pk,
        "operation_url": request.build_absolute_uri(reverse("operation-detail", args=[pk])),
        "operation_page": request.build_absolute_uri(reverse("ui-operation", args=[pk])),
    }


def _responses() -> dict:
    return {200: ReplayPlanSerializer, 202: ReplayStartedSerializer, **ERRORS}


class ProcessReplayActions:
    """Backfill (on a job), rewind (on a consuming step), and a scan step's marker reset."""

    @extend_schema(
        request=MarkerInput,
        responses={200: MarkerResetSerializer, **ERRORS},
        summary="Move a scan step's marker back, so that its next scan lists again",
        description=(
            "To a `key`, or to just before the first file registered `since` a time: the next "
            "scan finds what it passed over. Files already registered are not registered "
            "again (a changed one only as `scan.on_overwrite` says). A marker only moves back "
            "(400 otherwise). `preview` answers where it would go and changes nothing."
        ),
    )
    @action(detail=True, methods=["post"], url_path="reset-marker")
    def reset_marker(self, request: Request, pk: str) -> Response:
        acting_on(request, Process, int(pk), role=Role.DEVELOPER, unknown=Code.INVALID_SUB_PROCESS)
        data = MarkerInput(data=request.data)
        data.is_valid(raise_exception=True)
        args = data.validated_data
        call = markers.plan_reset if args["preview"] else markers.reset
        try:
            done = call(int(pk), key=args.get("key"), since=args.get("since"))
        except markers.MarkerRefused as exc:
            raise serializers.ValidationError({"marker": [str(exc)]}) from None
        return Response(MarkerResetSerializer(done).data)

    @extend_schema(
        request=BackfillInput,
        responses=_responses(),
        summary="Backfill: rebuild the job's batches of a date range, and downstream",
        description=(
            "The batches the job built from `since` to `until` (the day each was first "
            "built) are built again from the same input, each replacing its own "
            "partitions, and so is every batch downstream made of them. `preview` answers "
            "the plan (200); otherwise the batches are put back and the job's run started "
            "(202)."
        ),
    )
    @action(detail=True, methods=["post"])
    def backfill(self, request: Request, pk: str) -> Response:
        return _answer(
            request,
            Process,
            pk,
            Code.INVALID_PARENT_PROCESS,
            BackfillInput,
            lambda job, a: replay.plan_backfill(
                job, a["since"], a["until"], label=a.get("label_of_input", "")
            ),
        )

    @extend_schema(
        request=RewindInput,
        responses=_responses(),
        summary="Rewind a step: consume its input again from a batch or a day on",
        description=(
            "The batches the step's job made of the step's input from `batch` on (or from "
            "the first input batch made on `from_day` or later) are built "
            "again (and everything downstream of them), replacing their partitions. "
            "`preview` answers the plan (200); otherwise it starts (202)."
        ),
    )
    @action(detail=True, methods=["post"])
    def rewind(self, request: Request, pk: str) -> Response:
        return _answer(
            request,
            Process,
            pk,
            Code.INVALID_SUB_PROCESS,
            RewindInput,
            lambda step, a: replay.plan_rewind(step, a.get("batch"), since=a.get("from_day")),
        )


class CatchUpStartedSerializer(serializers.Serializer):
    queued = CatchUpSerializer(many=True)
    operation = serializers.IntegerField(help_text="the operation, to follow its progress")
    operation_url = serializers.URLField()
    operation_page = serializers.URLField()
    run = serializers.IntegerField(allow_null=True, help_text="the job's run started now")
    why_not = serializers.CharField(help_text="why no run started now, if none did")


class CatchUpAction:
    @extend_schema(
        request=CatchUpInput,
        responses={200: CatchUpSerializer(many=True), 202: CatchUpStartedSerializer, **ERRORS},
        summary="Catch a job up on what its upstream jobs delivered from a day on",
        description=(
            "The batches its upstream jobs delivered from `since` on (the day each was made) "
            "that its steps have neither consumed nor queued are queued for them as new "
            "input, and a run of the job is started: a job added downstream of one that "
            "ran before it existed gets that job's past batches, each once. `preview` "
            "answers what would be queued (200); otherwise it queues and starts (202)."
        ),
    )
    @action(detail=True, methods=["post"], url_path="catch-up")
    def catch_up(self, request: Request, pk: str) -> Response:
        acting_on(
            request, Process, int(pk), role=Role.DEVELOPER, unknown=Code.INVALID_PARENT_PROCESS
        )
        data = CatchUpInput(data=request.data)
        data.is_valid(raise_exception=True)
        args = data.validated_data
        if args["preview"]:
            planned = operations.plan_catch_up(int(pk), args["since"])
            return Response(CatchUpSerializer(planned, many=True).data)
        done = tasks.start_catch_up(
            int(pk), args["since"], name=args.get("name", ""), by=request.user
        )
        return Response(
            {
                "queued": CatchUpSerializer(done.queued, many=True).data,
                **_operation_links(request, done.operation.pk),
                "run": done.run,
                "why_not": done.why_not,
            },
            status=status.HTTP_202_ACCEPTED,
        )


class BatchReprocessAction:
    @extend_schema(
        request=ReplayInput,
        responses=_responses(),
        summary="Reprocess a batch and everything downstream of it",
        description=(
            "A job's batch is built again from its input; a registered file's batch is "
            "built into its consumers' batches again. Every batch downstream that "
            "provenance says it fed is rebuilt too, replacing exactly its own partitions. "
            "`preview` answers the plan (200); otherwise it starts (202)."
        ),
    )
    @action(detail=True, methods=["post"])
    def reprocess(self, request: Request, pk: str) -> Response:
        return _answer(
            request,
            Batch,
            pk,
            Code.UNKNOWN_ROW,
            ReplayInput,
            lambda batch, a: replay.plan_reprocess_batch(batch),
        )


class FileReprocessAction:
    @extend_schema(
        request=ReplayInput,
        responses=_responses(),
        summary="Reprocess a file and everything downstream of it",
        description=(
            "The batches made of the file's batch are built again (reading the file as it "
            "is now), and every batch downstream of them, replacing exactly their "
            "partitions. `preview` answers the plan (200); otherwise it starts (202)."
        ),
    )
    @action(detail=True, methods=["post"])
    def reprocess(self, request: Request, pk: str) -> Response:
        return _answer(
            request,
            File,
            pk,
            Code.UNKNOWN_ROW,
            ReplayInput,
            lambda file, a: replay.plan_reprocess_file(file),
        )
