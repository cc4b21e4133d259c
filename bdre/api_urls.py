"""The REST API under /api/v1/: what every app's ``api_routes`` module registered."""

from django.utils.module_loading import autodiscover_modules

from bdre.routes import MASTER_TABLES, extra_urls, router

autodiscover_modules("api_routes")

__all__ = ["MASTER_TABLES", "router", "urlpatterns"]

urlpatterns = [*extra_urls, *router.urls]
