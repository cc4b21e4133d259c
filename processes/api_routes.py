"""The registry's and the runs' REST resources (bdre.routes)."""

from __future__ import annotations

from bdre.routes import register_master, router
from processes.api import (
    ApplicationViewSet,
    ProcessViewSet,
    PropertyViewSet,
    ServerViewSet,
    TemplateViewSet,
)
from processes.models import ExecStatus, ProcessType, WorkflowType
from processes.operation_api import OperationViewSet
from processes.run_api import LogViewSet, RunViewSet

router.register("applications", ApplicationViewSet, basename="application")
router.register("processes", ProcessViewSet, basename="process")
router.register("templates", TemplateViewSet, basename="template")
router.register("properties", PropertyViewSet, basename="property")
router.register("runs", RunViewSet, basename="run")
router.register("logs", LogViewSet, basename="log")
router.register("servers", ServerViewSet, basename="server")
router.register("operations", OperationViewSet, basename="operation")
register_master("exec-statuses", ExecStatus)
register_master("process-types", ProcessType)
register_master("workflow-types", WorkflowType)
