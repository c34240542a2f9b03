import sys

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.models import Run
from runs.reads.summaries import parse_run_id
from runs.record.history import verify_run


class Command(BaseCommand):
    help = (
        "Check that each run's event log reproduces its rows (step statuses, claim outcomes, "
        "batch item counts). Exit status 1 if any run differs. No RUN_ID: every run."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_ids", nargs="*", metavar="RUN_ID")

    def handle(self, *args: object, **options: object) -> None:
        ids = [str(i) for i in options["run_ids"]]  # type: ignore[attr-defined]
        try:
            wanted = [parse_run_id(i) for i in ids]
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        runs = Run.objects.filter(pk__in=wanted) if wanted else Run.objects.all()
        found = {r.id for r in runs}
        missing = [str(i) for i in wanted if i not in found]
        if missing:
            raise CommandError(f"no run with id {', '.join(missing)}")
        bad = 0
        checked = 0
        for run in runs.order_by("created_at").only("id", "workflow", "version").iterator():
            checked += 1
            problems = verify_run(run.id)
            if problems:
                bad += 1
                self.stdout.write(f"DIFFERS {run.id} ({run.workflow} v{run.version})")
                for problem in problems:
                    self.stdout.write(f"  {problem}")
        self.stdout.write(f"{checked} run(s) checked, {bad} differ")
        if bad:
            sys.exit(1)
