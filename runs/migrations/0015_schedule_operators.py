"""Operators edit schedules in the admin (runs/roles.py OPERATOR_ADMIN_PERMISSIONS)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

CODENAMES = [f"{action}_schedule" for action in ("view", "add", "change", "delete")]


def grant(apps, schema_editor):
    # Permissions are normally created after all migrations ran; make them now.
    config = apps.get_app_config("runs")
    config.models_module = True
    create_permissions(config, apps=apps, verbosity=0)
    config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    operators, _ = Group.objects.get_or_create(name="operators")
    operators.permissions.add(
        *Permission.objects.filter(content_type__app_label="runs", codename__in=CODENAMES)
    )


def revoke(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    operators = Group.objects.filter(name="operators").first()
    if operators is not None:
        operators.permissions.remove(
            *Permission.objects.filter(content_type__app_label="runs", codename__in=CODENAMES)
        )


class Migration(migrations.Migration):
    dependencies = [("runs", "0014_schedules")]

    operations = [migrations.RunPython(grant, revoke)]
