"""The filters of the registry's lists: what an operator narrows a list down by."""

from __future__ import annotations

from django.db.models import QuerySet
from django_filters import rest_framework as filters

from bdre.filters import DayRangeFilter, FilterSet, IdFilter, date_range
from processes.models import (
    ExecState,
    InstanceExec,
    Process,
    ProcessLog,
    ProcessTemplate,
    Property,
    Trigger,
)


class ProcessFilter(FilterSet):
    application = filters.CharFilter(field_name="bus_domain__name", help_text="application name")
    name = filters.CharFilter(lookup_expr="icontains", help_text="part of the name")
    is_job = filters.BooleanFilter(field_name="parent", lookup_expr="isnull")
    upstream = IdFilter(field_name="enqueuing_processes", help_text="upstream job id")
    added = date_range("add_ts")

    class Meta:
        model = Process
        fields = ("bus_domain", "parent", "process_type", "process_template")


class RunFilter(FilterSet):
    application = IdFilter(field_name="process__bus_domain")
    job = IdFilter(field_name="process__parent", help_text="runs of a job's steps")
    is_job = filters.BooleanFilter(field_name="parent", lookup_expr="isnull")
    started = date_range("start_ts")
    ended = date_range("end_ts")
    state = filters.ChoiceFilter(
        field_name="exec_state_id",
        choices=[(s.name, s.name) for s in ExecState],
        method="filter_state",
        help_text="the state by name: " + ", ".join(s.name for s in ExecState),
    )
    trigger = filters.ChoiceFilter(
        choices=Trigger.choices, help_text="what started a job run (step runs have none)"
    )

    class Meta:
        model = InstanceExec
        fields = ("process", "parent", "exec_state", "target_batch", "worker")

    def filter_state(self, queryset, name: str, value: str):
        return queryset.filter(exec_state_id=ExecState[value])


class JobRunFilter(RunFilter):
    """The runs page: job runs only, so ``job`` is the run's own process, and its dates
    are whole days (a day's runs are in from its start to its end)."""

    job = IdFilter(field_name="process", help_text="the job")
    started = DayRangeFilter(
        field_name="start_ts", help_text="started_after and started_before, whole days"
    )
    unresolved = filters.BooleanFilter(
        method="_unresolved", help_text="failed runs whose batch no later run delivered"
    )

    def _unresolved(self, queryset: QuerySet, name: str, value: bool | None) -> QuerySet:
        if not value:
            return queryset
        return queryset.filter(pk__in=InstanceExec.objects.unresolved_failures().values("pk"))


class PropertyFilter(FilterSet):
    class Meta:
        model = Property
        fields = ("process", "config_group", "key")


class LogFilter(FilterSet):
    added = date_range("add_ts")

    class Meta:
        model = ProcessLog
        fields = ("process", "log_category", "message_id")


class TemplateFilter(FilterSet):
    name = filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = ProcessTemplate
        fields = ("bus_domain", "process_type")
