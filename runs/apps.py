from importlib import import_module

from django.apps import AppConfig
from django.conf import settings


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        import config.checks  # noqa: F401  (registers the deployment checks)
        import runs.pages.sessions  # noqa: F401  (gives every login its lifetime)

        # Workflows register themselves on import; a worker knows exactly the
        # workflows these modules declare (docs/architecture.md#recovery).
        for module in settings.RUNS_WORKFLOW_MODULES:
            import_module(module)
