"""The pages of jobs, runs and templates (included by bdre.ui_urls)."""

from django.urls import path, re_path

from bdre.ids import ID_REGEX
from processes import operation_views, replay_views, run_views, views

ID = f"(?P<pk>{ID_REGEX})"

urlpatterns = [
    path("", views.dashboard, name="ui-dashboard"),
    re_path(rf"^jobs/{ID}/$", views.job_detail, name="ui-job"),
    re_path(
        rf"^jobs/{ID}/(?P<action>run|terminate|pause|resume)/$",
        views.job_action,
        name="ui-job-action",
    ),
    path("jobs/new/", views.job_new, name="ui-job-new"),
    path("jobs/from-template/", views.job_from_template, name="ui-job-from-template"),
    re_path(rf"^jobs/{ID}/schedule/$", views.schedule_edit, name="ui-job-schedule"),
    re_path(rf"^jobs/{ID}/edit/$", views.job_edit, name="ui-job-edit"),
    re_path(rf"^jobs/{ID}/backfill/$", replay_views.backfill, name="ui-job-backfill"),
    re_path(rf"^steps/{ID}/rewind/$", replay_views.rewind, name="ui-step-rewind"),
    re_path(rf"^steps/{ID}/reset-marker/$", replay_views.reset_marker, name="ui-step-reset-marker"),
    re_path(rf"^batches/{ID}/reprocess/$", replay_views.reprocess_batch, name="ui-batch-reprocess"),
    re_path(rf"^files/{ID}/reprocess/$", replay_views.reprocess_file, name="ui-file-reprocess"),
    re_path(rf"^jobs/{ID}/save-template/$", views.template_save, name="ui-template-save"),
    path("templates/", views.template_list, name="ui-templates"),
    re_path(rf"^templates/{ID}/delete/$", views.template_delete, name="ui-template-delete"),
    path("runs/", run_views.run_list, name="ui-runs"),
    path("dashboard/live/", views.dashboard_live, name="ui-dashboard-live"),
    path("pipeline/", views.pipeline, name="ui-pipeline"),
    re_path(rf"^runs/{ID}/$", views.run_detail, name="ui-run"),
    re_path(rf"^runs/{ID}/live/$", views.run_live, name="ui-run-live"),
    re_path(rf"^runs/{ID}/log/$", views.run_log, name="ui-run-log"),
    re_path(rf"^runs/{ID}/retry/$", views.run_retry, name="ui-run-retry"),
    path("operations/", operation_views.operation_list, name="ui-operations"),
    re_path(rf"^operations/{ID}/$", operation_views.operation_detail, name="ui-operation"),
    re_path(rf"^operations/{ID}/live/$", operation_views.operation_live, name="ui-operation-live"),
    re_path(rf"^jobs/{ID}/catch-up/$", operation_views.catch_up, name="ui-job-catch-up"),
]
