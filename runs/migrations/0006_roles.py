"""The roles of runs/roles.py, as groups: present on every database from the start."""

from django.db import migrations

ROLES = ("operators", "viewers")


def create_groups(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    for name in ROLES:
        Group.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0005_claim_unresolved_at"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(create_groups, migrations.RunPython.noop)]
