from django.core.management.base import BaseCommand

from runs import engine


class Command(BaseCommand):
    help = "Run the recovery sweeper once: crash expired attempts, republish lost messages."

    def handle(self, *args: object, **options: object) -> None:
        self.stdout.write(str(engine.sweep()))
