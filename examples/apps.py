from django.apps import AppConfig


class ExamplesConfig(AppConfig):
    name = "examples"
    verbose_name = "Example workflows"
