import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.models import Run
from runs.reads.summaries import parse_run_id, run_summary


class Command(BaseCommand):
    help = "Show a run: its steps, attempts and claims (--json for one JSON object)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: object, **options: object) -> None:
        try:
            run = Run.objects.get(pk=parse_run_id(str(options["run_id"])))
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        except Run.DoesNotExist as exc:
            raise CommandError(f"no run with id {options['run_id']}") from exc
        summary = run_summary(run)
        if options["json"]:
            self.stdout.write(json.dumps(summary, indent=2))
            return
        w = self.stdout.write
        w(f"run {summary['id']}  {summary['workflow']} v{summary['version']}  {summary['status']}")
        w(f"input {json.dumps(summary['input'])}")
        if summary["deadline_at"]:
            w(f"deadline {summary['deadline_at']}")
        if summary["error"]:
            w(f"error {summary['error']}")
        w("")
        w(f"{'step':<24} {'kind':<14} {'status':<12} attempts")
        for step in summary["steps"]:
            w(f"{step['key']:<24} {step['kind']:<14} {step['status']:<12} {step['attempts']}")
            if "batches" in step:
                done = sum(1 for b in step["batches"] if b["status"] == "succeeded")
                counts = ", ".join(f"{n} {s}" for s, n in sorted(step["items"].items()))
                w(f"  {done}/{len(step['batches'])} batches succeeded; items: {counts or 'none'}")
            if step["error"]:
                w(f"  error: {step['error']}")
        if summary["claims"]:
            w("")
            w("claims")
            for claim in summary["claims"]:
                item = f"  (item {claim['item_key']})" if claim["item_key"] is not None else ""
                w(f"  {claim['status']:<11} {claim['kind']:<13} {claim['key']}{item}")
            if any("items" in step for step in summary["steps"]):
                w("  (a map's item claims that are done are counted under their step)")
