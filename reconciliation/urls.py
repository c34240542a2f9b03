from django.urls import path

from . import views

app_name = "reconciliation"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("badge/", views.badge, name="badge"),
]
