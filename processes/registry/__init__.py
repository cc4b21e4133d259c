"""Registering jobs, their steps and templates: each change one transaction, validated as a
whole. The registry is the one place that decides what may be registered: the API's
serializers and the pages' forms only parse, and put its errors on their fields.

Errors are ``django.core.exceptions.ValidationError`` keyed by the field at fault, so that
forms, the API and the CLI can all say which input was wrong; a change the current state
forbids (deleting a running job) is a :class:`bdre.errors.Conflict`.

By concern:

- :mod:`~processes.registry.jobs`: jobs and their steps, whole or one process at a time;
- :mod:`~processes.registry.edits`: a registered job edited as a whole (its page);
- :mod:`~processes.registry.names`: names are per team;
- :mod:`~processes.registry.applications`: applications and servers;
- :mod:`~processes.registry.properties`: properties and their checks;
- :mod:`~processes.registry.graph`: the step graph (links by name, no cycle);
- :mod:`~processes.registry.pipelines`: whole pipelines, export and import;
- :mod:`~processes.registry.templates`: templates, and jobs made from them.
"""

from django.core.exceptions import ValidationError

from processes.registry.applications import (
    ApplicationSpec,
    ServerSpec,
    check_application,
    check_server,
    save_application,
    save_server,
)
from processes.registry.edits import JobEdit, NewStep, StepEdit, edit_job
from processes.registry.graph import check_acyclic, check_workflow
from processes.registry.jobs import (
    ProcessChanges,
    StepSpec,
    create_job,
    create_process,
    delete_process,
    update_process,
)
from processes.registry.names import (
    check_application_move,
    check_names,
    lock_teams,
    move_files,
)
from processes.registry.pipelines import JobSpec, export_job, register_pipeline
from processes.registry.properties import (
    GROUP_LENGTH,
    KEY_LENGTH,
    Properties,
    PropertySpec,
    check_properties,
    check_property,
    check_step_properties,
    replace_properties,
    save_property,
    set_properties,
)
from processes.registry.templates import (
    TemplateSpec,
    TemplateStepSpec,
    delete_template,
    instantiate,
    save_template,
    template_from_job,
    template_steps,
)

__all__ = [
    "GROUP_LENGTH",
    "KEY_LENGTH",
    "ApplicationSpec",
    "JobEdit",
    "JobSpec",
    "NewStep",
    "ProcessChanges",
    "Properties",
    "PropertySpec",
    "ServerSpec",
    "StepEdit",
    "StepSpec",
    "TemplateSpec",
    "TemplateStepSpec",
    "ValidationError",
    "check_acyclic",
    "check_application",
    "check_application_move",
    "check_names",
    "check_properties",
    "check_property",
    "check_server",
    "check_step_properties",
    "check_workflow",
    "create_job",
    "create_process",
    "delete_process",
    "delete_template",
    "edit_job",
    "export_job",
    "instantiate",
    "lock_teams",
    "move_files",
    "register_pipeline",
    "replace_properties",
    "save_application",
    "save_property",
    "save_server",
    "save_template",
    "set_properties",
    "template_from_job",
    "template_steps",
    "update_process",
]
