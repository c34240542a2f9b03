from django.urls import path

from . import operations, views

app_name = "runs"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("runs/", views.run_list, name="list"),
    path("runs/new/", views.new_run, name="new"),
    path("runs/<str:run_id>/", views.run_detail, name="detail"),
    path("runs/<str:run_id>/cancel/", operations.cancel, name="cancel"),
    path("runs/<str:run_id>/signal/", operations.signal, name="signal"),
    path("runs/<str:run_id>/retry/", operations.retry, name="retry"),
    path("runs/<str:run_id>/retry/preview/", operations.retry_preview, name="retry_preview"),
]
