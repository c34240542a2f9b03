from typing import Any

from django.core.management.base import BaseCommand

from runs import engine


class Command(BaseCommand):
    help = (
        "Submit the due ticks of every enabled schedule once (what the beat does every "
        "RUNS_SCHEDULE_INTERVAL seconds); safe to run beside the beat: a tick yields one run."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        report = engine.fire_due_schedules()
        for name, tick, run_id in report.submitted:
            self.stdout.write(f"{name} {tick.isoformat()} -> run {run_id}")
        for name, error in report.errors.items():
            self.stderr.write(f"{name}: {error}")
        self.stdout.write(str(report))
