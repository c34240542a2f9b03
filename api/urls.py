"""The API's paths (docs/api.md), mounted at /api/. Anything else under /api/ answers
a JSON 404 in the error shape."""

from __future__ import annotations

from django.urls import path, re_path, register_converter

from runs.pages.replica import reads_replica

from . import docs, errors, views


class ClaimIdConverter:
    """A claim's (or a pause's) id: at most 18 digits, so it always fits PostgreSQL's
    bigint (a larger number is no claim: 404, never an out-of-range error from the
    database)."""

    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(ClaimIdConverter, "claim_id")
# A batch id is a bigint too.
register_converter(ClaimIdConverter, "batch_id")

app_name = "api"

runs = reads_replica(views.RunViewSet.as_view({"get": "list", "post": "create"}))
run = reads_replica(views.RunViewSet.as_view({"get": "retrieve"}))
export = views.RunViewSet.as_view({"get": "export"})
cancel = views.RunViewSet.as_view({"post": "cancel"})
retry_step = views.RunViewSet.as_view({"post": "retry_step"})
signal = views.RunViewSet.as_view({"post": "signal"})
steps = reads_replica(views.StepViewSet.as_view({"get": "list"}))
events = reads_replica(views.EventViewSet.as_view({"get": "list"}))
claims = views.ClaimViewSet.as_view({"get": "list"})
resolve = views.ClaimViewSet.as_view({"post": "resolve"})
take = views.ClaimViewSet.as_view({"post": "take"})
release = views.ClaimViewSet.as_view({"post": "release"})
workflows = views.WorkflowViewSet.as_view({"get": "list"})
pauses = views.PauseViewSet.as_view({"get": "list", "post": "create"})
resume_pause = views.PauseViewSet.as_view({"post": "resume"})
batches = views.BatchViewSet.as_view({"get": "list", "post": "create"})
batch_preview = views.BatchViewSet.as_view({"post": "preview"})
batch = views.BatchViewSet.as_view({"get": "retrieve"})
batch_items = views.BatchViewSet.as_view({"get": "items"})

urlpatterns = [
    path("runs/", runs, name="runs"),
    path("runs/<uuid:run_id>/", run, name="run"),
    path("runs/<uuid:run_id>/export/", export, name="run-export"),
    path("runs/<uuid:run_id>/steps/", steps, name="run-steps"),
    path("runs/<uuid:run_id>/events/", events, name="run-events"),
    path("runs/<uuid:run_id>/cancel/", cancel, name="run-cancel"),
    path("runs/<uuid:run_id>/steps/<str:step>/retry/", retry_step, name="run-step-retry"),
    path("runs/<uuid:run_id>/signals/<str:name>/", signal, name="run-signal"),
    path("claims/", claims, name="claims"),
    path("claims/<claim_id:claim_id>/resolve/", resolve, name="claim-resolve"),
    path("claims/<claim_id:claim_id>/take/", take, name="claim-take"),
    path("claims/<claim_id:claim_id>/release/", release, name="claim-release"),
    path("workflows/", workflows, name="workflows"),
    path("pauses/", pauses, name="pauses"),
    path("pauses/<claim_id:pause_id>/resume/", resume_pause, name="pause-resume"),
    path("batches/", batches, name="batches"),
    path("batches/preview/", batch_preview, name="batch-preview"),
    path("batches/<batch_id:batch_id>/", batch, name="batch"),
    path("batches/<batch_id:batch_id>/items/", batch_items, name="batch-items"),
    path("schema/", docs.SchemaView.as_view(), name="schema"),
    path("docs/", docs.DocsView.as_view(url_name="api:schema"), name="docs"),
    re_path(r"^", errors.not_found),
]
