from django.urls import path
from rest_framework.authtoken.views import obtain_auth_token
from rest_framework.routers import DefaultRouter

from batches.api import FileViewSet, QueueViewSet
from processes.api import ProcessViewSet, RunViewSet

router = DefaultRouter()
router.register("processes", ProcessViewSet, basename="process")
router.register("runs", RunViewSet, basename="run")
router.register("queue", QueueViewSet, basename="queue")
router.register("files", FileViewSet, basename="file")

urlpatterns = [
    path("auth/token/", obtain_auth_token, name="api-token"),
    *router.urls,
]
