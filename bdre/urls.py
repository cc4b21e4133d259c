from django.contrib import admin
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

admin.site.site_header = "BDRE administration"
admin.site.site_title = "BDRE"
admin.site.index_title = "Raw records"
admin.site.site_url = None  # no "view site" link until the browser UI has pages of its own


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness and database reachability, for load balancers and compose health checks."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok", "database": connection.vendor})


urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False)),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("api/v1/", include("bdre.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
]
