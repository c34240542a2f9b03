"""Operators edit schedules in the admin (runs/roles.py OPERATOR_ADMIN_PERMISSIONS)."""

from django.db import migrations

from runs.migrations._grants import operators_may

GRANTS = {"schedule": ("view", "add", "change", "delete")}


grant, revoke = operators_may(GRANTS)


class Migration(migrations.Migration):
    dependencies = [("runs", "0014_schedules")]

    operations = [migrations.RunPython(grant, revoke)]
