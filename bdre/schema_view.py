"""The OpenAPI schema's view: drf-spectacular's, each schema generated once per process and
rendered once per format.

A module of its own to avoid a circular import: the REST framework's settings import
bdre.openapi, and this view needs those settings."""

from __future__ import annotations

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils import translation
from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response
from rest_framework.settings import api_settings

# Generated schemas by (API version, language). Generating one walks every view and
# serializer (a third of a second on the 2-core machine), and the docs page, clients and
# fuzzers fetch it again and again; it is the code's, the same for every reader
# (SERVE_PUBLIC: tests/bdre/test_openapi.py).
_schemas: dict[tuple[str | None, str | None], dict] = {}
# Each kept schema's rendered body and Content-Type by media type: rendering the YAML took
# longer than a request to any other operation (0.4 s on the 2-core machine).
_rendered: dict[tuple[str | None, str | None, str], tuple[bytes, str]] = {}


class _SchemaResponse(Response):
    """A kept schema's response: its body rendered for the first reader of its format, and
    served to the next ones as it was."""

    def __init__(self, key: tuple[str | None, str | None], **kwargs) -> None:
        super().__init__(**kwargs)
        self.key = key

    @property
    def rendered_content(self):
        media_type = self.accepted_media_type
        # Only a format's own media type: parameters (`application/json; indent=2`) are any
        # reader's, and each one kept would grow the process for ever.
        if media_type != self.accepted_renderer.media_type:
            return super().rendered_content
        key = (*self.key, media_type)
        kept = _rendered.get(key)
        if kept is None:
            content = super().rendered_content
            kept = _rendered[key] = (content, self["Content-Type"])
        self["Content-Type"] = kept[1]
        return kept[0]


class SchemaView(SpectacularAPIView):
    """drf-spectacular's schema view, each schema generated once per process and rendered
    once per format."""

    def _get_schema_response(self, request):
        version = self.api_version or request.version or self._get_version_parameter(request)
        key = (version, translation.get_language())
        schema = _schemas.get(key)
        if schema is None:
            generator = self.generator_class(
                urlconf=self.urlconf, api_version=version, patterns=self.patterns
            )
            schema = generator.get_schema(request=request, public=self.serve_public)
            # Only a language and version the site has: ?lang= and ?version= are any reader's,
            # and each new one kept would grow the process for ever.
            if self.serve_public and _known(key):
                _schemas[key] = schema
        filename = self._get_filename(request, version)
        headers = {"Content-Disposition": f'inline; filename="{filename}"'}
        if key in _schemas:
            return _SchemaResponse(key, data=schema, headers=headers)
        return Response(data=schema, headers=headers)


def _known(key: tuple[str | None, str | None]) -> bool:
    version, language = key
    languages = {code.lower() for code, _ in settings.LANGUAGES} | {settings.LANGUAGE_CODE.lower()}
    allowed = api_settings.ALLOWED_VERSIONS
    return (version is None or version in (allowed or ())) and (language in languages | {None})


@receiver(setting_changed)
def forget_schemas(**kwargs) -> None:
    # Settings change only under tests (override_settings); the URLs, the REST framework's
    # and drf-spectacular's settings the schema comes from may be among them.
    _schemas.clear()
    _rendered.clear()
