from django.urls import path

from runs.pages.replica import reads_replica

from . import decide_views, views

app_name = "reconciliation"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("badge/", views.badge, name="badge"),
    path("history/", reads_replica(views.history), name="history"),
    path("claims/<int:claim_id>/", views.claim, name="claim"),
    path("claims/<int:claim_id>/resolve/", views.resolve, name="resolve"),
    path("claims/<int:claim_id>/take/", views.take, name="take"),
    path("claims/<int:claim_id>/release/", views.release, name="release"),
    path("claims/<int:claim_id>/check-again/", views.check_again, name="check_again"),
    path("decide/", decide_views.decide, name="decide"),
]
