from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from bdre.admin import CheckedForm, MasterTableAdmin, ReadOnlyAdmin, ScopedAdmin, ServiceAdmin
from bdre.errors import BdreError
from processes import orchestrator, registry, scan_gate, schedules, tasks
from processes.models import (
    BusDomain,
    ExecState,
    ExecStatus,
    InstanceExec,
    Operation,
    Process,
    ProcessLog,
    ProcessTemplate,
    ProcessTemplateProperty,
    ProcessType,
    Property,
    Server,
    WorkflowType,
)

admin.site.register(ExecStatus, MasterTableAdmin)
admin.site.register(WorkflowType, MasterTableAdmin)


@admin.register(ProcessType)
class ProcessTypeAdmin(MasterTableAdmin):
    list_display = ("id", "name", "parent_process_type", "job_kind")
    list_filter = ("parent_process_type",)


class ApplicationForm(CheckedForm):
    class Meta:
        model = BusDomain
        fields = ("name", "description", "owner", "team")

    def check(self, data: dict[str, Any]) -> None:
        registry.check_application(registry.ApplicationSpec.of(data), self.instance)


@admin.register(BusDomain)
class BusDomainAdmin(ServiceAdmin):
    form = ApplicationForm
    list_display = ("name", "team", "owner", "add_ts")
    list_filter = ("team",)
    search_fields = ("name", "description", "owner")

    def write(self, obj: BusDomain) -> BusDomain:
        spec = registry.ApplicationSpec.of(vars(obj) | {"team": obj.team})
        return registry.save_application(spec, obj.pk)


class PropertyInline(admin.TabularInline):
    """A job's properties, shown; written on their own admin page or the job's page, which
    check them as the API does."""

    model = Property
    extra = 0
    fields = ("config_group", "key", "value", "description")
    readonly_fields = fields
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class StepInline(admin.TabularInline):
    model = Process
    fk_name = "parent"
    extra = 0
    fields = ("name", "process_type", "can_recover", "batch_cut_pattern", "deleted")
    show_change_link = True
    verbose_name = "step"
    verbose_name_plural = "steps"


@admin.register(Process)
class ProcessAdmin(ScopedAdmin):
    list_display = (
        "id",
        "name",
        "parent",
        "process_type",
        "bus_domain",
        "batch_cut_pattern",
        "max_retries",
        "deleted",
    )
    list_filter = ("deleted", "process_type", "bus_domain", ("parent", admin.EmptyFieldListFilter))
    search_fields = ("name", "description")
    list_select_related = ("parent", "process_type", "bus_domain")
    raw_id_fields = ("parent", "process_template", "schedule")
    filter_horizontal = ("enqueuing_processes", "next_processes")
    inlines = (StepInline, PropertyInline)
    actions = ("run_now", "terminate", "pause_schedule", "resume_schedule")

    def _each_job(
        self,
        request: HttpRequest,
        queryset: QuerySet[Process],
        verb: str,
        call: Callable[[int], object],
    ) -> None:
        """Call a service for each selected job; a job that refuses says why."""
        done = []
        for job in queryset.filter(parent__isnull=True):
            try:
                result = call(job.pk)
            except (BdreError, ValidationError) as exc:
                text = exc.message if isinstance(exc, BdreError) else "; ".join(exc.messages)
                self.message_user(request, f"{job.name}: {text}", messages.ERROR)
                continue
            if isinstance(result, scan_gate.Quiet):  # its scans found nothing new: no run
                self.message_user(
                    request, f"{job.name}: no run started, {result.detail}", messages.INFO
                )
            else:
                done.append(job.name)
        if done:
            self.message_user(request, f"{verb}: {', '.join(done)}", messages.SUCCESS)

    @admin.action(description="Run the selected jobs now")
    def run_now(self, request: HttpRequest, queryset: QuerySet[Process]) -> None:
        self._each_job(request, queryset, "Started", tasks.start_run)

    @admin.action(description="Terminate the running run of the selected jobs")
    def terminate(self, request: HttpRequest, queryset: QuerySet[Process]) -> None:
        self._each_job(
            request,
            queryset,
            "Terminated",
            lambda pk: orchestrator.terminate(pk, f"terminated by {request.user} in the admin"),
        )

    @admin.action(description="Pause the schedule of the selected jobs")
    def pause_schedule(self, request: HttpRequest, queryset: QuerySet[Process]) -> None:
        self._each_job(request, queryset, "Paused", schedules.pause)

    @admin.action(description="Resume the schedule of the selected jobs")
    def resume_schedule(self, request: HttpRequest, queryset: QuerySet[Process]) -> None:
        self._each_job(request, queryset, "Resumed", tasks.resume)


class PropertyForm(CheckedForm):
    # A property is unique per process, group and key: the model's constraint says it.
    service_checks_unique = False

    class Meta:
        model = Property
        fields = ("process", "config_group", "key", "value", "description")

    def check(self, data: dict[str, Any]) -> None:
        registry.check_property(registry.PropertySpec.of(data))


@admin.register(Property)
class PropertyAdmin(ServiceAdmin):
    form = PropertyForm
    list_display = ("process", "config_group", "key", "value")
    list_filter = ("config_group",)
    search_fields = ("process__name", "key", "value")
    raw_id_fields = ("process",)

    def write(self, obj: Property) -> Property:
        spec = registry.PropertySpec.of(vars(obj) | {"process": obj.process})
        return registry.save_property(spec, obj.pk)


class TemplatePropertyInline(admin.TabularInline):
    model = ProcessTemplateProperty
    extra = 0


@admin.register(ProcessTemplate)
class ProcessTemplateAdmin(ScopedAdmin):
    list_display = ("id", "name", "parent", "process_type", "bus_domain", "deleted")
    list_filter = ("deleted", "process_type", "bus_domain")
    search_fields = ("name", "description")
    raw_id_fields = ("parent",)
    filter_horizontal = ("next_templates",)
    inlines = (TemplatePropertyInline,)


@admin.register(ProcessTemplateProperty)
class ProcessTemplatePropertyAdmin(ScopedAdmin):
    list_display = ("template", "config_group", "key", "value")
    search_fields = ("template__name", "key")
    raw_id_fields = ("template",)


@admin.register(InstanceExec)
class InstanceExecAdmin(ReadOnlyAdmin, ScopedAdmin):
    """Runs, job and step, change state through the lifecycle only (the terminate action
    here, as in the API): an edited state would skip what the lifecycle does with it (the
    run's queue rows, its steps, the worker's heartbeat)."""

    list_display = (
        "id",
        "process",
        "parent",
        "exec_state",
        "start_ts",
        "end_ts",
        "lease_expires_at",
        "worker",
        "counter_summary",
    )
    list_filter = ("exec_state", "process")
    search_fields = ("process__name", "worker", "spark_application_id", "error")
    list_select_related = ("process", "exec_state")
    raw_id_fields = ("process", "parent", "target_batch")
    date_hierarchy = "start_ts"

    actions = ("terminate",)

    @admin.action(description="Terminate the selected running job runs")
    def terminate(self, request: HttpRequest, queryset: QuerySet[InstanceExec]) -> None:
        done = []
        for run in queryset.select_related("process"):
            if run.parent_id is not None or run.exec_state_id != ExecState.RUNNING:
                # The lifecycle terminates a job's running run; a step's run stops with it.
                what = "a step's run: terminate its job's run" if run.parent_id else "not running"
                self.message_user(request, f"run {run.pk}: {what}", messages.ERROR)
                continue
            try:
                orchestrator.terminate(run.process_id, f"terminated by {request.user} in the admin")
                done.append(str(run.pk))
            except BdreError as exc:
                self.message_user(request, f"run {run.pk}: {exc.message}", messages.ERROR)
        if done:
            self.message_user(request, f"Terminated: runs {', '.join(done)}", messages.SUCCESS)

    @admin.display(description="counters")
    def counter_summary(self, obj: InstanceExec) -> str:
        shown = [(k, v) for k, v in (obj.counters or {}).items() if isinstance(v, int | float)]
        return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in shown if v) or "-"


@admin.register(Operation)
class OperationAdmin(ReadOnlyAdmin, ScopedAdmin):
    """Backfills, rewinds, reprocesses and catch-ups as they were started: a record, changed
    by nothing (processes.operations)."""

    list_display = ("id", "name", "kind", "bus_domain", "created_by", "created_at")
    list_filter = ("kind",)
    search_fields = ("name",)
    list_select_related = ("bus_domain", "created_by")
    date_hierarchy = "created_at"


@admin.register(ProcessLog)
class ProcessLogAdmin(ScopedAdmin):
    list_display = ("id", "add_ts", "process", "instance_exec", "log_category", "message_id")
    list_filter = ("log_category",)
    search_fields = ("process__name", "message_id", "message")
    raw_id_fields = ("process", "instance_exec")


UNREADABLE = "unreadable, re-enter it"


def server_spec(obj: Server) -> registry.ServerSpec:
    return registry.ServerSpec(
        team=obj.team,
        name=obj.name,
        server_type=obj.server_type,
        root=obj.root,
        metainfo=obj.metainfo,
        login_user=obj.login_user,
        server_ip=obj.server_ip,
        login_password=obj.login_password,
        ssh_private_key=obj.ssh_private_key,
    )


class ServerForm(CheckedForm):
    """Secrets are write-only: the form never renders a stored value, and a blank field keeps
    the one already stored."""

    login_password = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Leave blank to keep the stored password.",
    )
    # A key spans lines, which a password input would strip; the textarea starts empty.
    ssh_private_key = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 4, "autocomplete": "off", "spellcheck": "false"}),
        help_text="Paste a new key to replace the stored one; leave blank to keep it.",
    )
    clear_secrets = forms.BooleanField(required=False, help_text="Remove both stored secrets.")

    class Meta:
        model = Server
        fields = (
            "team",
            "server_type",
            "name",
            "metainfo",
            "server_ip",
            "login_user",
            "login_password",
            "ssh_private_key",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("login_password", "ssh_private_key"):
            self.initial[name] = ""

    def check(self, data: dict[str, Any]) -> None:
        spec = registry.ServerSpec(
            team=data["team"], name=data["name"], server_type=data["server_type"]
        )
        registry.check_server(spec, self.instance.pk)

    def clean_ssh_private_key(self) -> str:
        # Browsers submit textareas with CRLF line ends; key files want LF.
        return self.cleaned_data["ssh_private_key"].replace("\r\n", "\n")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # ModelForm.clean returns its cleaned_data
        stored = Server.objects.filter(pk=self.instance.pk).first() if self.instance.pk else None
        for name in ("login_password", "ssh_private_key"):
            if data.get("clear_secrets"):
                data[name] = ""
            elif not data.get(name) and stored is not None:
                data[name] = getattr(stored, name)
        return data


@admin.register(Server)
class ServerAdmin(ServiceAdmin):
    form = ServerForm
    list_display = ("name", "server_type", "team", "server_ip", "login_user", "secret")
    list_filter = ("server_type", "team")
    search_fields = ("name", "server_ip", "metainfo")
    readonly_fields = ("secret",)

    @admin.display(description="secret stored")
    def secret(self, obj: Server) -> str:
        if not obj.secrets_readable:
            # No key of FIELD_ENCRYPTION_KEY reads it (docs/security.md, key rotation).
            return UNREADABLE
        return "yes" if obj.login_password or obj.ssh_private_key else "no"

    def write(self, obj: Server) -> Server:
        return registry.save_server(server_spec(obj), obj.pk)
