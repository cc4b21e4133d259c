from django.contrib import admin
from django.contrib.auth.views import LoginView
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.templatetags.static import static
from django.urls import Resolver404, include, path, re_path, resolve
from django.views.decorators.csrf import csrf_exempt
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularSwaggerView

from bdre.auth_forms import LoginForm
from bdre.metrics import metrics_view
from bdre.schema_view import SchemaView

admin.site.site_header = "BDRE administration"
admin.site.site_title = "BDRE"
admin.site.index_title = "Raw records"
admin.site.site_url = "/"


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness and database reachability, for load balancers and compose health checks."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok", "database": connection.vendor})


@csrf_exempt  # nothing is changed here; a CSRF refusal would hide the 404 behind HTML
def api_not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Unknown API paths (an id that is not a number, a misspelt resource) answer JSON like
    the rest of the API, not Django's HTML page."""
    detail = "Not found."
    if not request.path.endswith("/"):
        try:
            if resolve(request.path + "/").func is not api_not_found:
                detail = f"Not found: API paths end with a slash ({request.path}/)."
        except Resolver404:
            pass
    return JsonResponse({"detail": detail}, status=404)


# With DEBUG false, Django answers through these; bdre.error_pages.ErrorPageMiddleware makes
# DEBUG answer the same.
handler400 = "bdre.error_pages.bad_request"
handler403 = "bdre.error_pages.permission_denied"
handler404 = "bdre.error_pages.page_not_found"
handler500 = "bdre.error_pages.server_error"

urlpatterns = [
    path("", include("bdre.ui_urls")),
    # Before Django's own: the same view, with a form that refuses locked-out log-ins.
    path("accounts/login/", LoginView.as_view(authentication_form=LoginForm), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    # Asked for by browsers and crawlers whatever the pages link to.
    path("favicon.ico", RedirectView.as_view(url=static("bdre/favicon.svg")), name="favicon"),
    path("metrics", metrics_view, name="metrics"),  # operators only: bdre/metrics.py
    path("api/v1/", include("bdre.api_urls")),
    re_path(r"^api/v1/(?P<rest>[\s\S]*)$", api_not_found),  # ids may hold newlines
    path("api/schema/", SchemaView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
