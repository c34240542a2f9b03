"""The submitters role of runs/roles.py (service accounts that submit runs through the
API), as a group, like the others in 0006."""

from django.db import migrations


def create_group(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Group.objects.get_or_create(name="submitters")


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0007_submission_keys"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(create_group, migrations.RunPython.noop)]
