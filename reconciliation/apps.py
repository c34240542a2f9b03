from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"

    def ready(self) -> None:
        # A resolution releases the claim's take, whoever resolves (an operator, a
        # probe, a script), in the resolution's own transaction.
        from runs.engine import claim_resolved

        from .services import release_on_resolution

        claim_resolved.connect(release_on_resolution, dispatch_uid="reconciliation.take")
        # "Decide all N matching" is a batch of the runs' batch machinery: what each of
        # its items does is this app's (reconciliation/decisions.py).
        from .decisions import register

        register()
        # The queue's badge in every page's navigation and its panel on the overview:
        # contributed here, so the run pages never import the queue.
        from runs.pages import contributions

        from .incidents import OVERVIEW_GROUPS, incidents
        from .queries import queue_size, queue_summary

        contributions.nav_badge("queue_size", queue_size)
        contributions.overview_panel("queue", queue_summary)
        contributions.overview_panel("incidents", lambda: incidents(OVERVIEW_GROUPS))
