"""The pages of the queue and of batches (included by bdre.ui_urls)."""

from django.urls import path, re_path

from batches import views
from bdre.ids import ID_REGEX

ID = f"(?P<pk>{ID_REGEX})"

urlpatterns = [
    path("queue/", views.queue_inspector, name="ui-queue"),
    path("queue/bulk/", views.queue_bulk, name="ui-queue-bulk"),
    re_path(
        rf"^queue/{ID}/(?P<action>requeue|discard|retry)/$",
        views.queue_action,
        name="ui-queue-action",
    ),
    path("batches/", views.batch_list, name="ui-batches"),
    re_path(rf"^batches/{ID}/$", views.batch_detail, name="ui-batch"),
    re_path(rf"^tables/{ID}/$", views.table_detail, name="ui-table"),
    re_path(rf"^tables/{ID}/preview/$", views.table_preview, name="ui-table-preview"),
    re_path(
        rf"^tables/{ID}/preview/(?P<partition>{ID_REGEX})/live/$",
        views.table_preview_live,
        name="ui-table-preview-live",
    ),
]
