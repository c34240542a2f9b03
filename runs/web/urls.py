from django.urls import path

from runs.pages.replica import reads_replica

from . import actions, bulk, pauses, reports, views

app_name = "runs"

urlpatterns = [
    path("", reads_replica(views.overview), name="overview"),
    path("pauses/", pauses.pauses_page, name="pauses"),
    path("pauses/pause/", pauses.pause, name="pause"),
    path("pauses/<int:pause_id>/resume/", pauses.resume, name="resume"),
    path("reports/", reads_replica(reports.reports_page), name="reports"),
    path("reports/<slug:name>.csv", reads_replica(reports.report_csv), name="report_csv"),
    path("runs/", reads_replica(views.run_list), name="list"),
    path("workers/", views.worker_list, name="workers"),
    path("runs/new/", views.new_run, name="new"),
    # Before runs/<run_id>/: "bulk" and "batches" are not run ids.
    path("runs/bulk/", bulk.preview, name="bulk"),
    path("runs/batches/<int:batch_id>/", bulk.batch_detail, name="batch"),
    path("runs/<str:run_id>/", reads_replica(views.run_detail), name="detail"),
    path("runs/<str:run_id>/export.json", views.run_export, name="export"),
    path("runs/<str:run_id>/cancel/", actions.cancel, name="cancel"),
    path("runs/<str:run_id>/signal/", actions.signal, name="signal"),
    path("runs/<str:run_id>/retry/", actions.retry, name="retry"),
    path("runs/<str:run_id>/retry/preview/", actions.retry_preview, name="retry_preview"),
]
