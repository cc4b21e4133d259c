"""Validation of OpenLineage events against the schema as its Python client ships it.

The client (``openlineage-python``) carries the OpenLineage JSON schema as the classes it
generates from it (``openlineage.client.generated``): one attrs class per ``$defs`` entry
and per facet, with the required properties, their types, enums and format checks (UUID run
ids, ISO date-times). The wheel holds no ``.json`` copy of the schema, so an event is
validated by building it into those classes, strictly: a missing required property, an
unknown property of a core object, a value of the wrong type or a facet whose ``_schemaURL``
is not the client's own is an error."""

from __future__ import annotations

import enum
import sys
import types
import typing
from typing import Any

import attr
from openlineage.client.generated import (
    base,
    column_lineage_dataset,
    environment_variables_run,
    error_message_run,
    job_type_job,
    output_statistics_output_dataset,
    parent_run,
    processing_engine_run,
    schema_dataset,
    source_code_location_job,
    sql_job,
    tags_job,
    tags_run,
)

# BDRE's facets, and those the client adds as it emits (``tags`` always, the others when its
# configuration asks for them)
FACETS = {
    "run": {
        "parent": parent_run.ParentRunFacet,
        "errorMessage": error_message_run.ErrorMessageRunFacet,
        "processing_engine": processing_engine_run.ProcessingEngineRunFacet,
        "tags": tags_run.TagsRunFacet,
        "environmentVariables": environment_variables_run.EnvironmentVariablesRunFacet,
    },
    "job": {
        "jobType": job_type_job.JobTypeJobFacet,
        "sql": sql_job.SQLJobFacet,
        "tags": tags_job.TagsJobFacet,
        "sourceCodeLocation": source_code_location_job.SourceCodeLocationJobFacet,
    },
    "dataset": {
        "schema": schema_dataset.SchemaDatasetFacet,
        "columnLineage": column_lineage_dataset.ColumnLineageDatasetFacet,
    },
    "output": {
        "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet
    },
}


class Invalid(ValueError):
    pass


def _hints(cls: type) -> dict[str, Any]:
    """The types of the attrs fields (annotations are strings: evaluated in the module of
    the class that declares each field)."""
    hints = {}
    for klass in reversed(cls.__mro__):
        module = sys.modules.get(klass.__module__)
        for name, annotation in vars(klass).get("__annotations__", {}).items():
            if isinstance(annotation, str):
                try:
                    annotation = eval(annotation, vars(module))
                except NameError:
                    continue  # a ClassVar of a mixin, not a field
            hints[name] = annotation
    return hints


def _build(cls: type, data: Any, path: str, facets: str | None = None) -> Any:
    if not isinstance(data, dict):
        raise Invalid(f"{path}: an object is required, got {type(data).__name__}")
    # data keys are the attribute names (``eventTime``, ``_producer``, ``_deleted``)
    fields = {f.name: f for f in attr.fields(cls)}
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            raise Invalid(f"{path}: unknown property {key!r} of {cls.__name__}")
        if not field.init or key in ("_producer", "_schemaURL"):
            continue  # checked below
        kwargs[field.alias] = _value(hints[field.name], value, f"{path}.{key}", key)
    for name, field in fields.items():
        if field.default is attr.NOTHING and field.init and name not in data:
            raise Invalid(f"{path}: {cls.__name__} requires {name!r}")
    try:
        built = cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise Invalid(f"{path}: {exc}") from exc
    if issubclass(cls, base.BaseFacet):
        if data.get("_schemaURL") != cls._get_schema():
            raise Invalid(
                f"{path}: _schemaURL {data.get('_schemaURL')!r} is not {cls._get_schema()!r}"
            )
        if not data.get("_producer"):
            raise Invalid(f"{path}: _producer is required")
    if issubclass(cls, base.BaseEvent) and data.get("schemaURL") != cls._get_schema():
        raise Invalid(f"{path}: schemaURL {data.get('schemaURL')!r} is not {cls._get_schema()!r}")
    return built


def _facets(kind: str, data: Any, path: str) -> dict:
    if not isinstance(data, dict):
        raise Invalid(f"{path}: facets must be an object")
    known = FACETS[kind]
    built = {}
    for name, facet in data.items():
        if name not in known:
            raise Invalid(f"{path}: facet {name!r} is not one this validator knows")
        built[name] = _build(known[name], facet, f"{path}.{name}")
    return built


def _value(hint: Any, value: Any, path: str, key: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return None
        return _value(options[0], value, path, key)
    if origin is dict:
        _key_type, value_type = typing.get_args(hint)
        facet_kind = {
            base.RunFacet: "run",
            base.JobFacet: "job",
            base.DatasetFacet: "dataset",
            base.OutputDatasetFacet: "output",
        }.get(value_type)
        if facet_kind:
            return _facets(facet_kind, value, path)
        if not isinstance(value, dict):
            raise Invalid(f"{path}: an object is required")
        return {k: _value(value_type, v, f"{path}.{k}", k) for k, v in value.items()}
    if origin is list:
        (item,) = typing.get_args(hint)
        if not isinstance(value, list):
            raise Invalid(f"{path}: an array is required")
        return [_value(item, v, f"{path}[{i}]", key) for i, v in enumerate(value)]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError as exc:
            raise Invalid(f"{path}: {value!r} is not one of {[e.value for e in hint]}") from exc
    if attr.has(hint):
        return _build(hint, value, path)
    if hint is str and not isinstance(value, str):
        raise Invalid(f"{path}: a string is required, got {value!r}")
    if hint is int and (not isinstance(value, int) or isinstance(value, bool)):
        raise Invalid(f"{path}: an integer is required, got {value!r}")
    if hint is bool and not isinstance(value, bool):
        raise Invalid(f"{path}: a boolean is required, got {value!r}")
    return value


def validate_run_event(event: dict[str, Any]) -> base.RunEvent:
    """The event as the client's ``RunEvent``, or :class:`Invalid` saying what is wrong."""
    return _build(base.RunEvent, event, "event")
