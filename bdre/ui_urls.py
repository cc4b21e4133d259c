"""The browser UI's pages."""

from django.urls import path, re_path

from batches import views as batch_views
from bdre import token_views
from bdre import views as team_views
from bdre.ids import ID_REGEX
from lineage import views as lineage_views
from processes import views as process_views

ID = f"(?P<pk>{ID_REGEX})"

urlpatterns = [
    path("", process_views.dashboard, name="ui-dashboard"),
    re_path(rf"^jobs/{ID}/$", process_views.job_detail, name="ui-job"),
    re_path(
        rf"^jobs/{ID}/(?P<action>run|terminate|pause|resume)/$",
        process_views.job_action,
        name="ui-job-action",
    ),
    path("jobs/new/", process_views.job_new, name="ui-job-new"),
    path("jobs/from-template/", process_views.job_from_template, name="ui-job-from-template"),
    re_path(rf"^jobs/{ID}/schedule/$", process_views.schedule_edit, name="ui-job-schedule"),
    re_path(rf"^jobs/{ID}/save-template/$", process_views.template_save, name="ui-template-save"),
    path("templates/", process_views.template_list, name="ui-templates"),
    re_path(rf"^templates/{ID}/delete/$", process_views.template_delete, name="ui-template-delete"),
    path("teams/", team_views.team_list, name="ui-teams"),
    re_path(rf"^teams/{ID}/$", team_views.team_detail, name="ui-team"),
    path("tokens/", token_views.token_list, name="ui-tokens"),
    re_path(rf"^tokens/{ID}/revoke/$", token_views.token_revoke, name="ui-token-revoke"),
    re_path(rf"^runs/{ID}/$", process_views.run_detail, name="ui-run"),
    re_path(rf"^runs/{ID}/live/$", process_views.run_live, name="ui-run-live"),
    path("queue/", batch_views.queue_inspector, name="ui-queue"),
    re_path(
        rf"^queue/{ID}/(?P<action>requeue|discard)/$",
        batch_views.queue_action,
        name="ui-queue-action",
    ),
    path("batches/", batch_views.batch_list, name="ui-batches"),
    re_path(rf"^batches/{ID}/$", batch_views.batch_detail, name="ui-batch"),
    path("lineage/", lineage_views.search, name="ui-lineage"),
    re_path(rf"^lineage/nodes/{ID}/$", lineage_views.node, name="ui-lineage-node"),
]
