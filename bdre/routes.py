"""The REST API's routes. Each app registers its resources in its own ``api_routes`` module,
which ``bdre.api_urls`` finds (``autodiscover_modules``), so the project knows no app's
views: the apps depend on ``bdre``, never the other way."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.urls import URLPattern
from rest_framework import viewsets
from rest_framework.routers import DefaultRouter

from bdre.ids import ID_REGEX
from bdre.serializers import master_serializer

router = DefaultRouter()
# Routes that are not a viewset of the router (a graph drawing, the token endpoint).
extra_urls: list[URLPattern] = []
# ``master/<prefix>``: the seeded lookup tables, read-only for any signed-in user.
MASTER_TABLES: dict[str, type[models.Model]] = {}


def master_viewset(model: type[models.Model]) -> type[viewsets.ReadOnlyModelViewSet[Any]]:
    """A read-only list of a master table, for any signed-in user."""
    return type(
        f"{model.__name__}ViewSet",
        (viewsets.ReadOnlyModelViewSet,),
        {
            "queryset": model._default_manager.all(),
            "serializer_class": master_serializer(model),
            "lookup_value_regex": ID_REGEX,
            "pagination_class": None,
            "filter_backends": [],
            "__doc__": f"{str(model._meta.verbose_name_plural).capitalize()} (read-only, seeded).",
        },
    )


def register_master(prefix: str, model: type[models.Model]) -> None:
    MASTER_TABLES[prefix] = model
    router.register(f"master/{prefix}", master_viewset(model), basename=prefix)
