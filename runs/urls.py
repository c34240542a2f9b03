from django.urls import path

from . import views

app_name = "runs"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("runs/", views.run_list, name="list"),
    path("runs/<str:run_id>/", views.run_detail, name="detail"),
]
